"""Stage 6: rollouts — the episode engine, agents, simulated users, the user-error judge,
the outcome reward and pass^k evaluation (docs/design.md#stage-6-rollouts-and-evaluation;
paper Sec. 3.4).

Records in, records out: nothing here reads or writes the warehouse
(:mod:`autoforge.pipeline.evaluate` does) or knows about training (:mod:`autoforge.rl`
builds on this package, never the reverse).

File map::

    engine.py      run_episode(): agent ⇄ tools, agent ⇄ user, limits, crash isolation
    batch.py       play_episodes(): the concurrent episode runner (env pool, injected errors, judge)
                   shared by evaluation, training rollouts and SFT gold replays
    toolcalls.py   Hermes <tool_call> parsing, OpenAI tool schemas
    agents.py      OracleAgent (gold DAG through the dialogue), RandomAgent, OpenAIAgent
    users.py       OfflineUser, LLMUser, injected user errors (ErrorRates, InjectionPlan)
    judge.py       RuleJudge, LLMJudge, judge_metrics (precision / recall)
    reward.py      state-hash reward and its components
    passk.py       tau-bench pass^k with bootstrap confidence intervals
    evaluate.py    evaluate_tasks() (play_episodes + pass^k), agent / user registries, format_report()

How facts, requests and completion are phrased is :mod:`autoforge.dialogue`; the local
transformers agent (HFAgent) is :mod:`autoforge.rl.agent`.
"""

from autoforge.rollout.agents import OpenAIAgent, OracleAgent, RandomAgent
from autoforge.rollout.batch import EpisodeBatch, play_episodes
from autoforge.rollout.engine import (
    TERMINATIONS,
    AgentContext,
    AgentTurn,
    EpisodeConfig,
    EpisodeOutcome,
    UserTurn,
    run_episode,
)
from autoforge.rollout.evaluate import (
    AGENT_NAMES,
    USER_NAMES,
    EvalReport,
    evaluate_tasks,
    format_report,
    make_agent_factory,
    make_user_factory,
)
from autoforge.rollout.judge import JUDGES, JudgeVerdict, LLMJudge, RuleJudge, judge_metrics, make_judge
from autoforge.rollout.passk import pass_hat_k, pass_hat_k_table
from autoforge.rollout.reward import score
from autoforge.rollout.toolcalls import MalformedCall, ParsedTurn, format_hermes, parse_hermes, tool_schemas
from autoforge.rollout.users import ERROR_KINDS, ErrorRates, InjectionPlan, LLMUser, OfflineUser

__all__ = [
    "AGENT_NAMES", "ERROR_KINDS", "JUDGES", "TERMINATIONS", "USER_NAMES",
    "AgentContext", "AgentTurn", "EpisodeBatch", "EpisodeConfig", "EpisodeOutcome", "ErrorRates", "EvalReport", "InjectionPlan",
    "JudgeVerdict", "LLMJudge", "LLMUser", "MalformedCall", "OfflineUser", "OpenAIAgent", "OracleAgent", "ParsedTurn",
    "RandomAgent", "RuleJudge", "UserTurn",
    "evaluate_tasks", "format_hermes", "format_report", "judge_metrics", "make_agent_factory", "make_judge",
    "make_user_factory", "parse_hermes", "pass_hat_k", "pass_hat_k_table", "play_episodes", "run_episode", "score",
    "tool_schemas",
]
