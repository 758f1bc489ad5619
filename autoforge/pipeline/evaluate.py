"""Stage 6 over the warehouse: evaluate an agent with a simulated user on curated tasks.

``run(warehouse, EvalParams(agent="oracle", user="offline", trials=4, ...))`` (or
``run_eval(warehouse, agent="oracle", ...)`` with the same fields as keywords) loads curated
(``status='verified'``) tasks, their DAGs, accepted tool code and specs
(:func:`load_eval_inputs`), resolves the agent and user names (:func:`make_agent_factory`:
``hf:<model dir>`` loads a local model through :mod:`autoforge.rl`), plays and scores the
episodes with :func:`autoforge.rollout.evaluate.evaluate_tasks`, writes the episodes, the
``eval_results`` rows, the LLM calls and the run in one transaction, and returns the summary
(:func:`autoforge.rollout.evaluate.format_report` prints it).

A checkpoint a training run wrote holds ``agent.json`` (:mod:`autoforge.rl.agent_card`): how
the run showed it the tools, the system prompt, its limits, temperature, trials, seed, user and
judge, and the held-out tasks it evaluated. ``hf:<checkpoint>`` plays with those settings
(:func:`recorded_params`) except the fields set explicitly (``EvalParams.model_fields_set``: the
flags given on the command line), and ``recorded_tasks`` plays exactly the recorded tasks, so
the run's per-environment pass^1 comes out again.

:class:`EvalParams` is the one description of an evaluation: ``autoforge eval``, the
``evaluate`` Prefect flow and library callers all build one.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Iterable, Literal

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
    tool_schema: Literal["full", "compact", "brief"] = Field(
        "full", description="how tools are shown to the agent: full JSON Schemas, compact, or brief (a small "
                            "policy's shorthand)")
    recorded_tasks: bool = Field(False, description="hf:<checkpoint> only: evaluate exactly the held-out tasks its "
                                                    "agent.json records (the training run's evaluation; still "
                                                    "filtered by split, env and limit)")
    agent_card: bool = Field(True, description="hf:<checkpoint> with an agent.json: play it as its training run "
                                               "evaluated it (tools shown, prompt, limits, temperature, trials, seed, "
                                               "user, judge) for the fields not set explicitly; False: as a plain "
                                               "model")

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
                       max_new_tokens: int = 1024, local_options: dict[str, Any] | None = None
                       ) -> tuple[AgentFactory, str]:
    """``(factory, agent name)`` for any of :data:`AGENT_NAMES`, ``hf:<model dir>`` included
    (``local_options``: more keywords of :func:`autoforge.rl.agent.hf_agent_factory`, e.g. device, dtype)."""
    loader = functools.partial(_local_agent_factory, **local_options) if local_options else _local_agent_factory
    return _rollout_agent_factory(name, settings=settings, temperature=temperature, recorder=recorder,
                                  max_new_tokens=max_new_tokens, local_loader=loader)


# --------------------------------------------------------------------------- a checkpoint's agent card

# EvalParams field -> the AgentCard field it is taken from (when not set explicitly)
CARD_FIELDS = {"user": "user", "user_error_rate": "user_error_rate", "trials": "trials", "seed": "seed",
               "judge": "judge", "max_turns": "max_turns", "max_tokens": "max_episode_tokens",
               "max_new_tokens": "max_new_tokens", "temperature": "temperature", "concurrency": "concurrency",
               "tool_schema": "tool_schema"}


def agent_card_of(p: EvalParams):
    """``(folder, AgentCard)`` of an ``hf:<checkpoint>`` agent whose folder holds ``agent.json`` (and
    ``p.agent_card``), else None. A malformed card is a ConfigError naming the file."""
    if not p.agent.startswith("hf:") or not p.agent_card or not p.agent[3:].strip():
        return None
    from autoforge.rl.agent_card import read_agent_card  # plain JSON + pydantic: no torch

    folder = Path(p.agent[3:]).expanduser()
    card = read_agent_card(folder)
    return (folder, card) if card is not None else None


def recorded_params(p: EvalParams, card) -> tuple[EvalParams, dict[str, Any]]:
    """``p`` with the card's settings in the fields not set explicitly; and those settings."""
    applied = {f: getattr(card, c) for f, c in CARD_FIELDS.items() if f not in p.model_fields_set}
    return p.model_copy(update=applied), applied


