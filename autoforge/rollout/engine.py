"""The episode engine: agent ⇄ environment tools, agent ⇄ simulated user.

Paper (arXiv 2512.22857, Sec. 3.4, "user-centred rollout"): the trajectory is
τ = (o_0, a_1, o_1, ..., a_n, o_n); o_0 is the user's request; each action either calls a
tool (the environment's result is the next observation) or talks to the user (the user's
reply is). The rollout ends when the simulated user judges its requirements met. The paper
gives no turn or token limit; ours (:class:`EpisodeConfig`) end runaway episodes with a
recorded reason.

One episode = one task, one fresh environment copy (``env.reset(task.initial_state)``), one
agent instance and one user instance. Nothing here raises out of :func:`run_episode`: a crash
of the agent, the user or the environment ends that episode with a termination reason
(``agent_error``, ``user_sim_error``, ``env_error``) and the traceback's last line in
``termination_detail``. An agent crash is the agent's failure (scored on the state it left);
an environment or user-simulator crash is not scored (reward None: "could not score").
"""

from __future__ import annotations

import json
import threading
import time
import traceback
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from autoforge.envs.interface import EnvLike
from autoforge.envs.runtime import Environment, ResidentState
from autoforge.errors import AutoforgeError
from autoforge.rollout import reward as R
from autoforge.rollout.rule_judge import episode_rule_breaks
from autoforge.rollout.toolcalls import MalformedCall
from autoforge.domain.rule_kinds import JUDGED_OPS
from autoforge.types import Episode, Message, Task, TaskDag, ToolCall, content_id, state_hash

_RESIDENT_MAX = 256  # tasks whose encoded initial state is kept (the worker keeps 8 resident; this saves the encode)
_resident: "OrderedDict[int, tuple[weakref.ref, ResidentState]]" = OrderedDict()
_resident_lock = threading.Lock()


def initial_state_for(env: EnvLike, task: Task) -> Any:
    """What ``env.reset`` gets for ``task``: for a sandboxed :class:`Environment`, the task's
    initial state encoded once per task object (:class:`ResidentState`), so the k trials of a
    task and its ERPO group reset without encoding the state again
    (and the worker, which keeps it resident, is not sent it again); any other environment gets
    the plain dict. Task records are not changed after they are made."""
    if not isinstance(env, Environment):
        return task.initial_state
    with _resident_lock:
        hit = _resident.get(id(task))
        if hit is not None and hit[0]() is task:
            _resident.move_to_end(id(task))
            return hit[1]
    resident = ResidentState(task.initial_state)
    with _resident_lock:
        _resident[id(task)] = (weakref.ref(task), resident)
        while len(_resident) > _RESIDENT_MAX:
            _resident.popitem(last=False)
    return resident


TERMINATIONS = ("user_stop", "user_gave_up", "max_turns", "max_tokens", "agent_gave_up", "agent_error",
                "user_sim_error", "env_error", "engine_error")
INFRA_FAILURES = ("env_error", "user_sim_error", "engine_error")  # not the agent's doing: such episodes are not scored


@dataclass(frozen=True)
class EpisodeConfig:
    """Limits of one episode (ours; the paper states none)."""

    max_turns: int = 40  # agent turns (a tool-call turn or a message each)
    max_tokens: int = 32_768  # agent-generated tokens over the episode (estimated as chars/4 when unknown)
    max_calls_per_turn: int = 16  # tool calls beyond this in one turn get an error observation
    max_observation_chars: int = 8_000  # longer tool outputs are truncated in the transcript
    tool_schema: str = "full"  # how tools are shown to the agent: "full", "compact" or "brief" (toolcalls.tool_schemas)


