"""The user's request: only the minimum necessary information, the rest as hidden user facts.

Paper (arXiv 2512.22857, Sec. 3.3, "task refinement"): the final task Q_k holds only the
minimum necessary information; the simulated user knows more and reveals it when asked.
Offline, templates with varied phrasing describe each requirement's write by *how to find*
its target (the reasoning chain: "my order with the highest total"), never by an id the
agent must look up. Facts that identify the user (the lookup of a person-like record by
email, name, phone) stay hidden in ``user_facts``; values the user wants set are stated.
Online (``client`` not offline), the LLM rewrites the draft (step ``task_request``) and the
rewrite must still state every stated value and leak no looked-up id, else it is refused.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from autoforge.dags.graph import is_key_param, key_fields
from autoforge.dags.reasoning import describe_op
from autoforge.errors import AutoforgeError
from autoforge.tasks.execute import DagRun
from autoforge.tasks.instantiate import PERSON
from autoforge.types import ArgSource, DagNode, EnvironmentRecord, TaskDag, ToolCode

OPENERS = ["Hi,", "Hello!", "Hey there.", "Good morning.", "Hi there,", ""]
ASKS = ["could you {x}?", "please {x}.", "I'd like you to {x}.", "can you {x}?", "I need you to {x}."]
JOINERS = ["Also,", "After that,", "One more thing:", "And then", "Besides that,"]
_FACT_SUFFIX = re.compile(r"_\d+$")  # quantity_2 -> quantity
PERSONAL = ("email", "phone", "username", "password", "handle", "login", "ssn", "dob", "birth")


class PhrasingError(AutoforgeError):
    """A request could not be written (or an LLM rewrite broke a rule)."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason, self.detail = reason, detail


@dataclass
class Draft:
    request: str
    stated: set[str] = field(default_factory=set)  # fact names whose values are in the request
    hidden: set[str] = field(default_factory=set)  # fact names the user reveals only when asked


def _fmt(v: Any) -> str:
    """A value as the user would say it (strings with spaces quoted, records as 'field value' lists)."""
    if isinstance(v, str):
        return f"'{v}'" if " " in v else v
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return "(" + ", ".join(f"{_words(k)} {_fmt(x)}" for k, x in v.items()) + ")"
    if isinstance(v, list):
        return " and ".join(_fmt(x) for x in v) if v else "none"
    return str(v)


def _words(name: str) -> str:
    return name.replace("_", " ")


