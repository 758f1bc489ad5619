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

:func:`parse_transcript` reads a finished trajectory in the forms trainers hand a reward function (the
decoded response text of verl's ``ToolAgentLoop`` with Hermes ``<tool_call>`` blocks, OpenAI-style chat
messages with ``tool_calls``, or a plain list of calls), and :meth:`Episode.replay` plays it again in a fresh
copy of the initial state: with the offline user (deterministic) the reward equals the one the live episode
gave.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field

from autoforge.envs.runtime import Environment
from autoforge.errors import AutoforgeError, ConfigError
from autoforge.rollout import reward as R
from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT, initial_state_for, observation_text
from autoforge.rollout.rule_judge import episode_rule_breaks
from autoforge.rollout.users import ErrorRates, sample_plan
from autoforge.domain.rule_kinds import JUDGED_OPS
from autoforge.types import Message, Task, ToolCall, ToolCode

__all__ = ["MAX_OBSERVATION_CHARS", "USER_TOOL", "USER_TOOL_SCHEMA", "USER_TOOL_SYSTEM_PROMPT", "Episode",
           "LiveEpisode", "Prompt", "Transcript", "parse_transcript"]

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


# --------------------------------------------------------------------------- finished transcripts


@dataclass
class Transcript:
    """A finished trajectory as the agent acted: ``steps`` in order, each an assistant turn's tool calls
    (a list of ``(name, arguments)``) or a message it said to the user in plain text (a str: the engine's way of
    reaching the user, without the ``talk_to_user`` tool); ``final``: its last message written without a tool call
    (None: it ended on tool calls, or said nothing)."""

    steps: list[list[tuple[str, Any]] | str] = field(default_factory=list)
    final: str | None = None

    @property
    def calls(self) -> list[tuple[str, Any]]:
        """Every tool call, in order."""
        return [c for s in self.steps if not isinstance(s, str) for c in s]


# verl's Hermes parser (verl.experimental.agent_loop.tool_parser.HermesToolParser): every
# <tool_call>...</tool_call> span whose body is JSON with "name" and "arguments"; others are dropped.
_VERL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"<tool_response>.*?(?:</tool_response>|$)", re.DOTALL)
_SPECIAL_TOKEN = re.compile(r"<\|[^|<>\s]{1,40}\|>")  # <|im_start|>, <|im_end|>, <|eot_id|>, ...
_ASSISTANT_MARK = re.compile(r"^[ \t]*assistant[ \t]*$", re.MULTILINE)  # a new assistant turn's role line