def recorded_tools(tools_by_env: dict[str, list[ToolCode]], card) -> dict[str, list[ToolCode]]:
    """The tools the card lists per environment (``prompt_tools: used``); an environment it does not
    list keeps all its accepted tools (the run never showed the policy one of its tasks)."""
    if card.prompt_tools != "used":
        return tools_by_env
    return {e: [t for t in tools if t.name in set(card.tools[e])] if e in card.tools else tools
            for e, tools in tools_by_env.items()}


def check_recorded_tasks(warehouse: str | None, where: Path, card) -> None:
    """ConfigError when the warehouse lacks some of the card's held-out tasks (another warehouse)."""
    from autoforge.pipeline.corpus import tasks_by_id

    if not card.eval_task_ids:
        raise ConfigError(f"{where / 'agent.json'} records no held-out tasks (the run evaluated none); leave out "
                          "--recorded-tasks")
    found = tasks_by_id(warehouse, card.eval_task_ids)
    missing = [i for i in card.eval_task_ids if i not in found or found[i].status != "verified"]
    if missing:
        raise ConfigError(f"{len(missing)} of the {len(card.eval_task_ids)} held-out tasks {where / 'agent.json'} "
                          f"records are not curated tasks of this warehouse (e.g. {missing[0]}); give --warehouse "
                          "the warehouse the run trained on")


# --------------------------------------------------------------------------- reads


