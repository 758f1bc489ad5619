"""Answer tasks: computing code for stateless tools, the answer an answer DAG asks for, the
normalized match of a final message, and the reward of both task kinds."""

from __future__ import annotations

import pytest

from autoforge.dags.answers import answer_candidates
from autoforge.domain.operands import unit_params
from autoforge.envs.code.base import ToolDraft
from autoforge.envs.code.compute import compute_draft
from autoforge.envs.runtime import Environment
from autoforge.rollout.reward import score
from autoforge.tasks.answers import answer_given_away, answer_match, numbers_in
from autoforge.types import GoldAnswer, Task, ToolCode, ToolSpec, state_hash


def _spec(name: str, description: str, props: dict, required: list[str] | None = None, output: dict | None = None) -> ToolSpec:
    return ToolSpec(tool_id=f"tool_{name}", toolset="calc", name=name, description=description, doc_id="doc",
                    parameters={"type": "object", "properties": props, "required": required if required is not None else list(props)},
                    output_schema=output)


def _call(spec: ToolSpec, **args):
    draft = compute_draft(spec, ToolDraft(name=spec.name, source="", kind="list", collection=None, effect="read",
                                          output_schema=None))
    assert draft is not None, spec.name
    tool = ToolCode(code_id=f"code_{spec.name}", env_id="env_calc", tool_id=spec.tool_id, name=spec.name, source=draft.source,
                    status="accepted", effect="read", kind=draft.kind, parameters=spec.parameters,
                    output_schema=draft.output_schema, function_name=draft.function_name, arg_map=draft.arg_map or {})
    env = Environment([tool])
    try:
        env.reset({})
        return env.call(spec.name, args).output
    finally:
        env.close()


NUM = {"type": "number"}
LIST = {"type": "array", "items": {"type": "number"}}


def test_catalogued_operations_compute_and_refuse_bad_operands():
    assert _call(_spec("add", "Add two numbers.", {"a": NUM, "b": NUM}), a=2, b=3.5) == {"result": 5.5}
    assert _call(_spec("divide", "Divide one number by another.", {"a": NUM, "b": NUM}), a=1, b=4) == {"result": 0.25}
    assert "error" in _call(_spec("divide", "Divide one number by another.", {"a": NUM, "b": NUM}), a=1, b=0)
    power = _spec("power", "Raise a number to a power.", {"exponent": NUM, "base": NUM})  # roles, not order
    assert _call(power, base=2, exponent=5) == {"result": 32}
    mean = _spec("mean", "Calculate the mean of a list of numbers.", {"numbers": LIST},
                 output={"type": "object", "properties": {"average": {"type": "number"}}})
    assert _call(mean, numbers=[1, 2, 6]) == {"average": 3.0}  # the documented output field
    assert "error" in _call(mean, numbers=[])
    sd = _spec("standard_deviation", "Calculate the standard deviation of a list of numbers.", {"numbers": LIST})
    assert _call(sd, numbers=[2, 4, 4, 4, 5, 5, 7, 9]) == {"result": 2.0}
    root = _spec("square_root", "Square root with precision.", {"number": NUM, "precision": {"type": "integer"}})
    assert _call(root, number=2, precision=3) == {"result": 1.414}
    assert "error" in _call(root, number=-4, precision=2)
    rnd = _spec("round_number", "Round a number.", {"number": NUM, "decimal_places": {"type": "integer", "default": 0}},
                required=["number"])
    assert _call(rnd, number=2.675, decimal_places=1) == {"result": 2.7}


def test_unit_conversion_converts_within_a_dimension_and_refuses_across():
    conv = _spec("convert_units", "Convert a value from one unit to another.",
                 {"value": NUM, "from_unit": {"type": "string"}, "to_unit": {"type": "string"}})
    assert unit_params(conv.parameters) == ("value", "from_unit", "to_unit")
    assert _call(conv, value=1, from_unit="miles", to_unit="km")["result"] == pytest.approx(1.609344)
    assert _call(conv, value=100, from_unit="celsius", to_unit="fahrenheit")["result"] == pytest.approx(212)
    assert "error" in _call(conv, value=1, from_unit="kg", to_unit="meters")
    assert "error" in _call(conv, value=1, from_unit="parsec", to_unit="meters")


