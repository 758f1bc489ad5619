"""One declaration per parameter: the flows, the CLI and the settings agree with the params models.

Every default of a stage knob lives in its pydantic params model (autoforge/pipeline/<stage>.py).
The flows take their signatures from the models (flows/_params.py), the CLI's flags default to
None ("the model's default") or to the model's value, and the ranges of autoforge/settings.py
hold every model default. A knob two stages share has one default.
"""

from __future__ import annotations

import argparse
import inspect

import pytest
from pydantic import BaseModel

from autoforge.pipeline import FactoryParams, GenerateParams, IngestParams, SampleParams, SynthesizeParams, VerifyParams
from autoforge.pipeline.evaluate import EvalParams
from autoforge.settings import PARAMS, VARS
from flows._params import RUN_PARAMS

FLOWS = {  # flow module:function -> its params model
    "flows.factory:factory_flow": FactoryParams,
    "flows.ingest:ingest_flow": IngestParams,
    "flows.synthesize:synthesize_flow": SynthesizeParams,
    "flows.sample:sample_flow": SampleParams,
    "flows.generate:generate_flow": GenerateParams,
    "flows.verify:verify_flow": VerifyParams,
    "flows.evaluate:evaluate_flow": EvalParams,
}
CLI = {"factory": FactoryParams, "ingest": IngestParams, "synthesize": SynthesizeParams, "eval": EvalParams}
MODELS = sorted(set(FLOWS.values()), key=lambda m: m.__name__)
# Same name, different knob, on purpose (each says why).
DIFFERENT = {
    ("bundled", "FactoryParams"): "a factory batch ingests the bundled corpus unless told not to; the ingest stage "
                                  "alone reads only the paths it is given",
}


def default(model: type[BaseModel], name: str):
    return model.model_fields[name].get_default(call_default_factory=True)


def load(entry: str):
    import importlib

    module, name = entry.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("entry", sorted(FLOWS))
def test_flow_parameters_are_the_model_fields_with_their_defaults(entry):
    model = FLOWS[entry]
    sig = inspect.signature(load(entry).fn).parameters
    fields = [n for n in model.model_fields if n != "env_ids"]  # the flows take a name selection, not ids
    assert [n for n in sig if n in model.model_fields] == fields
    assert set(sig) - set(fields) <= set(RUN_PARAMS), f"{entry} declares parameters of its own: {set(sig) - set(fields)}"
    for name in fields:
        assert sig[name].default == default(model, name), (entry, name)
        assert sig[name].annotation == model.model_fields[name].annotation, (entry, name)
    doc = inspect.getdoc(load(entry).fn)
    assert all(f"    {n}: " in doc for n in sig), f"{entry}: the UI's help misses a parameter"


def test_a_knob_shared_by_stages_has_one_default():
    seen: dict[str, tuple[str, object]] = {}
    for model in MODELS:
        for name in model.model_fields:
            if (name, model.__name__) in DIFFERENT:
                continue
            value = default(model, name)
            first = seen.setdefault(name, (model.__name__, value))
            assert first[1] == value, f"{name}: {first[0]} says {first[1]!r}, {model.__name__} says {value!r}"
    assert default(FactoryParams, "tasks_per_env") == default(SampleParams, "tasks_per_env") == \
        default(GenerateParams, "tasks_per_env") == 110


def test_the_factory_hands_its_own_values_to_the_stages():
    stages = FactoryParams(tasks_per_env=7, seed=3).stage_params()
    assert stages["sample"].tasks_per_env == stages["generate"].tasks_per_env == 7
    assert stages["sample"].seed == stages["generate"].seed == 3


def test_every_model_default_is_within_its_settings_range():
    for model in MODELS:
        for name in model.model_fields:
            value = default(model, name)
            if name in PARAMS and value is not None:
                assert PARAMS[name].problem(value) is None, (model.__name__, name, value)


def test_settings_that_name_a_model_knob_agree():
    from flows._common import FACTORY_DEFAULT, STAGE_DEFAULT

    for model in MODELS:
        if "backend" in model.model_fields:
            assert default(model, "backend") == VARS["backend"].default, model.__name__
    assert VARS["task_runner"].default_text == STAGE_DEFAULT == FACTORY_DEFAULT


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    import autoforge.cli as cli

    build = getattr(cli, "build_parser", None)
    if build is None:
        pytest.skip("autoforge.cli exposes no build_parser()")
    sub = next(a for a in build()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


@pytest.mark.parametrize("cmd", sorted(CLI))
def test_cli_flag_defaults_are_none_or_the_model_default(cmd):
    model = CLI[cmd]
    parser = _subcommands()[cmd]
    checked = 0
    for action in parser._actions:
        if action.dest not in model.model_fields or (action.dest, model.__name__) in DIFFERENT:
            continue
        checked += 1
        if action.default is not None and not (action.dest == "paths" and action.default == []):
            assert action.default == default(model, action.dest), (cmd, action.dest, action.default)
    assert checked, f"autoforge {cmd}: no flag names a field of {model.__name__}"


def test_model_flow_refuses_a_body_that_does_not_match_and_an_unknown_run_parameter():
    from flows._params import model_flow

    with pytest.raises(TypeError, match=r"calls it with \(params, warehouse, batch_id, task_runner, dask_address\)"):
        model_flow(VerifyParams)(lambda params, warehouse: None)
    with pytest.raises(ValueError, match="unknown run parameter"):
        model_flow(VerifyParams, run=("warehous",))
