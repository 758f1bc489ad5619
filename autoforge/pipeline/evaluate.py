"""Stage 6 over the warehouse: evaluate an agent with a simulated user on curated tasks.

``run(warehouse, EvalParams(agent="oracle", user="offline", trials=4, ...))`` (or
``run_eval(warehouse, agent="oracle", ...)`` with the same fields as keywords) loads curated
(``status='verified'``) tasks, their DAGs, accepted tool code and specs
(:func:`load_eval_inputs`), resolves the agent and user names (:func:`make_agent_factory`:
``hf:<model dir>`` loads a local model through :mod:`autoforge.rl`), plays and scores the
episodes with :func:`autoforge.rollout.evaluate.evaluate_tasks`, writes the episodes, the
``eval_results`` rows, the LLM calls and the run in one transaction, and returns the summary
(:func:`autoforge.rollout.evaluate.format_report` prints it).

:class:`EvalParams` is the one description of an evaluation: ``autoforge eval``, the
``evaluate`` Prefect flow and library callers all build one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from pydantic import Field

from autoforge.envs.interface import EnvFactory, default_env_factory
from autoforge.errors import ConfigError
from autoforge.pipeline.common import StageParams
from autoforge.pipeline.corpus import accepted_tools, env_tool_specs, judged_rules
from autoforge.rollout.batch import AgentFactory
from autoforge.rollout.engine import EpisodeConfig
from autoforge.rollout.evaluate import (AGENT_NAMES, USER_NAMES, evaluate_tasks, format_report, make_user_factory,
                                        openai_client)
from autoforge.rollout.evaluate import make_agent_factory as _rollout_agent_factory
from autoforge.rollout.judge import JUDGES, make_judge
from autoforge.rollout.users import ErrorRates
from autoforge.types import Run, Task, TaskDag, ToolCode, ToolSpec
from autoforge.warehouse import query, read_records, write_records

__all__ = ["AGENT_NAMES", "USER_NAMES", "EvalParams", "format_report", "load_eval_inputs", "make_agent_factory", "run",
           "run_eval"]

SPLITS = ("train", "test")


class EvalParams(StageParams):
    """Parameters of one evaluation (flow ``evaluate``, ``autoforge eval``, the library path)."""

    agent: str = Field("oracle", description="oracle | random | openai[:model] | hf:<model dir>")
    user: str = Field("offline", description="offline (scripted) | llm[:model] (OpenAI-compatible)")
    trials: int = Field(1, description="episodes per task: the K of pass^k")
    split: str | None = Field(None, description="'test' (held out), 'train', or None for both")
    env: str | None = Field(None, description="only this environment (name or id)")
    limit: int | None = Field(None, description="at most this many tasks")
    concurrency: int = Field(4, description="episodes played at once (threads)")
    user_error_rate: float = Field(0.0, description="injected user errors per episode, split evenly over "
                                                    "wrong_fact / withheld_fact / premature_stop")
    seed: int = Field(0, description="seed of the injected errors and of sampling agents")
    judge: str = Field("rule", description="rule | llm | none: the user-error judge")
    max_turns: int = Field(40, description="agent turns per episode")
    max_tokens: int = Field(32_768, description="agent tokens per episode")
    max_new_tokens: int = Field(1024, description="tokens per agent turn")
    temperature: float = Field(0.0, description="sampling temperature of the agent and of an LLM user")

    def validate_for_run(self) -> None:
        """Fail fast, with what to change, on parameters that cannot work (e.g. typed into the Prefect UI)."""
        from autoforge.settings import check_param, get_settings

        get_settings()  # a bad AUTOFORGE_* setting stops the evaluation before anything is played or written
        for name in ("trials", "concurrency", "limit", "user_error_rate", "seed", "max_turns", "max_tokens",
                     "max_new_tokens", "temperature"):
            if getattr(self, name) is not None:
                check_param(name, getattr(self, name))
        if self.split is not None and self.split not in SPLITS:
            raise ConfigError(f"split must be 'train' or 'test', got {self.split!r}")
        if self.judge not in JUDGES:
            raise ConfigError(f"unknown judge {self.judge!r}; valid judges: {', '.join(JUDGES)}")


# --------------------------------------------------------------------------- agents


def _local_agent_factory(model_dir: str, **kw) -> AgentFactory:
    """The agent of ``hf:<model dir>``; ConfigError (not a loader traceback) when the folder holds no model."""
    where = Path(model_dir).expanduser()
    if not (where / "config.json").is_file():
        raise ConfigError(f"agent 'hf:{model_dir}': {str(where)!r} is not a local transformers model directory (no "
                          "config.json); give hf:<folder with config.json, weights and tokenizer>, e.g. the "
                          "checkpoint folder `autoforge train` prints")
    from autoforge.rl.agent import hf_agent_factory  # torch: only for hf:<model dir>

    try:
        return hf_agent_factory(model_dir, **kw)
    except (OSError, ValueError) as exc:  # transformers: missing or unreadable tokenizer / weights
        raise ConfigError(f"agent 'hf:{model_dir}': cannot load the model in {str(where)!r}: "
                          f"{str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}; it needs "
                          "config.json, weights and a tokenizer with a chat template") from exc


def make_agent_factory(name: str, *, settings=None, temperature: float = 0.0, recorder=None,
                       max_new_tokens: int = 1024) -> tuple[AgentFactory, str]:
    """``(factory, agent name)`` for any of :data:`AGENT_NAMES`, ``hf:<model dir>`` included."""
    return _rollout_agent_factory(name, settings=settings, temperature=temperature, recorder=recorder,
                                  max_new_tokens=max_new_tokens, local_loader=_local_agent_factory)


# --------------------------------------------------------------------------- reads


def load_eval_inputs(warehouse: str | None, *, split: str | None = None, env: str | None = None,
                     limit: int | None = None, status: str = "verified", task_ids: Iterable[str] | None = None):
    """Curated tasks (``status``), their DAGs, accepted tool code and tool specs, from the warehouse.

    Returns ``(tasks, dags by id, tool code by env id, tool specs by env id)``.
    """
    where, params = ["status = :status"], {"status": status}
    if split is not None:
        if split not in SPLITS:
            raise ConfigError(f"split must be 'train' or 'test', got {split!r}")
        where.append("split = :split")
        params["split"] = split
    if env is not None:
        rows = query(warehouse, "SELECT env_id FROM environments WHERE env_id = :e OR name = :e", {"e": env},
                     read_only_check=False)
        env_ids = sorted({r["env_id"] for r in rows}) or [env]
        where.append("env_id IN (" + ", ".join(f":env{i}" for i in range(len(env_ids))) + ")")
        params.update({f"env{i}": e for i, e in enumerate(env_ids)})
    tasks = read_records(warehouse, Task, where=" AND ".join(where), params=params)
    if task_ids is not None:
        wanted = set(task_ids)
        tasks = [t for t in tasks if t.task_id in wanted]
    if limit is not None:
        tasks = tasks[:limit]
    dags: dict[str, TaskDag] = {}
    tools_by_env: dict[str, list[ToolCode]] = {}
    specs_by_env: dict[str, list[ToolSpec]] = {}
    for env_id in sorted({t.env_id for t in tasks}):
        for d in read_records(warehouse, TaskDag, where="env_id = :e", params={"e": env_id}):
            dags[d.dag_id] = d
        tools_by_env[env_id] = accepted_tools(warehouse, [env_id])
        specs_by_env[env_id] = env_tool_specs(warehouse, env_id)
    return tasks, dags, tools_by_env, specs_by_env


# --------------------------------------------------------------------------- the stage


def run(warehouse: str | None, params: EvalParams | None = None, *, error_rates: ErrorRates | None = None,
        settings=None, env_factory: EnvFactory | None = None, write: bool = True) -> dict[str, Any]:
    """Evaluate ``params.agent`` with ``params.user`` on curated tasks; store and return the summary.

    ``user_error_rate`` is split evenly over the three injected error kinds unless
    ``error_rates`` gives them one by one. ``settings``: the LLM settings of openai / llm names
    (default: the environment's). ``env_factory``: how environments are built (default: the
    sandboxed runtime). ``write=False`` stores nothing. Returns
    :meth:`autoforge.rollout.evaluate.EvalReport.summary` (``eval_id``, ``results`` rows, ``judge``
    precision/recall, ``failures`` with reasons, ...) plus ``run_id``.
    """
    from autoforge.llm import MemoryRecorder

    p = params or EvalParams()
    p.validate_for_run()
    rates = error_rates or ErrorRates.uniform(p.user_error_rate)
    recorder = MemoryRecorder()
    agent_factory, agent_name = make_agent_factory(p.agent, settings=settings, temperature=p.temperature,
                                                   recorder=recorder, max_new_tokens=p.max_new_tokens)
    try:
        user_factory, user_name = make_user_factory(p.user, settings=settings, temperature=p.temperature,
                                                    recorder=recorder)
        judge_client = openai_client(settings, None, recorder) if p.judge == "llm" else None
        the_judge = make_judge(p.judge, judge_client)
        tasks, dags, tools_by_env, specs_by_env = load_eval_inputs(warehouse, split=p.split, env=p.env, limit=p.limit)
        if not tasks:
            raise ConfigError(f"no curated tasks to evaluate (status='verified', split={p.split!r}, env={p.env!r}); "
                              "run `autoforge factory` first or relax the filters")
        run_params = {"agent": agent_name, "user": user_name, "trials": p.trials, "split": p.split, "env": p.env,
                      "limit": p.limit, "error_rates": rates.__dict__, "seed": p.seed, "judge": p.judge,
                      "max_turns": p.max_turns, "max_tokens": p.max_tokens, "tasks": sorted(t.task_id for t in tasks)}
        run_row = Run.make("eval", run_params)
        report = evaluate_tasks(
            tasks, dags, tools_by_env, agent_factory=agent_factory, user_factory=user_factory, agent_name=agent_name,
            user_name=user_name, trials=p.trials, error_rates=rates, judge=the_judge, concurrency=p.concurrency,
            env_factory=env_factory or default_env_factory,
            config=EpisodeConfig(max_turns=p.max_turns, max_tokens=p.max_tokens), specs_by_env=specs_by_env,
            seed=p.seed, run_id=run_row.run_id, rules_by_env=judged_rules(warehouse, tools_by_env))
    finally:
        getattr(agent_factory, "close", lambda: None)()
    summary = report.summary()
    if write:
        calls = list(getattr(recorder, "calls", []) or [])
        write_records(warehouse, [*report.episodes, *report.results, *calls],
                      run_row.finish(episodes=len(report.episodes), success_rate=summary["success_rate"],
                                     eval_id=report.eval_id))
    summary["run_id"] = run_row.run_id
    return summary


def run_eval(warehouse: str | None, *, error_rates: ErrorRates | None = None, settings=None,
             env_factory: EnvFactory | None = None, write: bool = True, **fields: Any) -> dict[str, Any]:
    """Stage 6 over the warehouse (``fields``: any of :class:`EvalParams`); see :func:`run`."""
    return run(warehouse, EvalParams(**fields), error_rates=error_rates, settings=settings, env_factory=env_factory,
               write=write)