def test_a_tool_outside_the_catalogue_keeps_its_template():
    spec = _spec("geocode", "Look up the coordinates of a place.", {"place": {"type": "string"}})
    assert compute_draft(spec, ToolDraft(name="geocode", source="x", kind="list", collection=None, effect="read",
                                         output_schema=None)) is None


def test_answer_candidates_skip_ids_echoes_and_booleans():
    tool = ToolCode(code_id="c", env_id="e", tool_id="t", name="fetch_page", source="", status="accepted", effect="read",
                    parameters={"type": "object", "properties": {"url": {"type": "string"}}},
                    output_schema={"type": "object", "properties": {
                        "pages": {"type": "array", "items": {"type": "object", "properties": {
                            "page_id": {"type": "string"}, "url": {"type": "string"}, "title": {"type": "string"},
                            "cached": {"type": "boolean"}}}},
                        "count": {"type": "integer"}}})
    paths = [p for p, _ in answer_candidates(tool, {"page_id"})]
    assert "pages.0.title" in paths and "pages.*.title" in paths and "count" in paths
    assert not any(p.endswith(("page_id", "url", "cached")) for p in paths)


def test_answer_match_is_normalized():
    num = GoldAnswer(value=1234.5678, kind="number", tolerance=1e-4, field="result")
    assert answer_match("The result is 1,234.57.", num)  # within 1e-4 relative
    assert not answer_match("The result is 1,240.", num) and not answer_match("", num)
    assert numbers_in("from -3.5 to 1e3") == [-3.5, 1000.0]
    text = GoldAnswer(value="Quiet River", kind="string", field="title")
    assert answer_match("It is called   quiet river.", text) and not answer_match("quiet riverside", text)
    many = GoldAnswer(value=["Lisbon", "Osaka"], kind="list", field="city")
    assert answer_match("osaka and Lisbon", many) and not answer_match("Lisbon only", many)
    assert answer_given_away("what is the mean?", num, {"a": 1234.5678})  # the user's own value
    assert answer_given_away("what is the mean?", num, {"numbers": [1234.5678, 2]}) is None  # picked out of a list


def test_an_answer_task_needs_the_state_unchanged_and_the_answer_stated():
    state = {"notes": {"N1": {"note_id": "N1", "text": "x"}}}
    task = Task(task_id="t", env_id="e", dag_id="d", request="r", user_facts={}, initial_state=state, gold_state=state,
                gold_state_hash=state_hash(state), gold_calls=[], n_tool_calls=1, dag_depth=1, n_reasoning_nodes=0,
                n_requirements=1, kind="answer", gold_answer=GoldAnswer(value=42, kind="number", field="result"))
    assert score(task, state, message="All done: the result is 42.")[0] == 1.0
    rew, info = score(task, state, message="All done.")
    assert rew == 0.0 and info["answer_match"] is False and info["state_match"] is True
    changed = {"notes": {}}
    assert score(task, changed, message="the result is 42")[0] == 0.0
    assert score(task, None, message="the result is 42")[0] is None  # cannot score without a final state


def test_state_tasks_score_as_before():
    a, b = {"x": {"1": {"v": 1}}}, {"x": {"1": {"v": 2}}}
    task = Task(task_id="t", env_id="e", dag_id="d", request="r", user_facts={}, initial_state=a, gold_state=b,
                gold_state_hash=state_hash(b), gold_calls=[], n_tool_calls=1, dag_depth=1, n_reasoning_nodes=0,
                n_requirements=1)
    assert score(task, b, message="")[0] == 1.0 and score(task, a, message="the answer is 2")[0] == 0.0


def test_sequence_cap_spreads_tasks_over_tool_sequences():
    from autoforge.tasks.quality import sequence_cap

    assert sequence_cap(110) == 3 and sequence_cap(10) == 3 and sequence_cap(400) == 10
