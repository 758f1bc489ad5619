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

from autoforge.pipeline.common import BACKENDS
from autoforge.pipeline.corpus import funnel_rows
from autoforge.pipeline.factory import (EMPTY_EXIT_CODE, STAGES, FactoryParams, empty_environments,
                                        environment_quality, environment_yield, run_factory)
from autoforge.pipeline.generate import GenerateParams, run_generate
from autoforge.pipeline.ingest import IngestParams, run_ingest
from autoforge.pipeline.sample import SampleParams, run_sample
from autoforge.pipeline.synthesize import SynthesizeParams, run_synthesis
from autoforge.pipeline.verify import VerifyParams, run_verify

__all__ = ["BACKENDS", "EMPTY_EXIT_CODE", "STAGES", "empty_environments", "environment_quality", "environment_yield", "FactoryParams", "GenerateParams", "IngestParams", "SampleParams", "SynthesizeParams",
           "VerifyParams", "funnel_rows", "run_factory", "run_generate", "run_ingest", "run_sample",
           "run_synthesis", "run_verify"]
