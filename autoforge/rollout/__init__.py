"""Stage 6: rollouts — the episode engine, agents, simulated users, the user-error judge,
the outcome reward and pass^k evaluation (DESIGN.md stage 6; paper Sec. 3.4).

File map::

    engine.py      run_episode(): agent ⇄ tools, agent ⇄ user, limits, crash isolation
    toolcalls.py   Hermes <tool_call> parsing, OpenAI tool schemas
    agents.py      OracleAgent (gold DAG through the dialogue), RandomAgent, OpenAIAgent
    hf_agent.py    HFAgent (token ids + log-probs), BatchedGenerator, make_rollout_fn (trainer plug-in)
    users.py       OfflineUser, LLMUser, injected user errors (ErrorRates, InjectionPlan)
    dialogue.py    how facts / requests / completion are phrased and recognised
    judge.py       RuleJudge, LLMJudge, judge_metrics (precision / recall)
    reward.py      state-hash reward and its components
    passk.py       tau-bench pass^k with bootstrap confidence intervals
    evaluate.py    evaluate_tasks(), run_eval() (warehouse), format_report()

``hf_agent`` imports torch; import it explicitly (it is not loaded by this package).
"""

from autoforge.rollout.agents import OpenAIAgent, OracleAgent, RandomAgent
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
    run_eval,
)
from autoforge.rollout.judge import JUDGES, JudgeVerdict, LLMJudge, RuleJudge, judge_metrics, make_judge
from autoforge.rollout.passk import pass_hat_k, pass_hat_k_table
from autoforge.rollout.reward import score
from autoforge.rollout.toolcalls import MalformedCall, ParsedTurn, format_hermes, parse_hermes, tool_schemas
from autoforge.rollout.users import ERROR_KINDS, ErrorRates, InjectionPlan, LLMUser, OfflineUser

__all__ = [
    "AGENT_NAMES", "ERROR_KINDS", "JUDGES", "TERMINATIONS", "USER_NAMES",
    "AgentContext", "AgentTurn", "EpisodeConfig", "EpisodeOutcome", "ErrorRates", "EvalReport", "InjectionPlan",
    "JudgeVerdict", "LLMJudge", "LLMUser", "MalformedCall", "OfflineUser", "OpenAIAgent", "OracleAgent", "ParsedTurn",
    "RandomAgent", "RuleJudge", "UserTurn",
    "evaluate_tasks", "format_hermes", "format_report", "judge_metrics", "make_agent_factory", "make_judge",
    "make_user_factory", "parse_hermes", "pass_hat_k", "pass_hat_k_table", "run_episode", "run_eval", "score",
    "tool_schemas",
]