def _arguments(raw: Any) -> Any:
    """Tool-call arguments as a JSON value (a JSON string is decoded; text that is not JSON stays a str)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw
    return {} if raw is None else raw


def _hermes_calls(text: str) -> list[tuple[str, Any]]:
    """The calls verl's Hermes parser reads from one assistant turn's text."""
    out = []
    for body in _VERL_CALL.findall(text):
        try:
            obj = json.loads(body)
            name, args = obj["name"], obj["arguments"]
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(name, str):
            out.append((name, args))
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, list):  # OpenAI content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _parse_text(text: str) -> Transcript:
    """A decoded response: the assistant turns of verl's ``ToolAgentLoop`` and the tool results between them,
    as its reward manager decodes them (special tokens skipped or not). A turn starts at a role line
    ``assistant`` (the chat template's marker, whose special tokens were skipped); the first turn has none."""
    text = _SPECIAL_TOKEN.sub("\n", text)
    turns = _ASSISTANT_MARK.split(text)
    steps: list[list[tuple[str, Any]] | str] = []
    final = None
    for i, turn in enumerate(turns):
        calls = _hermes_calls(_TOOL_RESPONSE.sub("", turn))
        if calls:
            steps.append(calls)
        elif i == len(turns) - 1:
            final = turn.strip() or None
    return Transcript(steps=steps, final=final)


def _call_of(item: Any) -> tuple[str, Any]:
    if isinstance(item, (tuple, list)) and len(item) == 2:
        return str(item[0]), _arguments(item[1])
    if isinstance(item, dict):
        fn = item.get("function") if isinstance(item.get("function"), dict) else item
        if "name" not in fn:
            raise ConfigError(f"a tool call needs a name: {json.dumps(item, default=str)[:200]}")
        return str(fn["name"]), _arguments(fn.get("arguments"))
    if hasattr(item, "name") and hasattr(item, "arguments"):  # autoforge.types.ToolCall, OpenAI SDK objects
        fn = getattr(item, "function", None) or item
        return str(fn.name), _arguments(fn.arguments)
    fn = getattr(item, "function", None)
    if fn is not None:
        return str(fn.name), _arguments(fn.arguments)
    raise ConfigError(f"not a tool call: {item!r:.200}; pass (name, arguments), {{'name', 'arguments'}} or "
                      "OpenAI-style {'function': {'name', 'arguments'}}")


def _role(item: Any) -> str | None:
    role = item.get("role") if isinstance(item, dict) else getattr(item, "role", None)
    return role if isinstance(role, str) else None


def parse_transcript(transcript: "str | Transcript | Iterable[Any]") -> Transcript:
    """A finished trajectory in any of the forms trainers hand a reward function, as a :class:`Transcript`:

    * a **str**: the decoded response of verl's ``ToolAgentLoop`` (its reward function's ``solution_str``):
      Hermes ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` blocks read as verl's Hermes parser
      reads them, the turns split at the chat template's ``assistant`` role lines, tool results (``<tool_response>``
      blocks or ``tool`` turns) skipped; the last turn without a call is the final message;
    * **chat messages** (dicts or objects with ``role``): OpenAI-style assistant ``tool_calls`` (``function.name``,
      ``function.arguments`` as a JSON string or an object), or Hermes blocks inside an assistant's ``content``;
      system, user and tool messages are skipped (the replay asks the user and the tools again); an assistant
      message without a call is said to the user, the last one is the final message;
    * **calls**: ``(name, arguments)`` pairs, ``{"name", "arguments"}`` dicts, OpenAI ``{"function": {...}}``
      dicts or :class:`autoforge.types.ToolCall` records, one turn each.
    """
    if isinstance(transcript, Transcript):
        return transcript
    if isinstance(transcript, str):
        return _parse_text(transcript)
    items = list(transcript)
    if not any(_role(i) for i in items):
        return Transcript(steps=[[_call_of(i)] for i in items])
    steps: list[list[tuple[str, Any]] | str] = []
    said: list[int] = []  # indexes in steps of the assistant's plain messages
    for item in items:
        if _role(item) != "assistant":
            continue
        get = item.get if isinstance(item, dict) else (lambda k, i=item: getattr(i, k, None))
        raw_calls, content = get("tool_calls"), _text_of(get("content"))
        calls = [_call_of(c) for c in raw_calls] if raw_calls else _hermes_calls(content)
        if calls:
            steps.append(calls)
        elif content.strip():
            said.append(len(steps))
            steps.append(content)
    final = None
    if said and said[-1] == len(steps) - 1:  # the last assistant message, without a call: the final word
        final = steps.pop()
    return Transcript(steps=steps, final=final)


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

    def replay(self, transcript: "str | Transcript | Iterable[Any]", *, final_message: str | None = None,
               max_parallel_calls: int | None = None, tool_names: dict[str, str] | None = None) -> float | None:
        """Play a finished trajectory again from a fresh copy of the initial state and score it: the reward the
        live episode gave it (the offline user answers the same messages the same way).

        ``transcript``: anything :func:`parse_transcript` reads (verl's decoded response text, chat messages,
        calls). Its tool calls run in order (only calls to this episode's tools with an object of arguments, as
        verl runs them; ``talk_to_user`` reaches the user), its plain messages mid-way are said to the user, and
        its last message without a call is the final word (``final_message`` overrides it).
        ``max_parallel_calls``: run at most this many calls of one turn (verl's
        ``multi_turn.max_parallel_calls``, default 1 there; None: all). ``tool_names``: the names the agent
        was given -> this episode's tool names (a trainer that renamed tools); calls to other names are skipped
        (None: the episode's own names). :attr:`reward_info` holds the components."""
        parsed = parse_transcript(transcript)
        if max_parallel_calls is not None and max_parallel_calls < 1:
            raise ConfigError(f"max_parallel_calls must be >= 1 (or None), got {max_parallel_calls}")
        names = {s.get("function", s).get("name") for s in self.tools}
        given = tool_names if tool_names is not None else {n: n for n in names}
        self.reset()
        for step in parsed.steps:
            if isinstance(step, str):
                self.talk_to_user(step)
                continue
            for name, args in step[:max_parallel_calls]:
                if given.get(name) in names and isinstance(args, dict):
                    self.call(given[name], args)
        return self.reward(final_message if final_message is not None else parsed.final)

    def close(self) -> None:
        """Hand the sandbox worker back (the episode cannot be played after)."""
        self._live.close()

    def __enter__(self) -> "Episode":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Episode({self.task.task_id}, {self.environment.name}, {len(self._live.messages)} messages)"