class _Writer:
    def __init__(self, dag: TaskDag, run: DagRun, tools: dict[str, ToolCode], env: EnvironmentRecord, rng: random.Random):
        self.dag, self.run, self.tools, self.env, self.rng = dag, run, tools, env, rng
        self.nodes = {n.node_id: n for n in dag.nodes}
        self.keys = key_fields(env)
        self.colls = {c.name: c for c in env.state_schema.collections}
        self.by_pk = {c.primary_key: c for c in env.state_schema.collections}
        self.stated: set[str] = set()
        self.hidden: set[str] = set()

    def entity(self, tool: ToolCode | None, fallback: str = "item") -> str:
        c = self.colls.get((tool.collection if tool else None) or "")
        return _words(c.entity) if c else fallback

    def is_me(self, node: DagNode) -> bool:
        """A lookup of the user themself: person-like record found by the user's own details."""
        tool = self.tools.get(node.tool or "")
        if tool is None or tool.effect != "read":
            return False
        user_args = [a for a, s in node.args.items() if s.kind == "user"]
        if not user_args or len(user_args) != len(node.args):
            return False
        c = self.colls.get(tool.collection or "")
        return bool(c and c.entity in PERSON) or any(any(w in a for w in PERSONAL) for a in user_args)

    def fact(self, src: ArgSource, hidden: bool = False) -> Any:
        (self.hidden if hidden else self.stated).add(src.fact)
        return self.run.facts[src.fact]

    def owner(self, node: DagNode) -> str:
        """Whose list a list-tool returned: 'my' or 'of <description>'."""
        for arg, src in node.args.items():
            if is_key_param(arg, self.keys):
                d = self.describe(src)
                return "my" if d == "me" else f"of {d}"
        for arg, src in node.args.items():
            if src.kind == "user":
                return f"with {_words(arg)} {_fmt(self.fact(src))}"
        return ""

    def describe(self, src: ArgSource) -> str:
        """How the user refers to the thing an argument identifies (never by a looked-up id)."""
        if src.kind == "user":
            c = self.by_pk.get(src.fact or "")
            if c is not None and c.entity in PERSON:  # the user's own id: known, revealed when asked
                self.fact(src, hidden=True)
                return "me"
            what = _words(c.entity) if c else _words(_FACT_SUFFIX.sub("", src.fact or "item"))
            return f"{what} {_fmt(self.fact(src))}"
        if src.kind == "const":
            return _fmt(src.value)
        node = self.nodes[src.node]
        if node.kind == "reasoning":
            text = self.describe_reasoning(node)
            leaf_key = self.by_pk.get((src.path or "").rsplit(".", 1)[-1])
            if leaf_key is not None and _words(leaf_key.entity) != self.reasoning_entity(node):
                if leaf_key.entity in PERSON and text.startswith("my "):
                    return "me"
                return f"the {_words(leaf_key.entity)} of {text}"
            return text
        tool = self.tools[node.tool]
        if self.is_me(node):
            for s in node.args.values():
                self.fact(s, hidden=True)
            return "me"
        leaf_key = self.by_pk.get((src.path or "").rsplit(".", 1)[-1])
        if leaf_key is not None and _words(leaf_key.entity) != self.entity(tool, ""):
            inner = self.describe(ArgSource(kind="node", node=src.node, path=self.pk_path(tool)))
            return "me" if leaf_key.entity in PERSON and inner.startswith("my ") else (
                f"the {_words(leaf_key.entity)} of {inner if inner != 'me' else 'my account'}")
        if tool.effect == "write":
            return f"the new {self.entity(tool)}" if tool.kind == "create" else f"that same {self.entity(tool)}"
        user_args = [(a, s) for a, s in node.args.items() if s.kind == "user"]
        if user_args and len(user_args) == len(node.args):
            what = " and ".join(f"{_words(a)} {_fmt(self.fact(s))}" for a, s in user_args)
            return f"the {self.entity(tool)} with {what}"
        for arg, s in node.args.items():
            if is_key_param(arg, self.keys):
                inner = self.describe(s)
                ent = self.entity(tool)
                if inner == "me":
                    owner = self.by_pk.get(arg)
                    return "me" if owner is not None and _words(owner.entity) == ent else f"my {ent}"
                return inner
        return f"the {self.entity(tool)}"

    def reasoning_entity(self, node: DagNode) -> str:
        while node is not None and node.kind == "reasoning":
            items = node.args.get("items") or node.args.get("left")
            node = self.nodes.get(items.node) if items is not None and items.kind == "node" else None
        return self.entity(self.tools.get(node.tool or "")) if node is not None else "item"

    def pk_path(self, tool: ToolCode) -> str:
        c = self.colls.get(tool.collection or "")
        return c.primary_key if c else ""

    def describe_reasoning(self, node: DagNode) -> str:
        items = node.args.get("items")
        list_node = self.nodes.get(items.node) if items and items.kind == "node" else None
        value = self.fact(node.args["value"]) if "value" in node.args and node.args["value"].kind == "user" else None
        among = ""
        if list_node is not None and list_node.kind == "reasoning" and list_node.op == "filter":
            fv = self.fact(list_node.args["value"])
            among = f" among those whose {_words(list_node.params['field'])} is {_fmt(fv)}"
            items = list_node.args.get("items")
            list_node = self.nodes.get(items.node) if items and items.kind == "node" else None
        tool = self.tools.get(list_node.tool or "") if list_node is not None else None
        ent = self.entity(tool)
        base = describe_op(node.op or "", node.params, ent, _fmt(value) if value is not None else None)
        owner = self.owner(list_node) if list_node is not None and list_node.kind == "tool" else ""
        if node.op == "filter":
            return f"my {base}" if owner == "my" else f"the {base} {owner}".strip()
        if owner == "my":
            base = base.replace("the ", "my ", 1)
        elif owner:
            base = f"{base} {owner}"
        return base + among

    def data_phrase(self, arg: str, src: ArgSource) -> tuple[str, str]:
        """(parameter words, value phrase) for a write's data argument."""
        if src.kind == "user":
            return _words(arg), _fmt(self.fact(src))
        node = self.nodes[src.node]
        if node.kind == "reasoning" and node.op in ("add_days", "add"):
            return _words(arg), describe_op(node.op, node.params, "")
        return _words(arg), "the value from " + self.describe(src)

    def clause(self, node: DagNode) -> str:
        tool = self.tools[node.tool]
        ent = self.entity(tool)
        coll = self.colls.get(tool.collection or "")
        pk = coll.primary_key if coll else None
        obj = self.describe(node.args[pk]) if pk and pk in node.args else None
        obj = {"me": "my account"}.get(obj, obj) if obj else obj
        refs = []
        for arg, src in sorted(node.args.items()):
            if arg != pk and is_key_param(arg, self.keys):
                d = self.describe(src)
                if d != "me" and d != obj and d not in refs:
                    refs.append(d)
        data = [self.data_phrase(a, s) for a, s in sorted(node.args.items()) if not is_key_param(a, self.keys)]
        words = tool.name.split("_")
        verb = words[0]
        if tool.kind == "create" or verb in ("create", "add", "new", "register", "book", "place", "open", "submit"):
            text = f"{verb if verb != 'new' else 'create'} a new {ent}"
            if refs:
                text += " for " + " and ".join(refs)
            if data:
                text += " with " + ", ".join(f"{p} {v}" for p, v in data)
            return text
        if tool.kind in ("cancel", "delete") or verb in ("cancel", "delete", "remove", "close", "archive") and not data:
            return f"{verb} {obj or 'the ' + ent}" + (f" (together with {' and '.join(refs)})" if refs else "")
        if data and (tool.kind == "update" or verb in ("update", "set", "change", "edit", "modify", "reschedule", "rename")):
            parts = [f"{'make' if v.startswith(('increased', 'decreased')) or 'later' in v or 'earlier' in v else 'set'} "
                     f"the {p} of {obj or 'the ' + ent} {v if v.startswith(('increased', 'decreased')) or 'later' in v or 'earlier' in v else 'to ' + v}"
                     for p, v in data]
            return " and ".join(parts)
        action = " ".join(words)
        text = f"{action} for {obj or 'the ' + ent}"
        if refs:
            text += " with " + " and ".join(refs)
        if data:
            text += ", " + ", ".join(f"{p}: {v}" for p, v in data)
        return text

    def write(self) -> Draft:
        reqs: dict[int, list[str]] = {}
        for node in self.dag.nodes:
            if node.kind == "tool" and self.tools[node.tool].effect == "write":
                reqs.setdefault(node.requirement, []).append(self.clause(node))
        sentences = []
        for i, r in enumerate(sorted(reqs)):
            body = " and then ".join(reqs[r])
            if i == 0:
                sentences.append(self.rng.choice(ASKS).format(x=body))
            else:
                sentences.append(f"{self.rng.choice(JOINERS)} {self.rng.choice(ASKS).format(x=body)}")
        opener = self.rng.choice(OPENERS)
        if not opener.endswith(","):
            sentences[0] = sentences[0][0].upper() + sentences[0][1:]
        sentences[1:] = [x[0].upper() + x[1:] for x in sentences[1:]]
        request = f"{opener} {' '.join(sentences)}".strip()
        # every fact is known to the user; those not stated are revealed on request
        hidden = (set(self.run.facts) - self.stated) | self.hidden - self.stated
        return Draft(request=request, stated=set(self.stated), hidden=hidden)


