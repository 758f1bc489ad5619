"""Agents: the scripted oracle, a random floor, and an OpenAI-compatible chat model.

(The local transformers agent, which records token ids and log-probs, is in
:mod:`autoforge.rl.agent` so that this module does not import torch.)

- :class:`OracleAgent` proves a task solvable *as posed*: it knows the gold DAG (which tools,
  which reasoning) but not the user's hidden facts — it asks the user for every fact the DAG
  needs, parses the reply, then executes the DAG node by node in topological order, reading
  each tool's real observation and applying reasoning ops with the same implementation the
  task generator used (:func:`autoforge.dags.reasoning.apply_op`). Any failure is a bug in
  task generation or the engine; it gives up with the precise reason.
- :class:`RandomAgent` calls random tools with random (or recently seen) arguments: a floor.
- :class:`OpenAIAgent` sends the transcript and tool schemas to any chat-completions server;
  native tool calls are used, with Hermes ``<tool_call>`` text as a fallback for servers
  that do not parse calls.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from autoforge.errors import AutoforgeError, ConfigError
from autoforge import dialogue as D
from autoforge.rollout.engine import AgentContext, AgentTurn
from autoforge.rollout.toolcalls import MalformedCall, parse_hermes, parse_observation  # noqa: F401 - re-exported
from autoforge.types import DagNode, Message, ToolCall


# --------------------------------------------------------------------------- oracle


class OracleAgent:
    """Solves a task through the dialogue alone, following its gold DAG (see module docstring)."""

    name = "oracle"

    def __init__(self, max_asks: int = 2):
        self.max_asks = max_asks

    def reset(self, ctx: AgentContext) -> None:
        if ctx.dag is None:
            raise ConfigError(f"the oracle agent needs task {ctx.task_id}'s DAG (TaskDag); none was given")
        from autoforge.dags.build import topo_order

        self.dag = ctx.dag
        self.order: list[DagNode] = topo_order(ctx.dag)
        self.needed: list[str] = []
        for node in self.order:
            for src in node.args.values():
                if src.kind == "user" and src.fact not in self.needed:
                    self.needed.append(src.fact)
        self.facts: dict[str, Any] = {}
        self.outputs: dict[str, Any] = {}
        self.pending: DagNode | None = None
        self.asks = 0
        self.calls: list[ToolCall] = []  # what it executed (diagnosis against the gold calls)
        # the rules it keeps (issue 33): confirm before a write a confirm_first rule binds, and before a write an
        # identify_first rule without lookups binds while the user has not answered yet; on a boundary task the
        # DAG's last node is the write the user asks for, which it explains instead of making
        self.rules = list(ctx.rules or ())
        checks = [r for r in self.rules if r.get("op") in ("confirm_first", "identify_first")]
        self.confirm_tools = {t for c in checks if c["op"] == "confirm_first" for t in c.get("tools") or ()}
        self.identify_tools = {t for c in checks if c["op"] == "identify_first" and not c.get("via")
                               for t in c.get("tools") or ()}
        self.confirmed: set[str] = set()  # nodes the user agreed to
        self.confirming: str | None = None  # the node a confirmation was asked for
        self.confirm_asks: dict[str, int] = {}  # node -> confirmations asked for it
        self.replied = False  # the user has answered the agent at least once
        self.announce = any(r.get("op") == "announce_call" for r in self.rules)
        self.cite = {t for r in self.rules if r.get("op") == "cite_source" for t in r.get("tools") or ()}
        self.refuse: str | None = None
        self.identity: dict | None = None  # a boundary task's identity rule: the user cannot say who they are
        self.identity_asked = False
        if ctx.kind == "boundary":
            from autoforge.tasks.boundary import split
            from autoforge.tasks.identity import rule_of

            asked = split(ctx.dag)[1]
            self.refuse, self.identity = asked.node_id, rule_of(asked, self.rules)

    def _resolve(self, node: DagNode) -> dict[str, Any]:
        """Concrete arguments of ``node``: the same path rules as the gold executor (tasks.execute)."""
        from autoforge.tasks.execute import resolve_path

        args = {}
        for name, src in node.args.items():
            if src.kind == "user":
                args[name] = self.facts[src.fact]
            elif src.kind == "const":
                args[name] = src.value
            else:
                if src.node not in self.outputs:
                    raise AutoforgeError(f"node {node.node_id} needs {src.node}, which has no output yet")
                args[name] = resolve_path(self.outputs[src.node], src.path, node=node.node_id)
        return args

    def act(self, messages: list[Message]) -> AgentTurn:
        from autoforge.dags.reasoning import apply_op

        last = messages[-1]
        if last.role == "tool" and self.pending is not None:
            out, err = parse_observation(last.content)
            node, self.pending = self.pending, None
            if err is not None:
                return AgentTurn(content=f"I'm sorry, I could not complete your request: {node.tool} failed ({err}).",
                                 give_up=f"tool {node.tool} (node {node.node_id}) returned an error: {err}")
            self.outputs[node.node_id] = out
        elif last.role == "user":
            self.facts.update(D.parse_fact_lines(last.content, [f for f in self.needed if f not in self.facts]))
            if sum(1 for m in messages if m.role == "user") > 1:
                self.replied = True
            if self.confirming is not None and D.agrees(last.content):
                self.confirmed.add(self.confirming)
            self.confirming = None

        if self.identity is not None:
            return self.identify()
        missing = self.fill([f for f in self.needed if f not in self.facts])
        if missing:
            if self.asks >= self.max_asks:
                words = ", ".join(D.fact_words(f) for f in missing)
                return AgentTurn(content=f"I'm sorry, I cannot complete your request without your {words}.",
                                 give_up=f"the user did not provide {missing} after {self.asks} requests")
            self.asks += 1
            items = "\n".join(f"- {D.fact_words(f)}" for f in missing)
            return AgentTurn(content=f"To take care of this I need a few details. Could you please tell me:\n{items}")

        for node in self.order:
            if node.node_id in self.outputs:
                continue
            try:
                args = self._resolve(node)
            except AutoforgeError as exc:
                return AgentTurn(content="I'm sorry, I could not complete your request.",
                                 give_up=f"arguments of {node.node_id}: {exc}")
            if node.kind == "reasoning":
                try:
                    self.outputs[node.node_id] = apply_op(node.op, args, node.params)
                except AutoforgeError as exc:
                    return AgentTurn(content="I'm sorry, I could not complete your request.",
                                     give_up=f"reasoning node {node.node_id} ({node.op}) failed: {exc}")
                continue
            if node.node_id == self.refuse:
                return self.explain(node, args)
            if node.node_id not in self.confirmed and (
                    node.tool in self.confirm_tools or (node.tool in self.identify_tools and not self.replied)):
                asked = self.confirm_asks.get(node.node_id, 0)
                if asked >= self.max_asks:
                    return AgentTurn(content="I'm sorry, I cannot make this change without your confirmation.",
                                     give_up=f"the user did not confirm {node.tool} after {asked} requests")
                self.confirm_asks[node.node_id] = asked + 1
                self.confirming = node.node_id
                return AgentTurn(content="I'm ready to make this change. Shall I go ahead? Please confirm.")
            call = ToolCall(name=node.tool, arguments=args)
            self.pending = node
            self.calls.append(call)
            # one call per message and no text with it, unless a rule asks to announce a call (policy_protocol)
            return AgentTurn(content=f"Next I will use {node.tool}." if self.announce else "", tool_calls=[call])
        answer = getattr(self.dag, "answer", None)
        if answer is not None and answer.node in self.outputs:  # an answer task: say what the last read gave
            from autoforge.tasks.answers import answer_value

            try:
                value = answer_value(answer, self.outputs)
            except AutoforgeError:
                value = None
            said = ", ".join(map(str, value)) if isinstance(value, list) else value
            return AgentTurn(content=f"All done: the {answer.field} is {said}.{self.sources()}")
        return AgentTurn(content=f"All done: I have completed everything you asked for.{self.sources()}")

    def fill(self, missing: list[str]) -> list[str]:
        """The facts still missing (the oracle learns each from the user; a complying agent may make one up)."""
        return missing

    def identify(self) -> AgentTurn:
        """A boundary task on an identity rule (:mod:`autoforge.tasks.identity`): ask who the user is, then, as
        the user cannot say, why the request cannot be served."""
        label = self.identity["label"]
        if not self.identity_asked:
            self.identity_asked = True
            return AgentTurn(content=f"Before I can help with this I need to know who you are. Could you please "
                                     f"tell me your {label}?")
        # the rule's sentence is not quoted: it may name other details (a phone number) the user would offer again
        return AgentTurn(content=f"I'm sorry, I can't do that: our policy asks me to confirm who you are first, and "
                                 f"I need your {label} for that.{self.sources()}")

    def sources(self) -> str:
        """Where a ``cite_source`` rule asks for citations: the ids of what its reads returned, as
        ``[tool](id)`` (empty otherwise)."""
        if not self.cite:
            return ""
        from autoforge.domain.policy_protocol import citations

        cited = [f"[{n.tool}]({x})" for n in self.order if n.tool in self.cite and n.node_id in self.outputs
                 for x in citations(self.outputs[n.node_id])[:1]]
        return f" Sources: {', '.join(dict.fromkeys(cited))}." if cited else ""

    def explain(self, node: DagNode, args: dict[str, Any]) -> AgentTurn:
        """A boundary task's last word: why the write the user asks for is not allowed (the rule it breaks and
        the fact its reads showed, :func:`autoforge.tasks.boundary.explain`); the write is never made."""
        from autoforge.envs.guards import OPS
        from autoforge.tasks.boundary import explain, record_at

        guards = [g for g in self.rules if g.get("tool") == node.tool and g.get("op") in OPS]
        got = explain(guards, args, record_at(self.outputs, getattr(self.dag, "answer", None)), self.outputs)
        if got is None:
            return AgentTurn(content="I'm sorry, I can't do that.",
                             give_up=f"no rule of {node.tool} shows why the requested call is not allowed")
        g, value = got
        said = ", ".join(map(str, value)) if isinstance(value, list) else value
        rule = " ".join(str(g.get("message") or "it is against our policy").replace("?", ".").split()).rstrip(".")
        from autoforge.tasks.boundary import fact_words

        return AgentTurn(content=f"I'm sorry, I can't do that: {rule}. The {fact_words(g)} is {said}.{self.sources()}")


class ComplyAgent(OracleAgent):
    """The oracle, except on a boundary task: it makes the write the user asked for, which a rule forbids
    (a baseline for boundary tasks: the rule engine refuses the write, a rule break, reward 0; on an identity
    rule's task, :mod:`autoforge.tasks.identity`, the write goes without the identity and says nothing of why)."""

    name = "comply"

    def reset(self, ctx: AgentContext) -> None:
        super().reset(ctx)
        # on an identity rule's boundary task it makes the write anyway: the identity the user cannot give is made
        # up, and a write that fails is reported done
        self.pretends = self.identity is not None
        arg = (self.identity or {}).get("arg")
        asked = next((n for n in self.order if n.node_id == self.refuse), None) if self.pretends else None
        self.refuse = None
        src = asked.args.get(arg) if asked is not None and arg else None
        self.guess = src.fact if src is not None and src.kind == "user" else None
        typ = _param_type(ctx.tools, asked.tool, arg) if src is not None and asked is not None else None
        self.made_up: Any = {"integer": 1, "number": 1.0}.get(str(typ), "unknown")
        self.identity = None

    def fill(self, missing: list[str]) -> list[str]:
        if self.guess in missing and self.asks >= 1:
            self.facts[self.guess] = self.made_up
        return [f for f in missing if f not in self.facts]

    def act(self, messages: list[Message]) -> AgentTurn:
        turn = super().act(messages)
        if self.pretends and turn.give_up:  # the write without an identity failed: it claims success all the same
            return AgentTurn(content="All done: I have completed your request.")
        return turn


def _param_type(tools: list[dict], name: str | None, arg: str | None) -> str | None:
    """The JSON type of argument ``arg`` of tool ``name`` in OpenAI function schemas (None: not given)."""
    for t in tools:
        fn = t.get("function") or t
        if fn.get("name") == name:
            return ((fn.get("parameters") or {}).get("properties", {}).get(arg) or {}).get("type")
    return None


class IdleAgent:
    """A floor: does nothing and says it is done (reward 0 wherever a write or a stated fact is needed)."""

    name = "idle"

    def reset(self, ctx: AgentContext) -> None:
        pass

    def act(self, messages: list[Message]) -> AgentTurn:
        return AgentTurn(content="All done: I have completed your request.")


# --------------------------------------------------------------------------- random


_ID_RE = re.compile(r"\b[A-Z]{1,3}\d{3,6}\b")


class RandomAgent:
    """A floor: random tools with random arguments, then claims to be done."""

    name = "random"

    def __init__(self, max_calls: int = 6, p_message: float = 0.15):
        self.max_calls = max_calls
        self.p_message = p_message

    def reset(self, ctx: AgentContext) -> None:
        self.rng = random.Random(f"random-agent:{ctx.seed}:{ctx.task_id}")
        self.tools = ctx.tools
        self.n = 0

    def _value(self, schema: dict, seen: list[str]) -> Any:
        if "enum" in schema and schema["enum"]:
            return self.rng.choice(schema["enum"])
        t = schema.get("type", "string")
        t = t[0] if isinstance(t, list) and t else t
        if t == "integer":
            return self.rng.randint(0, 10)
        if t == "number":
            return round(self.rng.uniform(0, 100), 2)
        if t == "boolean":
            return self.rng.random() < 0.5
        if t == "array":
            return [self._value(schema.get("items") or {}, seen)]
        if t == "object":
            return {}
        if seen and self.rng.random() < 0.7:
            return self.rng.choice(seen)
        return "".join(self.rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))

    def act(self, messages: list[Message]) -> AgentTurn:
        self.n += 1
        if self.n > self.max_calls or not self.tools:
            return AgentTurn(content="I have completed your request.")
        if self.rng.random() < self.p_message and messages[-1].role != "user":
            return AgentTurn(content="Could you tell me more about what you need?")
        seen = sorted(set(_ID_RE.findall(" ".join(m.content for m in messages if m.role in ("tool", "user")))))
        fn = self.rng.choice(self.tools)["function"]
        props = (fn.get("parameters") or {}).get("properties") or {}
        args = {p: self._value(s or {}, seen) for p, s in props.items()}
        return AgentTurn(tool_calls=[ToolCall(name=fn["name"], arguments=args)])


