"""Stage 3 over the warehouse: tool graphs -> random walks + merged pairs -> task DAGs.

``load`` reads the usable environments and their accepted tools; :func:`run_one` calls
:func:`autoforge.dags.sample.sample_env` for one environment (the unit a flow fans out);
:func:`~autoforge.pipeline.common.persist` writes graphs, sequences, DAGs and drops at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from pydantic import Field

from autoforge.dags.sample import SampleResult, sample_counts, sample_env
from autoforge.dags.sequences import StartRule
from autoforge.pipeline.common import (TASKS_PER_ENV, EnvSelection, by_env, client_for, finish, given, load_environments,
                                       persist)
from autoforge.pipeline.corpus import judged_rules
from autoforge.pipeline.parallel import map_envs
from autoforge.types import EnvironmentRecord, Run, ToolCode
from autoforge.warehouse import reading

STAGE = "sample"
MIN_WALKS = 40  # walks (and merges) per environment at least; more for bigger batches (DEFAULT, see walks_for)


def walks_for(tasks_per_env: int) -> int:
    """Walks per environment for a task target: about one and a half tasks per walk (each walk gives
    up to ``dag_variants`` DAGs and a merged partner; a tool sequence holds at most
    ``tasks.quality.SEQUENCE_SHARE`` of the tasks, so the target needs many distinct sequences),
    never fewer than MIN_WALKS."""
    return max(MIN_WALKS, 2 * tasks_per_env // 3)


class SampleParams(EnvSelection):
    """Parameters of stage 3 (flow ``sample-tool-sequences``, the CLI's factory, the library path)."""

    seed: int = Field(0, description="random seed of the walks, merges and reasoning choices (same seed -> same rows)")
    tasks_per_env: int = Field(TASKS_PER_ENV, description="the task target downstream; sets the default walks and merges")
    walks: int | None = Field(None, description="random walks per environment (None: walks_for(tasks_per_env))")
    merges: int | None = Field(None, description="merged pairs of walks per environment (None: as many as walks)")
    min_len: int = Field(2, description="shortest walk, in tool calls")
    max_len: int = Field(5, description="longest walk, in tool calls")
    start: StartRule | Literal["auto"] = Field(
        "auto", description="where walks start: lookup | read | entry (no required id) | any, or auto (walks under every "
                            "rule, the best kept by dags.sequences.walk_score; each sequence records its rule, the run row "
                            "counts per rule the walks drawn and kept)")
    dag_variants: int = Field(2, description="DAGs per sequence (different reasoning choices)")
    backend: str = Field("offline", description='"offline" (name/type binding) or "openai" (the LLM judges candidate edges)')

    @property
    def n_walks(self) -> int:
        return self.walks if self.walks is not None else walks_for(self.tasks_per_env)

    @property
    def n_merges(self) -> int:
        return self.merges if self.merges is not None else self.n_walks

    def run_row(self, batch_id: str | None = None) -> Run:
        return Run.make(STAGE, {"seed": self.seed, **self.selection(), "walks": self.n_walks, "merges": self.n_merges,
                                "min_len": self.min_len, "max_len": self.max_len, "start": self.start,
                                "dag_variants": self.dag_variants, "method": self.backend}, batch_id)


@dataclass
class SampleInputs:
    envs: list[EnvironmentRecord]
    tools: dict[str, list[ToolCode]]
    procedures: dict[str, list[list[str]]] = field(default_factory=dict)  # env -> its policy's required tool sequences


def load(warehouse: str | None, params: SampleParams) -> SampleInputs:
    envs, tools = load_environments(warehouse, params)
    judged = judged_rules(warehouse, [e.env_id for e in envs])
    # a policy's required sequences, and a write allowed only after every read its conditions name
    procedures = {e: [c["steps"] for c in checks if c.get("op") == "sequence" and c.get("steps")]
                  + [list(c["via"]) + list(c["tools"]) for c in checks if c.get("op") == "call_before" and c.get("all")
                     and c.get("via") and len(c.get("tools") or []) == 1]
                  for e, checks in judged.items()}
    return SampleInputs(envs, by_env(tools), procedures)


def run_one(env: EnvironmentRecord, tools: list[ToolCode], params: SampleParams, run_id: str,
            client: Any = None, procedures: list[list[str]] | None = None) -> SampleResult:
    """One environment (``client``: the LLM client of an online backend, built per unit when None;
    ``procedures``: its policy's required tool sequences)."""
    client = client if client is not None else client_for(params.backend)
    return sample_env(env, tools, params.seed, walks=params.n_walks, merges=params.n_merges, min_len=params.min_len,
                      max_len=params.max_len, start=params.start, dag_variants=params.dag_variants, client=client,
                      run_id=run_id, procedures=procedures)


def run(warehouse: str | None, params: SampleParams | None = None, *, batch_id: str | None = None, client: Any = None,
        **fields: Any) -> dict[str, Any]:
    """The whole stage without Prefect; returns its counts."""
    params = params or SampleParams(**fields)
    row = params.run_row(batch_id)
    t0 = time.perf_counter()
    with reading(warehouse):  # one connection for the load's questions
        inp = load(warehouse, params)
    client = client if client is not None else client_for(params.backend)
    tools = [inp.tools.get(e.env_id, []) for e in inp.envs]
    results = map_envs([partial(run_one, e, t, params, row.run_id, client, inp.procedures.get(e.env_id))
                        for e, t in zip(inp.envs, tools)],
                       [len(t) for t in tools], local=client is not None)  # an online client stays here (map_envs)
    counts = sample_counts(results, time.perf_counter() - t0)
    persist(warehouse, results, finish(row, counts))
    return counts


def run_sample(warehouse: str | None, seed: int | None = None, *, batch_id: str | None = None, client: Any = None,
               **fields: Any) -> dict[str, Any]:
    """Stage 3 over the warehouse (``fields``: any of :class:`SampleParams`; None: its default)."""
    return run(warehouse, SampleParams(**given(seed=seed), **fields), batch_id=batch_id, client=client)