def write_request(dag: TaskDag, run: DagRun, tools: dict[str, ToolCode], env: EnvironmentRecord, rng: random.Random) -> Draft:
    """The offline request for a gold run (template phrasing chosen by ``rng``)."""
    return _Writer(dag, run, tools, env, rng).write()


class RequestRewrite(BaseModel):
    """The LLM's rewrite of a draft request (structured reply)."""

    model_config = ConfigDict(extra="forbid")
    request: str


def refine_request(client: Any, draft: Draft, facts: dict[str, Any], forbidden: list[str]) -> Draft:
    """Online refinement: the LLM rewrites the draft naturally; the result is checked, not trusted."""
    stated = {k: facts[k] for k in sorted(draft.stated)}
    messages = [
        {"role": "system", "content": (
            "Rewrite a customer's request to a support agent so it sounds natural and concise. Keep every "
            "stated value exactly as written. Do not add information, ids or values that are not in the draft.")},
        {"role": "user", "content": f"Draft: {draft.request}\nValues that must stay: {stated}"},
    ]
    reply: RequestRewrite = client.structured("task_request", messages, RequestRewrite)
    text = reply.request.strip()
    for k, v in stated.items():
        if str(v) not in text:
            raise PhrasingError("llm_request_invalid", f"the rewrite dropped the value of {k} ({v!r})")
    for v in forbidden:
        if v and v in text:
            raise PhrasingError("llm_request_invalid", f"the rewrite leaks {v!r}, which the agent must look up")
    return Draft(request=text, stated=draft.stated, hidden=draft.hidden)
