"""Evaluation: run agent × user over tasks, K trials each, and report pass^k.

:func:`evaluate_tasks` plays every (task, trial) episode with the shared episode runner
(:func:`autoforge.rollout.batch.play_episodes`: concurrent across tasks, each episode in its
own environment, user errors injected and judged, crashes isolated), then computes pass^k per
environment and overall (:mod:`autoforge.rollout.passk`) and the judge's precision / recall.
Records in, an :class:`EvalReport` of records out: loading curated tasks from the warehouse and
storing the episodes and ``eval_results`` rows is :mod:`autoforge.pipeline.evaluate`'s job
(``autoforge eval``), which also resolves ``hf:<model dir>`` agents (they need :mod:`autoforge.rl`).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from autoforge.errors import ConfigError
from autoforge.rollout import passk
from autoforge.rollout.agents import OpenAIAgent, OracleAgent, RandomAgent
from autoforge.rollout.batch import AgentFactory, UserFactory, play_episodes
from autoforge.rollout.judge import episode_metrics
from autoforge.rollout.users import LLMUser, OfflineUser
from autoforge.types import Episode, EvalResult, Task, TaskDag, ToolCode, content_id

AGENT_NAMES = ("oracle", "random", "openai", "openai:<model>", "hf:<model dir>")
USER_NAMES = ("offline", "llm", "llm:<model>")

# local_loader(model_dir, *, temperature, max_new_tokens, name) -> agent factory (for ``hf:<model dir>``)
LocalLoader = Callable[..., AgentFactory]


# --------------------------------------------------------------------------- registries


def openai_client(settings, model: str | None, recorder=None):
    """The OpenAI-compatible client of ``settings`` (default: the environment's), optionally for ``model``."""
    from autoforge.llm import get_client
    from autoforge.settings import get_settings

    settings = settings or get_settings()
    if model:
        settings = settings.with_(openai_model=model)
    return get_client(settings, backend="openai", recorder=recorder)


def make_agent_factory(name: str, *, settings=None, temperature: float = 0.0, recorder=None,
                       max_new_tokens: int = 1024, local_loader: LocalLoader | None = None) -> tuple[AgentFactory, str]:
    """``(factory, agent name)`` for a registry name (:data:`AGENT_NAMES`); ``max_new_tokens`` caps one turn.

    ``hf:<model dir>`` (a local model) needs ``local_loader(model_dir, temperature=, max_new_tokens=,
    name=) -> factory``: the local agent lives in :mod:`autoforge.rl`, which builds on this package;
    :func:`autoforge.pipeline.evaluate.make_agent_factory` passes :func:`autoforge.rl.agent.hf_agent_factory`.
    A factory with a ``close()`` is closed by the caller when its episodes are done.
    """
    if name == "oracle":
        return OracleAgent, "oracle"
    if name == "random":
        return RandomAgent, "random"
    if name == "openai" or name.startswith("openai:"):
        client = openai_client(settings, name.split(":", 1)[1] if ":" in name else None, recorder)
        return (lambda: OpenAIAgent(client, temperature=temperature, max_tokens=max_new_tokens)), f"openai:{client.model}"
    if name.startswith("hf:"):
        if not name[3:].strip():
            raise ConfigError(f"agent {name!r} names no model directory: give hf:<model dir>, e.g. "
                              "hf:runs/demo/checkpoints/base")
        if local_loader is None:
            raise ConfigError(f"agent {name!r} is a local model and no loader was given: use "
                              "autoforge.pipeline.evaluate.make_agent_factory (it loads the model through autoforge.rl)")
        return local_loader(name[3:], temperature=temperature, max_new_tokens=max_new_tokens, name=name), name
    raise ConfigError(f"unknown agent {name!r}; valid agents: {', '.join(AGENT_NAMES)}")


def make_user_factory(name: str, *, settings=None, temperature: float = 0.0, recorder=None) -> tuple[UserFactory, str]:
    """``(factory, user name)`` for a registry name (:data:`USER_NAMES`)."""
    if name == "offline":
        return (lambda task, plan, seed: OfflineUser(task, plan, seed=seed)), "offline"
    if name == "llm" or name.startswith("llm:"):
        client = openai_client(settings, name.split(":", 1)[1] if ":" in name else None, recorder)
        uname = f"llm:{client.model}"
        return (lambda task, plan, seed: LLMUser(client, task, plan, seed=seed, temperature=temperature, name=uname)), uname
    raise ConfigError(f"unknown user simulator {name!r}; valid users: {', '.join(USER_NAMES)}")


# --------------------------------------------------------------------------- the report


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
                        "user_error": e.user_error_kind if e.user_error else None, "rule_breaks": list(e.rule_breaks),
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
            "n_rule_breaks": sum(bool(e.rule_breaks) for e in self.episodes),  # episodes that broke a rule (issue 33)
            "failures": self.failures(),
            "wall_s": round(self.wall_s, 3),
            "episodes_per_s": round(len(self.episodes) / self.wall_s, 2) if self.wall_s > 0 else None,
        }