@dataclass
class AgentContext:
    """What an agent may know about the task: never the user's hidden facts or the gold state.

    ``dag`` is given only to the scripted oracle (it follows the gold plan, but must learn
    every user fact through the dialogue).
    """

    task_id: str
    env_id: str
    tools: list[dict[str, Any]]  # OpenAI function-calling schemas
    system_prompt: str
    seed: int = 0
    dag: TaskDag | None = None
    kind: str = "state"  # the task's kind (autoforge.tasks.kinds): a boundary task's DAG ends in the write not to make
    # The environment's rules (issue 33), as its policy states them to any agent: runtime guards (op, rule_id, tool,
    # message, ...: autoforge.envs.guards) and judged checks (identify_first / confirm_first: tools, via, rule_id).
    rules: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class AgentTurn:
    """One agent action: tool calls (executed) or a message to the user (when there are none)."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    malformed: list[MalformedCall] = field(default_factory=list)
    tokens: int | None = None  # generated tokens, when the agent knows them
    give_up: str | None = None  # the agent ends the episode itself, with this reason


@dataclass
class UserTurn:
    content: str
    stop: bool = False
    gave_up: bool = False  # the user stopped because it could not get anywhere (not a completion)


class Agent(Protocol):
    name: str

    def reset(self, ctx: AgentContext) -> None: ...

    def act(self, messages: list[Message]) -> AgentTurn: ...


class UserSim(Protocol):
    """A simulated user for ONE task (built per episode)."""

    name: str

    def opening(self) -> str: ...

    def reply(self, messages: list[Message]) -> UserTurn: ...

    def ground_truth(self) -> tuple[bool | None, str | None]:
        """(an injected error manifested in this dialogue, its kind); (None, None) if unknown."""
        ...


@dataclass
class EpisodeOutcome:
    episode: Episode
    agent: Any = None  # the agent instance (the HF agent holds the token trajectory)
    final_state: dict | None = None


DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant that operates a software system on behalf of a user through the tools "
    "provided. Use the tools to carry out the user's request exactly. If you need information that only "
    "the user knows, ask the user for it; do not guess. Never invent ids — look them up with the tools. "
    "Make only the changes the user asked for. When everything is done, tell the user it is done."
)


def observation_text(obs: Any, limit: int = 8_000) -> str:
    """The text the agent sees for a tool result (JSON of the output, or an error)."""
    if hasattr(obs, "to_text"):
        text = obs.to_text()
    elif getattr(obs, "ok", True):
        text = json.dumps(getattr(obs, "output", obs), ensure_ascii=False, default=str)
    else:
        out = getattr(obs, "output", None)
        err = getattr(obs, "error", None) or "tool call failed"
        text = json.dumps(out if isinstance(out, dict) and "error" in out else {"error": err}, ensure_ascii=False,
                          default=str)
    if len(text) > limit:
        text = text[:limit] + f"... [truncated {len(text) - limit} chars]"
    return text


def episode_id(task_id: str, agent: str, user: str, trial: int, eval_id: str | None, seed: int) -> str:
    return content_id("ep", task_id, agent, user, trial, eval_id, seed)


def _est_tokens(turn: AgentTurn) -> int:
    if turn.tokens is not None:
        return int(turn.tokens)
    n = len(turn.content) + sum(len(json.dumps(c.arguments)) + len(c.name) for c in turn.tool_calls)
    return max(1, n // 4)


def _short_error(exc: BaseException) -> str:
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:500]


def run_episode(
    task: Task,
    env: EnvLike,
    agent: Agent,
    user: UserSim,
    *,
    tools: list[dict[str, Any]],
    dag: TaskDag | None = None,
    config: EpisodeConfig = EpisodeConfig(),
    trial: int = 0,
    seed: int = 0,
    eval_id: str | None = None,
    run_id: str | None = None,
    system_prompt: str = DEFAULT_SYSTEM_PROMPT,
    agent_name: str | None = None,
    user_name: str | None = None,
    diagnostics: dict[str, Any] | None = None,
    rules: list[dict[str, Any]] | None = None,
    zero_on_rule_break: bool | None = None,
) -> EpisodeOutcome:
    """Play one episode to its end and score it. Never raises for agent/user/env failures.

    ``rules``: the environment's rules (runtime guards and judged checks, :class:`AgentContext`); the
    episode records every rule it broke (``Episode.rule_breaks``: calls the rule engine refused, judged
    rules :mod:`autoforge.rollout.rule_judge` flags), and a rule-breaking episode scores 0 unless
    ``zero_on_rule_break`` is False (None: the ``AUTOFORGE_ZERO_ON_RULE_BREAK`` setting)."""
    t0 = time.perf_counter()
    a_name = agent_name or getattr(agent, "name", type(agent).__name__)
    u_name = user_name or getattr(user, "name", type(user).__name__)
    messages: list[Message] = [Message(role="system", content=system_prompt)]
    termination, detail = "", None
    n_turns = tokens = n_calls = 0
    reset_ok = False
    refused: list[str] = []  # rule ids of the calls the rule engine refused
    judged = [r for r in rules or () if r.get("op") in JUDGED_OPS]

    def finish() -> EpisodeOutcome:
        nonlocal detail
        final_state = final_hash = None
        try:
            if reset_ok:  # after a failed reset the state is not the task's: cannot score
                final_state = env.get_state()
                # the sandboxed Environment keeps the hash up to date as calls change records
                final_hash = env.state_hash() if hasattr(env, "state_hash") else state_hash(final_state)
        except Exception as exc:  # noqa: BLE001 - an unreadable state: the episode cannot be scored
            final_state = None
            detail = (detail + "; " if detail else "") + f"final state unreadable: {_short_error(exc)}"
        rew, info = R.score(task, final_state, final_hash, R.final_message(messages))
        breaks = episode_rule_breaks(messages, judged, refused) if (refused or judged) else []
        rew, info = R.rule_break_reward(rew, info, breaks, zero_on_rule_break)
        if termination in INFRA_FAILURES and rew is not None:
            # The environment or the user simulator broke, not the agent: the outcome says nothing
            # about the agent, so it is not scored (None; ERPO leaves it out; pass^k counts a failure).
            rew, info = None, {**info, "unscored_reason": f"{termination}: cut short by an infrastructure failure"}
        try:
            err, kind = user.ground_truth()
        except Exception:  # noqa: BLE001
            err, kind = None, None
        diag = dict(diagnostics or {})
        diag.update({"agent_tokens": tokens, "tool_calls": n_calls, "wall_s": round(time.perf_counter() - t0, 4)})
        if hasattr(user, "diagnostics"):
            diag["user"] = user.diagnostics()
        ep = Episode(
            episode_id=episode_id(task.task_id, a_name, u_name, trial, eval_id or run_id, seed),
            task_id=task.task_id, env_id=task.env_id, agent=a_name, user_sim=u_name, trial=trial,
            messages=messages, reward=rew, reward_info=info, final_state_hash=final_hash, termination=termination,
            n_turns=n_turns, user_error=err, user_error_kind=kind, eval_id=eval_id, run_id=run_id,
            termination_detail=detail, diagnostics=diag, rule_breaks=breaks,
        )
        return EpisodeOutcome(episode=ep, agent=agent, final_state=final_state)

    # ---- set-up: fresh environment copy, agent context, the user's opening request
    try:
        env.reset(initial_state_for(env, task))
        reset_ok = True
    except Exception as exc:  # noqa: BLE001
        termination, detail = "env_error", f"reset failed: {_short_error(exc)}"
        return finish()
    try:
        agent.reset(AgentContext(task_id=task.task_id, env_id=task.env_id, tools=tools, system_prompt=system_prompt,
                                 seed=seed, dag=dag, kind=task.kind, rules=list(rules or ())))
    except Exception as exc:  # noqa: BLE001
        termination, detail = "agent_error", f"reset: {_short_error(exc)}"
        return finish()
    try:
        messages.append(Message(role="user", content=user.opening()))
    except Exception as exc:  # noqa: BLE001
        termination, detail = "user_sim_error", _short_error(exc)
        return finish()

    # ---- the loop: one agent turn, then tool results or the user's reply
    while True:
        if n_turns >= config.max_turns:
            termination, detail = "max_turns", f"{config.max_turns} agent turns without the user ending the episode"
            break
        try:
            turn = agent.act(list(messages))
        except Exception as exc:  # noqa: BLE001
            termination, detail = "agent_error", _short_error(exc)
            break
        n_turns += 1
        tokens += _est_tokens(turn)
        calls = [tc if tc.id else tc.model_copy(update={"id": f"call_{n_turns}_{i}"}) for i, tc in enumerate(turn.tool_calls)]
        bad = list(turn.malformed)
        for j, m in enumerate(bad):
            m.id = m.id or f"call_{n_turns}_bad{j}"
        listed = calls + [m.as_tool_call() for m in bad]
        messages.append(Message(role="assistant", content=turn.content or "", tool_calls=listed or None))
        if turn.give_up is not None:
            termination, detail = "agent_gave_up", turn.give_up or "the agent ended the episode"
            break
        if listed:
            for i, tc in enumerate(calls):
                if i >= config.max_calls_per_turn:
                    text = json.dumps({"error": f"too many tool calls in one turn (limit {config.max_calls_per_turn}); "
                                                "this call was not executed"})
                else:
                    n_calls += 1
                    try:
                        obs = env.call(tc.name, dict(tc.arguments))
                        text = observation_text(obs, config.max_observation_chars)
                        rid = getattr(obs, "rule_id", None)
                        if rid:
                            refused.append(rid)
                    except AutoforgeError as exc:  # sandbox limit etc.: the agent sees an error, the episode goes on
                        text = json.dumps({"error": f"{type(exc).__name__}: {exc}"}, ensure_ascii=False)
                    except Exception as exc:  # noqa: BLE001 - the environment itself broke
                        termination, detail = "env_error", f"{tc.name}: {_short_error(exc)}"
                        break
                messages.append(Message(role="tool", content=text, tool_call_id=tc.id, name=tc.name))
            if termination:
                break
            for m in bad:
                text = json.dumps({"error": f"malformed tool call: {m.error}. Expected <tool_call>{{\"name\": <tool "
                                            f"name>, \"arguments\": {{...}}}}</tool_call>"}, ensure_ascii=False)
                messages.append(Message(role="tool", content=text, tool_call_id=m.id, name=m.name or "<malformed>"))
            if tokens > config.max_tokens:
                termination, detail = "max_tokens", f"{tokens} agent tokens > limit {config.max_tokens}"
                break
            continue
        if tokens > config.max_tokens:
            termination, detail = "max_tokens", f"{tokens} agent tokens > limit {config.max_tokens}"
            break
        try:
            ut = user.reply(list(messages))
        except Exception as exc:  # noqa: BLE001
            termination, detail = "user_sim_error", _short_error(exc)
            break
        messages.append(Message(role="user", content=ut.content))
        if ut.stop:
            termination = "user_gave_up" if ut.gave_up else "user_stop"
            break
    return finish()


def failed_episode(task: Task, agent: str, user: str, trial: int, seed: int, eval_id: str | None, run_id: str | None,
                   termination: str, detail: str) -> EpisodeOutcome:
    """An episode that could not even start (no environment, a crash in set-up): recorded, unscored."""
    ep = Episode(
        episode_id=episode_id(task.task_id, agent, user, trial, eval_id or run_id, seed), task_id=task.task_id,
        env_id=task.env_id, agent=agent, user_sim=user, trial=trial, messages=[], reward=None,
        reward_info={"state_match": None, "unscored_reason": f"{termination}: the episode could not be played"},
        termination=termination, termination_detail=detail[:500], eval_id=eval_id, run_id=run_id,
    )
    return EpisodeOutcome(episode=ep)


def safe_run(fn: Callable[[], EpisodeOutcome], task: Task, agent: str, user: str, trial: int, seed: int,
             eval_id: str | None, run_id: str | None) -> EpisodeOutcome:
    """Run ``fn`` (an episode including its set-up); a crash outside the loop becomes a failed episode."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - crash isolation: recorded, the run goes on
        return failed_episode(task, agent, user, trial, seed, eval_id, run_id, "engine_error",
                              f"set-up failed: {_short_error(exc)}")