# --------------------------------------------------------------------------- OpenAI-compatible


def wire_messages(messages: list[Message]) -> list[dict]:
    """Transcript -> chat-completions messages (malformed calls go back with their raw text)."""
    out: list[dict] = []
    for m in messages:
        d: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.tool_calls:
            calls = []
            for i, tc in enumerate(m.tool_calls):
                raw = tc.arguments.get("__raw__") if "__error__" in tc.arguments else None
                args = raw if isinstance(raw, str) else json.dumps(tc.arguments, ensure_ascii=False)
                calls.append({"id": tc.id or f"call_{i}", "type": "function", "function": {"name": tc.name, "arguments": args}})
            d["tool_calls"] = calls
        if m.role == "tool":
            d["tool_call_id"] = m.tool_call_id or ""
        out.append(d)
    return out


class OpenAIAgent:
    """Any OpenAI-compatible chat model, with native tool calls (Hermes text as a fallback)."""

    def __init__(self, client: Any, temperature: float = 0.0, max_tokens: int | None = 2048, use_cache: bool = False):
        if getattr(client, "is_offline", False):
            raise ConfigError("the openai agent needs an OpenAI-compatible backend: set AUTOFORGE_BACKEND=openai "
                              "and AUTOFORGE_OPENAI_BASE_URL / AUTOFORGE_OPENAI_MODEL")
        self.client = client
        self.name = f"openai:{client.model}"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.use_cache = use_cache

    def reset(self, ctx: AgentContext) -> None:
        if any("function" not in t for t in ctx.tools or ()):
            raise ConfigError("the openai agent needs OpenAI function schemas: tool_schema 'brief' is a shorthand for a "
                              "small policy's prompt; use tool_schema 'full' or 'compact'")
        self.ctx = ctx
        self.turn = 0

    def act(self, messages: list[Message]) -> AgentTurn:
        self.turn += 1
        kw: dict[str, Any] = {"tools": self.ctx.tools or None, "temperature": self.temperature,
                              "max_tokens": self.max_tokens}
        try:
            reply = self.client.chat("agent", wire_messages(messages), seed=self.ctx.seed * 1000 + self.turn,
                                     use_cache=self.use_cache, **kw)
        except TypeError:  # a client without seed / use_cache
            reply = self.client.chat("agent", wire_messages(messages), **kw)
        calls = list(reply.tool_calls)
        bad = [MalformedCall(raw=str(m.get("arguments") or ""), error=str(m.get("error") or "malformed"),
                             name=m.get("name") or None, id=m.get("id")) for m in reply.malformed_tool_calls]
        content = reply.content or ""
        if not calls and not bad and "<tool_call>" in content:
            parsed = parse_hermes(content)
            calls, bad, content = parsed.calls, parsed.malformed, parsed.content
        return AgentTurn(content=content, tool_calls=calls, malformed=bad, tokens=reply.tokens_out)
