"""The one home of every warehouse read and write: one module per stage.

Each stage module has a pydantic params model (used by the Prefect flow, the CLI and the library
path alike), ``load`` (what the stage reads), a per-environment unit that calls the pure stage
function of its package (``tooldocs``, ``envs``, ``dags``, ``tasks``, ``rollout``, ``rl``: those
take records and return records and never import the warehouse), and one ``persist`` (one
transaction). Flows in ``flows/`` are thin recipes over these modules.

============  =========================================  ============================
stage         module                                     pure functions it calls
============  =========================================  ============================
1 ingest      :mod:`autoforge.pipeline.ingest`           ``tooldocs.ingest_paths``
2 synthesize  :mod:`autoforge.pipeline.synthesize`       ``envs.synthesize_environment``
3 sample      :mod:`autoforge.pipeline.sample`           ``dags.sample.sample_env``
4 generate    :mod:`autoforge.pipeline.generate`         ``tasks.generate.generate_env``
5 verify      :mod:`autoforge.pipeline.verify`           ``tasks.verify.verify_env``
1-5 factory   :mod:`autoforge.pipeline.factory`          the five above, one batch id
============  =========================================  ============================

Callers outside the stages (the CLI, ``autoforge.integrations``, ``benchmarks/``) read and write
the warehouse through three more modules, never through ``autoforge.warehouse``:
:mod:`~autoforge.pipeline.corpus` (typed reads: environments, accepted tools, tasks, the funnel),
:mod:`~autoforge.pipeline.export` (relations by name, ``autoforge sql``, ``autoforge export``) and
:mod:`~autoforge.pipeline.admin` (migrations, where the warehouse is, writes outside a stage).
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it. Imported on first use (PEP 562), so ``autoforge sql`` and
# ``autoforge --help`` load the module they need and not every stage with its LLM client.
_HOMES = {
    "BACKENDS": "common",
    "funnel_rows": "corpus",
    **dict.fromkeys(("EMPTY_EXIT_CODE", "STAGES", "FactoryParams", "empty_environments", "environment_quality",
                     "environment_yield", "run_factory"), "factory"),
    "GenerateParams": "generate", "run_generate": "generate",
    "IngestParams": "ingest", "run_ingest": "ingest",
    "SampleParams": "sample", "run_sample": "sample",
    "SynthesizeParams": "synthesize", "run_synthesis": "synthesize",
    "VerifyParams": "verify", "run_verify": "verify",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:  # not ours: lets ``from autoforge.pipeline import admin`` import the submodule
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
