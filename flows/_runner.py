"""The task runner of the fan-out stages: one thread per core.

Stage tasks are CPU-bound (the GIL, plus one sandbox worker process per open environment), so
more threads than cores only adds contention. Override per run with
``AUTOFORGE_STAGE_WORKERS``; for a cluster, swap in a Dask/Ray runner (README "Running on Prefect").
"""

from __future__ import annotations

import os

from prefect.task_runners import ThreadPoolTaskRunner


def stage_task_runner() -> ThreadPoolTaskRunner:
    workers = int(os.environ.get("AUTOFORGE_STAGE_WORKERS") or os.cpu_count() or 1)
    return ThreadPoolTaskRunner(max_workers=max(1, workers))