def load_eval_inputs(warehouse: str | None, *, split: str | None = None, env: str | None = None,
                     limit: int | None = None, status: str = "verified", task_ids: Iterable[str] | None = None):
    """Curated tasks (``status``), their DAGs, accepted tool code and tool specs, from the warehouse.

    ``task_ids``: only these (in their order when a list or tuple). Returns ``(tasks, dags by id,
    tool code by env id, tool specs by env id)``.
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
        if isinstance(task_ids, (list, tuple)):
            order = {tid: i for i, tid in enumerate(task_ids)}
            tasks.sort(key=lambda t: order[t.task_id])
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
    ``error_rates`` gives them one by one. ``hf:<checkpoint>`` with an ``agent.json`` plays as its
    training run evaluated it (module docstring); the summary's ``agent_card`` says what it took.
    ``settings``: the LLM settings of openai / llm names (default: the environment's).
    ``env_factory``: how environments are built (default: the sandboxed runtime). ``write=False``
    stores nothing. Returns
    :meth:`autoforge.rollout.evaluate.EvalReport.summary` (``eval_id``, ``results`` rows, ``judge``
    precision/recall, ``failures`` with reasons, ...) plus ``run_id``.
    """
    from autoforge.llm import MemoryRecorder

    p = params or EvalParams()
    p.validate_for_run()
    found = agent_card_of(p)
    card = found[1] if found else None
    if p.recorded_tasks and card is None:
        why = (f"{p.agent!r} holds none" if p.agent_card or not p.agent.startswith("hf:")
               else "agent_card is off (--no-agent-card)")
        raise ConfigError("recorded_tasks (--recorded-tasks) needs an hf:<checkpoint> agent whose folder holds the "
                          f"agent.json its training run wrote: {why}")
    local: dict[str, Any] = {}
    card_info: dict[str, Any] | None = None
    if card is not None:
        folder = found[0]
        if p.recorded_tasks:
            check_recorded_tasks(warehouse, folder, card)
        explicit = sorted(f for f in CARD_FIELDS if f in p.model_fields_set)
        p, applied = recorded_params(p, card)
        p.validate_for_run()
        local = {"max_batch": p.concurrency, "dtype": card.dtype, "device": "cpu" if card.device == "cpu" else "auto"}
        card_info = {"path": str(folder / "agent.json"), "train_run_id": card.train_run_id,
                     "checkpoint": card.checkpoint, "applied": applied, "explicit": explicit,
                     "recorded_tasks": len(card.eval_task_ids) if p.recorded_tasks else None}
    rates = error_rates or ErrorRates.uniform(p.user_error_rate)
    recorder = MemoryRecorder()
    agent_factory, agent_name = make_agent_factory(p.agent, settings=settings, temperature=p.temperature,
                                                   recorder=recorder, max_new_tokens=p.max_new_tokens,
                                                   local_options=local)
    try:
        user_factory, user_name = make_user_factory(p.user, settings=settings, temperature=p.temperature,
                                                    recorder=recorder)
        judge_client = openai_client(settings, None, recorder) if p.judge == "llm" else None
        the_judge = make_judge(p.judge, judge_client)
        tasks, dags, tools_by_env, specs_by_env = load_eval_inputs(
            warehouse, split=p.split, env=p.env, limit=p.limit,
            task_ids=list(card.eval_task_ids) if card is not None and p.recorded_tasks else None)
        if not tasks:
            raise ConfigError(f"no curated tasks to evaluate (status='verified', split={p.split!r}, env={p.env!r}"
                              f"{', the recorded tasks' if p.recorded_tasks else ''}); run `autoforge factory` first "
                              "or relax the filters")
        rules_by_env = judged_rules(warehouse, tools_by_env)
        played: dict[str, Any] = {}
        if card is not None:  # as the training run evaluated: its tool list, prompt and rules
            tools_by_env = recorded_tools(tools_by_env, card)
            specs_by_env = specs_by_env if card.tool_descriptions else None
            rules_by_env = rules_by_env if card.judged_rules else None
            played["system_prompt"] = card.system_prompt
        run_params = {"agent": agent_name, "user": user_name, "trials": p.trials, "split": p.split, "env": p.env,
                      "limit": p.limit, "error_rates": rates.__dict__, "seed": p.seed, "judge": p.judge,
                      "max_turns": p.max_turns, "max_tokens": p.max_tokens, "tasks": sorted(t.task_id for t in tasks)}
        if p.tool_schema != "full" or card is not None:  # (absent otherwise: the same run ids as before)
            run_params.update(tool_schema=p.tool_schema, max_new_tokens=p.max_new_tokens, temperature=p.temperature)
        if card_info is not None:
            run_params["agent_card"] = {k: card_info[k] for k in ("train_run_id", "checkpoint", "recorded_tasks")}
        run_row = Run.make("eval", run_params)
        report = evaluate_tasks(
            tasks, dags, tools_by_env, agent_factory=agent_factory, user_factory=user_factory, agent_name=agent_name,
            user_name=user_name, trials=p.trials, error_rates=rates, judge=the_judge, concurrency=p.concurrency,
            env_factory=env_factory or default_env_factory,
            config=EpisodeConfig(max_turns=p.max_turns, max_tokens=p.max_tokens, tool_schema=p.tool_schema),
            specs_by_env=specs_by_env, seed=p.seed, run_id=run_row.run_id, rules_by_env=rules_by_env, **played)
    finally:
        getattr(agent_factory, "close", lambda: None)()
    summary = report.summary()
    if write:
        calls = list(getattr(recorder, "calls", []) or [])
        write_records(warehouse, [*report.episodes, *report.results, *calls],
                      run_row.finish(episodes=len(report.episodes), success_rate=summary["success_rate"],
                                     eval_id=report.eval_id))
    summary["run_id"] = run_row.run_id
    if card_info is not None:
        summary["agent_card"] = card_info
    return summary


def run_eval(warehouse: str | None, *, error_rates: ErrorRates | None = None, settings=None,
             env_factory: EnvFactory | None = None, write: bool = True, **fields: Any) -> dict[str, Any]:
    """Stage 6 over the warehouse (``fields``: any of :class:`EvalParams`); see :func:`run`."""
    return run(warehouse, EvalParams(**fields), error_rates=error_rates, settings=settings, env_factory=env_factory,
               write=write)
