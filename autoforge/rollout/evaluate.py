"""Evaluation: run agent × user over curated tasks, K trials each, and report pass^k.

``run_eval(warehouse, agent="oracle", user="offline", trials=4, ...)`` loads curated
(``status='verified'``) tasks, their DAGs and tool code from the warehouse, plays every
(task, trial) episode — different tasks concurrently on a thread pool, each episode in its own
:class:`autoforge.envs.runtime.Environment` — judges each episode for user errors, computes
pass^k per environment and overall (:mod:`autoforge.rollout.passk`), writes the episodes,
the ``eval_results`` rows and the run in one transaction, and returns a summary dict
(``format_report`` prints it). A crash in one episode is recorded as that episode's failure.

:func:`evaluate_tasks` is the same loop without the warehouse (tests, benchmarks, training).
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from autoforge.envs.interface import EnvFactory
from autoforge.errors import ConfigError
from autoforge.rollout import passk
from autoforge.rollout.agents import OpenAIAgent, OracleAgent, RandomAgent
from autoforge.rollout.engine import (DEFAULT_SYSTEM_PROMPT, EpisodeConfig, EpisodeOutcome, failed_episode, run_episode,
                                      safe_run)
from autoforge.rollout.judge import JudgeVerdict, episode_metrics, make_judge
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import ErrorRates, LLMUser, OfflineUser, sample_plan
from autoforge.types import Episode, EvalResult, Run, Task, TaskDag, ToolCode, ToolSpec, content_id

AGENT_NAMES = ("oracle", "random", "openai", "openai:<model>", "hf:<model dir>")
USER_NAMES = ("offline", "llm", "llm:<model>")

AgentFactory = Callable[[], Any]
# user_factory(task, plan, seed) -> UserSim
UserFactory = Callable[[Task, Any, int], Any]



# --------------------------------------------------------------------------- registries


def _openai_client(settings, model: str | None, recorder=None):
    from autoforge.llm import get_client
    from autoforge.settings import get_settings

    settings = settings or get_settings()
    if model:
        settings = settings.with_(openai_model=model)
    return get_client(settings, backend="openai", recorder=recorder)


def make_agent_factory(name: str, *, settings=None, temperature: float = 0.0, recorder=None,
                       max_new_tokens: int = 1024) -> tuple[AgentFactory, str]:
    """``(factory, agent name)`` for a registry name (:data:`AGENT_NAMES`); ``max_new_tokens`` caps one turn."""
    if name == "oracle":
        return OracleAgent, "oracle"
    if name == "random":
        return RandomAgent, "random"
    if name == "openai" or name.startswith("openai:"):
        client = _openai_client(settings, name.split(":", 1)[1] if ":" in name else None, recorder)
        return (lambda: OpenAIAgent(client, temperature=temperature, max_tokens=max_new_tokens)), f"openai:{client.model}"
    if name.startswith("hf:"):
        from autoforge.rl.policy import load_policy
        from autoforge.rollout.hf_agent import BatchedGenerator, HFAgent

        policy = load_policy(name[3:], device="auto")
        gen = BatchedGenerator(policy)  # one model: concurrent episodes' turns are sampled as batches

        def factory():
            return HFAgent(policy, temperature=temperature, max_new_tokens=max_new_tokens, generator=gen, name=name)

        factory.close = gen.close  # type: ignore[attr-defined]
        return factory, name
    raise ConfigError(f"unknown agent {name!r}; valid agents: {', '.join(AGENT_NAMES)}")


def make_user_factory(name: str, *, settings=None, temperature: float = 0.0, recorder=None) -> tuple[UserFactory, str]:
    """``(factory, user name)`` for a registry name (:data:`USER_NAMES`)."""
    if name == "offline":
        return (lambda task, plan, seed: OfflineUser(task, plan, seed=seed)), "offline"
    if name == "llm" or name.startswith("llm:"):
        client = _openai_client(settings, name.split(":", 1)[1] if ":" in name else None, recorder)
        uname = f"llm:{client.model}"
        return (lambda task, plan, seed: LLMUser(client, task, plan, seed=seed, temperature=temperature, name=uname)), uname
    raise ConfigError(f"unknown user simulator {name!r}; valid users: {', '.join(USER_NAMES)}")


def default_env_factory(tools: list[ToolCode]):
    from autoforge.envs.runtime import Environment

    return Environment(tools)


# --------------------------------------------------------------------------- the loop


@dataclass
class EvalReport:
    eval_id: str
    agent: str
    user_sim: str
    trials: int
    episodes: list[Episode]
    results: list[EvalResult]
    judge: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def failures(self) -> list[dict[str, Any]]:
        """Every episode that did not succeed, with its reason (for the oracle: each one is a bug)."""
        out = []
        for e in self.episodes:
            if e.reward == 1.0:
                continue
            out.append({"task_id": e.task_id, "env_id": e.env_id, "trial": e.trial, "reward": e.reward,
                        "termination": e.termination, "detail": e.termination_detail,
                        "user_error": e.user_error_kind if e.user_error else None,
                        "differing": e.reward_info.get("differing_records") or e.reward_info.get("unscored_reason"),
                        "gold_divergence": e.diagnostics.get("gold_divergence")})
        return out

    def summary(self) -> dict[str, Any]:
        scored = [e for e in self.episodes if e.reward is not None]
        return {
            "eval_id": self.eval_id, "agent": self.agent, "user_sim": self.user_sim, "trials": self.trials,
            "n_tasks": len({e.task_id for e in self.episodes}), "n_episodes": len(self.episodes),
            "n_unscored": len(self.episodes) - len(scored),
            "success_rate": (sum(e.reward == 1.0 for e in self.episodes) / len(self.episodes)) if self.episodes else None,
            "terminations": dict(Counter(e.termination for e in self.episodes)),
            "results": [r.model_dump(exclude={"result_id", "eval_id", "agent", "user_sim", "run_id"}) for r in self.results],
            "judge": self.judge,
            "n_user_errors": sum(bool(e.user_error) for e in self.episodes),
            "failures": self.failures(),
            "wall_s": round(self.wall_s, 3),
            "episodes_per_s": round(len(self.episodes) / self.wall_s, 2) if self.wall_s > 0 else None,
        }


def gold_divergence(agent: Any, task: Task) -> dict[str, Any] | None:
    """For agents that keep their executed calls (the oracle): the first call that differs from the gold."""
    calls = getattr(agent, "calls", None)
    if calls is None:
        return None
    for i, (a, g) in enumerate(zip(calls, task.gold_calls)):
        if a.name != g.name or a.arguments != g.arguments:
            return {"index": i, "agent": a.model_dump(exclude={"id"}), "gold": g.model_dump(exclude={"id"})}
    if len(calls) != len(task.gold_calls):
        return {"index": min(len(calls), len(task.gold_calls)), "agent_calls": len(calls), "gold_calls": len(task.gold_calls)}
    return None


def episode_seed(seed: int, task_id: str, trial: int) -> int:
    return random.Random(f"{seed}:{task_id}:{trial}").randrange(2**31)


def evaluate_tasks(
    tasks: list[Task],
    dags: dict[str, TaskDag],
    tools_by_env: dict[str, list[ToolCode]],
    *,
    agent_factory: AgentFactory,
    user_factory: UserFactory,
    agent_name: str,
    user_name: str,
    trials: int = 1,
    error_rates: ErrorRates = ErrorRates(),
    judge: Any = None,
    concurrency: int = 4,
    env_factory: EnvFactory = default_env_factory,
    config: EpisodeConfig = EpisodeConfig(),
    specs_by_env: dict[str, list[ToolSpec]] | None = None,
    seed: int = 0,
    eval_id: str | None = None,
    run_id: str | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    n_boot: int = 1000,
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
    reuse_envs: bool = False,
) -> EvalReport:
    """Play ``trials`` episodes of every task (concurrently across tasks) and score pass^k."""
    if trials < 1:
        raise ConfigError(f"trials must be >= 1, got {trials}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
    user_label = user_name + error_rates.label()
    eval_id = eval_id or content_id("eval", agent_name, user_label, sorted(t.task_id for t in tasks), trials, seed,
                                    getattr(judge, "name", None), config.__dict__)
    schemas = {env: tool_schemas(tools, (specs_by_env or {}).get(env, ()), style=config.tool_schema)
               for env, tools in tools_by_env.items()}
    # Interleave trials so the pool works on different tasks at once (trial-major order).
    jobs = [(task, k) for k in range(trials) for task in tasks]

    # Environments: a new one per episode by default (the runtime pools its sandbox workers, so
    # this is cheap: benchmarks/episode_throughput.py). With ``reuse_envs`` a thread keeps its
    # Environment for its next episode of the same environment; ``reset`` gives every episode a
    # fresh copy of its task's state either way. An environment that broke is never reused.
    local = threading.local()
    opened: list[Any] = []
    opened_lock = threading.Lock()

    def acquire_env(env_id: str):
        cache = getattr(local, "envs", None)
        if reuse_envs and cache and env_id in cache:
            return cache.pop(env_id)
        env = env_factory(tools_by_env[env_id])
        with opened_lock:
            opened.append(env)
        return env

    def release_env(env_id: str, env: Any, broken: bool) -> None:
        if reuse_envs and not broken:
            if not hasattr(local, "envs"):
                local.envs = {}
            old = local.envs.get(env_id)
            local.envs[env_id] = env
            if old is None or old is env:
                return
            env = old
        close = getattr(env, "close", None)
        if close:
            close()

    def play(task: Task, trial: int) -> Episode:
        ep_seed = episode_seed(seed, task.task_id, trial)

        def body() -> EpisodeOutcome:
            if task.env_id not in tools_by_env:
                raise ConfigError(f"task {task.task_id}: no accepted tool code for environment {task.env_id}")
            plan = sample_plan(error_rates, random.Random(f"plan:{ep_seed}"), task)
            try:
                env = acquire_env(task.env_id)
            except Exception as exc:  # noqa: BLE001 - no environment: this episode fails, the run goes on
                return failed_episode(task, agent_name, user_label, trial, ep_seed, eval_id, run_id, "env_error",
                                      f"environment could not be created: {type(exc).__name__}: {exc}")
            out = None
            try:
                out = run_episode(task, env, agent_factory(), user_factory(task, plan, ep_seed),
                                  tools=schemas[task.env_id], dag=dags.get(task.dag_id), config=config, trial=trial,
                                  seed=ep_seed, eval_id=eval_id, run_id=run_id, system_prompt=system_prompt,
                                  agent_name=agent_name, user_name=user_label)
            finally:
                release_env(task.env_id, env, broken=out is None or out.episode.termination == "env_error")
            return out

        out = safe_run(body, task, agent_name, user_label, trial, ep_seed, eval_id, run_id)
        ep = out.episode
        upd: dict[str, Any] = {}
        div = gold_divergence(out.agent, task) if ep.reward != 1.0 else None
        if div:
            upd["diagnostics"] = {**ep.diagnostics, "gold_divergence": div}
        if judge is not None and ep.messages:
            try:
                v = judge.judge(task, ep)
            except Exception as exc:  # noqa: BLE001 - an undecided verdict, not a crash of the run
                v = JudgeVerdict(flag=None, reason=f"judge crashed: {type(exc).__name__}: {exc}"[:500])
            upd["judge_flag"] = v.flag
            upd["diagnostics"] = {**upd.get("diagnostics", ep.diagnostics), "judge": v.as_dict()}
        if upd:
            ep = ep.model_copy(update=upd)
            out.episode = ep
        if on_episode is not None:
            on_episode(out)
        return ep

    t0 = time.perf_counter()
    if concurrency == 1:
        episodes = [play(t, k) for t, k in jobs]
    else:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="episode") as pool:
            episodes = list(pool.map(lambda j: play(*j), jobs))
    wall = time.perf_counter() - t0
    for env in opened:  # the kept ones (closing twice is harmless)
        close = getattr(env, "close", None)
        if close:
            close()

    rows = passk.pass_hat_k_table(((e.task_id, e.env_id, e.reward == 1.0) for e in episodes), trials,
                                  n_boot=n_boot, seed=seed)
    results = [EvalResult(result_id=content_id("res", eval_id, r["env_id"], r["k"]), eval_id=eval_id, agent=agent_name,
                          user_sim=user_label, run_id=run_id, **r) for r in rows]
    jm = episode_metrics(episodes) if judge is not None else {}
    if jm:
        jm["judge"] = getattr(judge, "name", type(judge).__name__)
    return EvalReport(eval_id=eval_id, agent=agent_name, user_sim=user_label, trials=trials, episodes=episodes,
                      results=results, judge=jm, wall_s=wall)


# --------------------------------------------------------------------------- warehouse entry point


def load_eval_inputs(warehouse: str | None, *, split: str | None = None, env: str | None = None,
                     limit: int | None = None, status: str = "verified", task_ids: Iterable[str] | None = None):
    """Curated tasks (``status``), their DAGs, accepted tool code and tool specs, from the warehouse."""
    from autoforge.warehouse import query, read_records

    where, params = ["status = :status"], {"status": status}
    if split is not None:
        if split not in ("train", "test"):
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
        tools_by_env[env_id] = read_records(warehouse, ToolCode, where="env_id = :e AND status = 'accepted'",
                                            params={"e": env_id})
        specs_by_env[env_id] = read_records(
            warehouse, ToolSpec, where="tool_id IN (SELECT tool_id FROM tool_code WHERE env_id = :e)", params={"e": env_id})
    return tasks, dags, tools_by_env, specs_by_env


def run_eval(
    warehouse: str | None,
    agent: str = "oracle",
    user: str = "offline",
    trials: int = 1,
    split: str | None = None,
    env: str | None = None,
    limit: int | None = None,
    concurrency: int = 4,
    user_error_rate: float = 0.0,
    seed: int = 0,
    *,
    judge: str = "rule",
    error_rates: ErrorRates | None = None,
    max_turns: int = 40,
    max_tokens: int = 32_768,
    max_new_tokens: int = 1024,
    temperature: float = 0.0,
    settings=None,
    env_factory: EnvFactory | None = None,
    write: bool = True,
) -> dict[str, Any]:
    """Evaluate ``agent`` with ``user`` on curated tasks; store and return the summary.

    ``user_error_rate`` is split evenly over the three injected error kinds unless
    ``error_rates`` gives them one by one. ``judge``: rule | llm | none. ``max_turns`` /
    ``max_tokens`` limit an episode, ``max_new_tokens`` one agent turn. Returns
    :meth:`EvalReport.summary` (``eval_id``, ``results`` rows, ``judge`` precision/recall,
    ``failures`` with reasons, ...).
    """
    from autoforge.llm import MemoryRecorder
    from autoforge.warehouse import write_records

    rates = error_rates or ErrorRates.uniform(user_error_rate)
    recorder = MemoryRecorder()
    agent_factory, agent_name = make_agent_factory(agent, settings=settings, temperature=temperature, recorder=recorder,
                                                   max_new_tokens=max_new_tokens)
    user_factory, user_name = make_user_factory(user, settings=settings, temperature=temperature, recorder=recorder)
    judge_client = _openai_client(settings, None, recorder) if judge == "llm" else None
    the_judge = make_judge(judge, judge_client)
    tasks, dags, tools_by_env, specs_by_env = load_eval_inputs(warehouse, split=split, env=env, limit=limit)
    if not tasks:
        raise ConfigError(f"no curated tasks to evaluate (status='verified', split={split!r}, env={env!r}); run "
                          "`autoforge verify` first or relax the filters")
    params = {"agent": agent_name, "user": user_name, "trials": trials, "split": split, "env": env, "limit": limit,
              "error_rates": rates.__dict__, "seed": seed, "judge": judge, "max_turns": max_turns,
              "max_tokens": max_tokens, "tasks": sorted(t.task_id for t in tasks)}
    run = Run.make("eval", params)
    report = evaluate_tasks(
        tasks, dags, tools_by_env, agent_factory=agent_factory, user_factory=user_factory, agent_name=agent_name,
        user_name=user_name, trials=trials, error_rates=rates, judge=the_judge, concurrency=concurrency,
        env_factory=env_factory or default_env_factory, config=EpisodeConfig(max_turns=max_turns, max_tokens=max_tokens),
        specs_by_env=specs_by_env, seed=seed, run_id=run.run_id)
    getattr(agent_factory, "close", lambda: None)()
    summary = report.summary()
    if write:
        calls = list(getattr(recorder, "calls", []) or [])
        write_records(warehouse, [*report.episodes, *report.results, *calls],
                      run.finish(episodes=len(report.episodes), success_rate=summary["success_rate"],
                                 eval_id=report.eval_id))
    summary["run_id"] = run.run_id
    return summary


def format_report(summary: dict[str, Any], max_failures: int = 20) -> str:
    """A plain-text table of pass^k rows, the judge's precision/recall and the failures."""
    lines = [f"eval {summary['eval_id']}  agent={summary['agent']}  user={summary['user_sim']}  "
             f"tasks={summary['n_tasks']}  episodes={summary['n_episodes']}  trials={summary['trials']}"]
    lines.append(f"{'env_id':<28} {'k':>2} {'pass^k':>7} {'95% CI':>17} {'tasks':>6}")
    for r in summary["results"]:
        env = r["env_id"] or "(overall)"
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r.get("ci_low") is not None else ""
        lines.append(f"{env:<28} {r['k']:>2} {r['pass_hat_k']:>7.3f} {ci:>17} {r['n_tasks']:>6}")
    lines.append("terminations: " + ", ".join(f"{k}={v}" for k, v in sorted(summary["terminations"].items())))
    j = summary.get("judge") or {}
    if j:
        fmt = lambda v: "n/a" if v is None else f"{v:.3f}"  # noqa: E731
        lines.append(f"judge ({j.get('judge')}): precision={fmt(j['precision'])} recall={fmt(j['recall'])} "
                     f"(tp={j['tp']} fp={j['fp']} fn={j['fn']} tn={j['tn']}); injected errors that manifested: "
                     f"{summary['n_user_errors']}")
    fails = summary["failures"]
    if fails:
        lines.append(f"failures ({len(fails)}):")
        for f in fails[:max_failures]:
            why = f["detail"] or f["differing"]
            tag = f" [user error: {f['user_error']}]" if f.get("user_error") else ""
            lines.append(f"  {f['task_id']} trial {f['trial']}: {f['termination']}{tag} — {why}")
        if len(fails) > max_failures:
            lines.append(f"  ... and {len(fails) - max_failures} more")
    return "\n".join(lines)
