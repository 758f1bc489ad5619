"""One task played a step at a time, outside the engine's loop (issue 35): the bundle's :class:`Episode` and the
TRL environment (:mod:`autoforge.integrations.trl`) both drive a :class:`LiveEpisode`.

A :class:`LiveEpisode` holds the sandbox (:class:`autoforge.envs.runtime.Environment`, the rule engine
included), the simulated user, the transcript and the episode engine's scorer: ``start(task, user,
system)`` loads a fresh copy of the task's initial state, ``call(name, args)`` runs a tool and returns the
observation text the agent sees, ``talk(message)`` returns the user's reply, and ``score(final)`` is the
engine's reward (:func:`autoforge.rollout.reward.score`, then
:func:`autoforge.rollout.reward.rule_break_reward` over the calls the rule engine refused and the judged
rules :mod:`autoforge.rollout.rule_judge` flags), None when the environment or the user simulator broke.

:class:`Episode` is one task of a :class:`autoforge.integrations.bundle.Bundle` on top of it: the
prompt (system text, the tools, the user's first message), the user as a ``talk_to_user`` tool, and
``reward()``. It is also importable from :mod:`autoforge.integrations.bundle`.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from autoforge.envs.runtime import Environment
from autoforge.errors import AutoforgeError, ConfigError
from autoforge.rollout import reward as R
from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT, initial_state_for, observation_text
from autoforge.rollout.rule_judge import episode_rule_breaks
from autoforge.rollout.users import ErrorRates, sample_plan
from autoforge.tasks.rules import JUDGED_OPS
from autoforge.types import Message, Task, ToolCall, ToolCode

__all__ = ["MAX_OBSERVATION_CHARS", "USER_TOOL", "USER_TOOL_SCHEMA", "USER_TOOL_SYSTEM_PROMPT", "Episode",
           "LiveEpisode", "Prompt"]

MAX_OBSERVATION_CHARS = 8_000  # longer tool outputs are cut (the episode engine's EpisodeConfig default)

# The simulated user as a tool (TRL ends a rollout at the first turn without a tool call; most trainers reach the
# user the same way): the schema transformers builds from AutoForgeEnvironment.talk_to_user, and the system text.
USER_TOOL = "talk_to_user"
USER_TOOL_SCHEMA: dict[str, Any] = {"type": "function", "function": {
    "name": USER_TOOL,
    "description": "Send a message to the user (a question, a confirmation, a report) and return the user's reply.",
    "parameters": {"type": "object", "properties": {"message": {"type": "string", "description": "What you say to "
                                                                                                 "the user."}},
                   "required": ["message"]}}}
USER_TOOL_SYSTEM_PROMPT = DEFAULT_SYSTEM_PROMPT + (
    f" You reach the user only through the {USER_TOOL} tool: it sends your message and returns the user's reply. "
    "Your last message, written without a tool call, ends the conversation."
)
ENDED = "(the user has ended the conversation; reply without a tool call)"


class Prompt(BaseModel):
    """What an episode opens with: the system text, the tools, the user's first message."""

    model_config = ConfigDict(extra="forbid")

    system: str
    tools: list[dict[str, Any]] = Field(description="OpenAI function schemas (with talk_to_user when the user is a "
                                                    "tool)")
    user: str = Field(description="the simulated user's opening request")

    def messages(self) -> list[dict[str, str]]:
        """The opening as chat messages: system, then user."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


class LiveEpisode:
    """One episode driven from outside, a step at a time: the sandbox, the simulated user, the transcript and the
    engine's scorer. :class:`Episode` (bundles) and the TRL environment (:mod:`autoforge.integrations.trl`) are
    this with their own loading. Not thread-safe (one sandbox worker)."""

    def __init__(self, tools: list[ToolCode], *, env_id: str | None = None, judged: list[dict] | None = None,
                 max_observation_chars: int = MAX_OBSERVATION_CHARS):
        self.env = Environment(tools, env_id=env_id)
        self.judged = [r for r in judged or () if r.get("op") in JUDGED_OPS]
        self.max_observation_chars = max_observation_chars
        self.task: Task | None = None
        self.user: Any = None
        self.messages: list[Message] = []
        self.refused: list[str] = []  # rule ids of the calls the rule engine refused (Observation.rule_id)
        self.ended = False  # the user ended the conversation: tools no longer run
        self.broken: str | None = None  # the environment or the user simulator failed: not scored
        self.closed = False

    def start(self, task: Task, user: Any, system_text: str) -> str:
        """A fresh copy of the task's initial state and a new user; the user's opening message."""
        self.task, self.user, self.ended, self.broken, self.refused = task, user, False, None, []
        try:
            self.env.reset(initial_state_for(self.env, task))
        except AutoforgeError as exc:  # as in the engine: an environment that cannot start is not scored
            self.broken = f"env_error: reset failed: {exc}"[:500]
        opening = user.opening()
        self.messages = [Message(role="system", content=system_text), Message(role="user", content=opening)]
        return opening

    def require_task(self, who: str = "the episode") -> Task:
        if self.closed:
            raise ConfigError(f"{who} is closed (its sandbox worker was handed back); start a new one")
        if self.task is None:
            raise ConfigError(f"{who}: start an episode (reset) before calling tools or asking for the reward")
        return self.task

    def call(self, name: str, arguments: dict | None) -> str:
        """Run one tool call in the sandbox; the observation text the agent sees (an error is text, never raised)."""
        self.require_task()
        arguments = dict(arguments or {})
        call = ToolCall(name=name, arguments=arguments, id=f"call_{len(self.messages)}")
        self.messages.append(Message(role="assistant", content="", tool_calls=[call]))
        if self.ended:
            text = json.dumps({"error": "the user has ended the conversation; this call was not executed"})
        else:
            try:
                obs = self.env.call(name, arguments)
                text = observation_text(obs, self.max_observation_chars)
                if getattr(obs, "rule_id", None):
                    self.refused.append(obs.rule_id)
            except AutoforgeError as exc:  # a sandbox limit: the agent sees an error, the episode goes on
                text = json.dumps({"error": f"{type(exc).__name__}: {exc}"}, ensure_ascii=False)
            except Exception as exc:  # noqa: BLE001 - the environment itself broke: not scored
                self.broken = f"env_error: {name}: {type(exc).__name__}: {exc}"[:500]
                text = json.dumps({"error": "the environment failed; this call was not executed"})
        self.messages.append(Message(role="tool", content=text, tool_call_id=call.id, name=name))
        return text

    def talk(self, message: str) -> str:
        """Send ``message`` to the simulated user; its reply (after it ended the conversation: a note saying so)."""
        self.require_task()
        if self.ended:
            return ENDED
        self.messages.append(Message(role="assistant", content=str(message)))
        try:
            turn = self.user.reply(list(self.messages))
        except Exception as exc:  # noqa: BLE001 - the simulator broke: the episode is not scored
            self.broken = f"user_sim_error: {type(exc).__name__}: {exc}"[:500]
            self.ended = True
            return "(the user is not available; reply without a tool call)"
        self.messages.append(Message(role="user", content=turn.content))
        self.ended = bool(turn.stop)
        return turn.content

    def score(self, final: str | None = None) -> tuple[float | None, dict[str, Any], list[Message]]:
        """``(reward, its components, the transcript scored)``, as the episode engine scores the episode.

        ``final``: the agent's last message, written without a tool call (added to the transcript); None: the
        last message it sent the user is its final word."""
        task = self.require_task()
        messages = list(self.messages)
        said = final if final is not None else R.final_message(messages)
        if final is not None and final.strip():
            messages.append(Message(role="assistant", content=final))
        try:
            state = None if self.broken else self.env.get_state()
        except AutoforgeError as exc:
            state, self.broken = None, f"final state unreadable: {exc}"
        reward, info = R.score(task, state, None, said) if state is not None else (None, {"state_match": None})
        reward, info = R.rule_break_reward(reward, info, episode_rule_breaks(messages, self.judged, self.refused))
        if self.broken:
            reward, info["unscored_reason"] = None, self.broken
        return reward, info, messages

    def close(self) -> None:
        """Hand the sandbox worker back to the pool."""
        if not self.closed:
            self.closed = True
            self.env.close()


class Episode:
    """One task of a :class:`autoforge.integrations.bundle.Bundle`, played a step at a time (see the module docstring).

    ``Episode(bundle, task_id, user="offline", seed=0, trial=0, user_error_rate=0.0, tool_schema="full",
    user_tool=True, system_prompt=None)``:

    * ``user``: ``offline`` (the scripted user) or ``llm[:model]`` (an OpenAI-compatible model, ``AUTOFORGE_OPENAI_*``);
      ``user_error_rate`` injects user errors as ``autoforge eval --user-error-rate`` does; ``seed`` and ``trial``
      draw them (and seed the user) as evaluation's trial ``trial`` with ``--seed seed`` does;
    * ``user_tool``: the user is reached through a ``talk_to_user`` tool (listed in :meth:`prompt`'s tools, and
      :meth:`call` routes it); the default system text then says so (:data:`USER_TOOL_SYSTEM_PROMPT`).
      ``user_tool=False``: the engine's own opening (:data:`DEFAULT_SYSTEM_PROMPT`, the environment's tools only);
    * ``tool_schema``: ``full`` | ``compact`` | ``brief`` (how the tools are shown; the engine's ``tool_schema``).

    The episode starts on creation; :meth:`reset` starts it again from a fresh copy of the initial state.
    """

    def __init__(self, bundle: Any, task_id: str, *, user: str = "offline", seed: int = 0, trial: int = 0,
                 user_error_rate: float | ErrorRates = 0.0, tool_schema: str = "full", user_tool: bool = True,
                 system_prompt: str | None = None, max_observation_chars: int = MAX_OBSERVATION_CHARS,
                 settings: Any = None, temperature: float = 0.0):
        from autoforge.rollout.batch import episode_seed
        from autoforge.rollout.evaluate import make_user_factory

        self.bundle = bundle
        self.entry = bundle.task(task_id)
        self.task = self.entry.to_task()
        self.environment = bundle.env(self.entry.env_id)
        self.seed = episode_seed(seed, self.task.task_id, trial)  # the engine's per-episode seed (play_episodes)
        self.rates = user_error_rate if isinstance(user_error_rate, ErrorRates) else ErrorRates.uniform(user_error_rate)
        self.user_factory, self.user_name = make_user_factory(user, settings=settings, temperature=temperature)
        self.user_tool = user_tool
        self.system = system_prompt if system_prompt is not None else (
            USER_TOOL_SYSTEM_PROMPT if user_tool else DEFAULT_SYSTEM_PROMPT)
        tools = self.environment.tool_schemas(tool_schema)
        if user_tool:
            if any(s.get("function", s).get("name") == USER_TOOL for s in tools):
                raise ConfigError(f"environment {self.environment.name!r} has a tool named {USER_TOOL!r}, the user's; "
                                  "pass user_tool=False and reach the user with plain messages")
            tools = tools + [json.loads(json.dumps(USER_TOOL_SCHEMA))]
        self.tools = tools
        self.reward_info: dict[str, Any] = {}
        self._live = LiveEpisode(self.environment.tools, env_id=self.environment.env_id,
                                 judged=self.environment.rules.judged, max_observation_chars=max_observation_chars)
        self.reset()

    @property
    def rules(self) -> list[dict[str, Any]]:
        """The environment's rules as the engine tells its agents (runtime guards, then judged checks)."""
        return self.environment.rules.agent_rules()

    @property
    def messages(self) -> list[Message]:
        """The transcript so far (system, the user's opening, tool calls and results, messages to and from the user)."""
        return list(self._live.messages)

    @property
    def ended(self) -> bool:
        """The user ended the conversation (tools no longer run)."""
        return self._live.ended

    def reset(self) -> str:
        """Start again: a fresh copy of the initial state and a new simulated user; the user's opening message."""
        plan = sample_plan(self.rates, random.Random(f"plan:{self.seed}"), self.task)
        return self._live.start(self.task, self.user_factory(self.task, plan, self.seed), self.system)

    def prompt(self) -> Prompt:
        """The system text, the tools the agent is given and the user's first message."""
        return Prompt(system=self.system, tools=[json.loads(json.dumps(t)) for t in self.tools],
                      user=self._live.messages[1].content)

    def call(self, name: str, arguments: dict | None = None) -> str:
        """Run a tool (the rule engine first, then its code in the sandbox); the observation text. With the user as
        a tool, ``talk_to_user`` goes to :meth:`talk_to_user`."""
        if self.user_tool and name == USER_TOOL:
            args = dict(arguments or {})
            if set(args) != {"message"}:
                return json.dumps({"error": f"invalid arguments: {USER_TOOL} takes one argument, message"})
            return self.talk_to_user(str(args["message"]))
        return self._live.call(name, arguments)

    def talk_to_user(self, message: str) -> str:
        """Send a message to the simulated user; its reply."""
        return self._live.talk(message)

    def reward(self, final_message: str | None = None) -> float | None:
        """1.0 or 0.0 as the episode engine scores the episode now (None: it cannot be scored: the environment or
        the user simulator broke). ``final_message``: the agent's last message without a tool call (None: the last
        message it sent the user). The components are in :attr:`reward_info`."""
        reward, info, _ = self._live.score(final_message)
        self.reward_info = {**info, "reward": reward, "task_id": self.task.task_id}
        return reward

    def close(self) -> None:
        """Hand the sandbox worker back (the episode cannot be played after)."""
        self._live.close()

    def __enter__(self) -> "Episode":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Episode({self.task.task_id}, {self.environment.name}, {len(self._live.messages)} messages)"
