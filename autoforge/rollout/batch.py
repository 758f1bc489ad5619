"""The concurrent episode runner shared by evaluation and training.

``play_episodes(tasks, dags, tools_by_env, agent_factory=..., user_factory=..., trials=K)``
plays every (task, trial) episode — trial-major, so the thread pool works on different tasks
at once — each in its own environment from ``env_factory``; samples the injected user errors
of each episode; judges each played episode for user errors (``judge``); and returns the
episodes in job order with the wall time. A crash in one episode is recorded as that
episode's failure; the batch goes on.

Evaluation (:func:`autoforge.rollout.evaluate.evaluate_tasks`: + pass^k), training rollouts
and SFT gold replays (:mod:`autoforge.rl.agent`, :mod:`autoforge.rl.data`) all call this;
none of them calls another.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable

from autoforge.envs.interface import EnvFactory, default_env_factory
from autoforge.errors import ConfigError
from autoforge.rollout.engine import (DEFAULT_SYSTEM_PROMPT, EpisodeConfig, EpisodeOutcome, failed_episode, run_episode,
                                      safe_run)
from autoforge.rollout.judge import JudgeVerdict
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import ErrorRates, sample_plan
from autoforge.tasks.rules import judged_checks, runtime_guards
from autoforge.types import Episode, Task, TaskDag, ToolCode, ToolSpec, content_id

AgentFactory = Callable[[], Any]
# user_factory(task, plan, seed) -> UserSim
UserFactory = Callable[[Task, Any, int], Any]


def episode_seed(seed: int, task_id: str, trial: int) -> int:
    return random.Random(f"{seed}:{task_id}:{trial}").randrange(2**31)


def episode_batch_id(agent_name: str, user_label: str, task_ids, trials: int, seed: int, judge: Any,
                     config: EpisodeConfig) -> str:
    """The id of one batch of episodes (stored as ``Episode.eval_id``; an evaluation's ``eval_id``).

    Same agent, user, tasks, trials, seed, judge and limits -> same id -> same episode ids.
    """
    return content_id("eval", agent_name, user_label, sorted(task_ids), trials, seed, getattr(judge, "name", None),
                      config.__dict__)


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


@dataclass
class EpisodeBatch:
    """What :func:`play_episodes` returns."""

    batch_id: str  # the episodes' eval_id
    user_label: str  # the user name with the injected error rates (Episode.user_sim)
    episodes: list[Episode]  # in job order: trial-major (every task's trial 0, then trial 1, ...)
    wall_s: float


class EnvPool:
    """Environments for episode threads: a new one per episode, or (``reuse``) one kept per thread
    and environment id for that thread's next episode of it. ``reset`` gives every episode a fresh
    copy of its task's state either way; an environment that broke is never reused."""

    def __init__(self, env_factory: EnvFactory, tools_by_env: dict[str, list[ToolCode]], reuse: bool = False):
        self.env_factory, self.tools_by_env, self.reuse = env_factory, tools_by_env, reuse
        self._local = threading.local()
        self._opened: list[Any] = []
        self._lock = threading.Lock()

    def acquire(self, env_id: str):
        cache = getattr(self._local, "envs", None)
        if self.reuse and cache and env_id in cache:
            return cache.pop(env_id)
        env = self.env_factory(self.tools_by_env[env_id])
        with self._lock:
            self._opened.append(env)
        return env

    def release(self, env_id: str, env: Any, broken: bool) -> None:
        if self.reuse and not broken:
            if not hasattr(self._local, "envs"):
                self._local.envs = {}
            old = self._local.envs.get(env_id)
            self._local.envs[env_id] = env
            if old is None or old is env:
                return
            env = old
        _close(env)

    def close(self) -> None:
        """Close every environment opened (the kept ones too; closing twice is harmless)."""
        for env in self._opened:
            _close(env)


def _close(env: Any) -> None:
    close = getattr(env, "close", None)
    if close:
        close()


def play_episodes(
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
    batch_id: str | None = None,
    run_id: str | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    on_episode: Callable[[EpisodeOutcome], None] | None = None,
    reuse_envs: bool = False,
    rules_by_env: dict[str, list[Any]] | None = None,
) -> EpisodeBatch:
    """Play ``trials`` episodes of every task, ``concurrency`` at once (see the module docstring).

    ``on_episode(outcome)`` is called from the episode's thread once it is played and judged
    (the outcome keeps the agent instance, e.g. the HF agent's token sequence).
    Environments: a new one per episode by default (the runtime pools its sandbox workers, so
    this is cheap: benchmarks/episode_throughput.py); ``reuse_envs`` keeps one per thread.
    ``rules_by_env``: each environment's judged rules (``tool_rules`` rows with enforcement
    ``judged``, or their checks); with the runtime guards of its tools they are the rules every
    episode is judged by (``Episode.rule_breaks``) and that the agent is told (:class:`AgentContext`).
    """
    if trials < 1:
        raise ConfigError(f"trials must be >= 1, got {trials}")
    if concurrency < 1:
        raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
    user_label = user_name + error_rates.label()
    batch_id = batch_id or episode_batch_id(agent_name, user_label, (t.task_id for t in tasks), trials, seed, judge,
                                            config)
    schemas = {env: tool_schemas(tools, (specs_by_env or {}).get(env, ()), style=config.tool_schema)
               for env, tools in tools_by_env.items()}
    rules = {env: runtime_guards(tools) + judged_checks((rules_by_env or {}).get(env)) for env, tools in tools_by_env.items()}
    jobs = [(task, k) for k in range(trials) for task in tasks]
    pool = EnvPool(env_factory, tools_by_env, reuse=reuse_envs)

    def play(task: Task, trial: int) -> Episode:
        ep_seed = episode_seed(seed, task.task_id, trial)

        def body() -> EpisodeOutcome:
            if task.env_id not in tools_by_env:
                raise ConfigError(f"task {task.task_id}: no accepted tool code for environment {task.env_id}")
            plan = sample_plan(error_rates, random.Random(f"plan:{ep_seed}"), task)
            try:
                env = pool.acquire(task.env_id)
            except Exception as exc:  # noqa: BLE001 - no environment: this episode fails, the batch goes on
                return failed_episode(task, agent_name, user_label, trial, ep_seed, batch_id, run_id, "env_error",
                                      f"environment could not be created: {type(exc).__name__}: {exc}")
            out = None
            try:
                out = run_episode(task, env, agent_factory(), user_factory(task, plan, ep_seed),
                                  tools=schemas[task.env_id], dag=dags.get(task.dag_id), config=config, trial=trial,
                                  seed=ep_seed, eval_id=batch_id, run_id=run_id, system_prompt=system_prompt,
                                  agent_name=agent_name, user_name=user_label, rules=rules.get(task.env_id))
            finally:
                pool.release(task.env_id, env, broken=out is None or out.episode.termination == "env_error")
            return out

        out = safe_run(body, task, agent_name, user_label, trial, ep_seed, batch_id, run_id)
        ep = out.episode
        upd: dict[str, Any] = {}
        div = gold_divergence(out.agent, task) if ep.reward != 1.0 else None
        if div:
            upd["diagnostics"] = {**ep.diagnostics, "gold_divergence": div}
        if judge is not None and ep.messages:
            try:
                v = judge.judge(task, ep)
            except Exception as exc:  # noqa: BLE001 - an undecided verdict, not a crash of the batch
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
    try:
        if concurrency == 1:
            episodes = [play(t, k) for t, k in jobs]
        else:
            with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="episode") as ex:
                episodes = list(ex.map(lambda j: play(*j), jobs))
        wall = time.perf_counter() - t0
    finally:
        pool.close()
    return EpisodeBatch(batch_id=batch_id, user_label=user_label, episodes=episodes, wall_s=wall)