# --------------------------------------------------------------------------- evaluation


def evaluate_tasks(
    tasks: list[Task],
    dags: dict[str, TaskDag],
    tools_by_env: dict[str, list[ToolCode]],
    *,
    agent_name: str,
    trials: int = 1,
    seed: int = 0,
    judge: Any = None,
    run_id: str | None = None,
    eval_id: str | None = None,
    n_boot: int = 1000,
    **episode_args: Any,
) -> EvalReport:
    """Play ``trials`` episodes of every task (concurrently across tasks) and score pass^k.

    ``episode_args`` are the rest of :func:`autoforge.rollout.batch.play_episodes`'s parameters
    (agent and user factories, ``user_name``, ``error_rates``, ``concurrency``, ``env_factory``,
    ``config`` ...); ``eval_id`` is the batch id (derived from the parameters when None)."""
    batch = play_episodes(tasks, dags, tools_by_env, agent_name=agent_name, trials=trials, seed=seed, judge=judge,
                          run_id=run_id, batch_id=eval_id, **episode_args)
    eval_id, user_label, episodes = batch.batch_id, batch.user_label, batch.episodes
    rows = passk.pass_hat_k_table(((e.task_id, e.env_id, e.reward == 1.0) for e in episodes), trials,
                                  n_boot=n_boot, seed=seed)
    results = [EvalResult(result_id=content_id("res", eval_id, r["env_id"], r["k"]), eval_id=eval_id, agent=agent_name,
                          user_sim=user_label, run_id=run_id, **r) for r in rows]
    jm = episode_metrics(episodes) if judge is not None else {}
    if jm:
        jm["judge"] = getattr(judge, "name", type(judge).__name__)
    return EvalReport(eval_id=eval_id, agent=agent_name, user_sim=user_label, trials=trials, episodes=episodes,
                      results=results, judge=jm, wall_s=batch.wall_s)


def format_report(summary: dict[str, Any], max_failures: int = 20) -> str:
    """A plain-text table of pass^k rows, the judge's precision/recall and the failures."""
    lines = [f"eval {summary['eval_id']}  agent={summary['agent']}  user={summary['user_sim']}  "
             f"tasks={summary['n_tasks']}  episodes={summary['n_episodes']}  trials={summary['trials']}"]
    lines.append(f"{'environment':<28} {'k':>2} {'pass^k':>7} {'95% CI':>17} {'tasks':>6}")
    for r in summary["results"]:
        env = r["env_id"] or "(overall)"
        ci = f"[{r['ci_low']:.3f}, {r['ci_high']:.3f}]" if r.get("ci_low") is not None else ""
        lines.append(f"{env:<28} {r['k']:>2} {r['pass_hat_k']:>7.3f} {ci:>17} {r['n_tasks']:>6}")
    lines.append("terminations: " + ", ".join(f"{k}={v}" for k, v in sorted(summary["terminations"].items())))
    if summary.get("n_rule_breaks"):
        lines.append(f"episodes that broke a rule (scored 0 unless AUTOFORGE_ZERO_ON_RULE_BREAK is off): "
                     f"{summary['n_rule_breaks']}")
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
            tag += f" [broke {', '.join(f['rule_breaks'])}]" if f.get("rule_breaks") else ""
            lines.append(f"  {f['task_id']} trial {f['trial']}: {f['termination']}{tag} — {why}")
        if len(fails) > max_failures:
            lines.append(f"  ... and {len(fails) - max_failures} more")
    return "\n".join(lines)
