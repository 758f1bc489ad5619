"""The user's request: the goal and a minimal handle; every other value is a hidden user fact.

Paper (arXiv 2512.22857, Sec. 3.3, "task refinement"): the final task Q_k holds only the
minimum necessary information; the simulated user knows more and reveals it when asked.
Offline, templates with varied phrasing say *what to change* for each requirement and *how
to find* its target (the reasoning chain: "my order with the highest total"), never by an id
the agent must look up. Values are stated sparingly (:class:`StatePolicy`): the user's own
identity (email, phone, their id) never; a search or selection value (the handle: a city, a
status) sometimes; an enum value a write sets (the goal: "savings") sometimes; dates,
quantities and free text never. At most one value per requirement is stated. Every hidden
fact is still *named* in the request ("I can tell you the check in and the guests count"),
so an agent knows what to ask for; the offline user reveals a fact when asked by that name
(:mod:`autoforge.dialogue`). Online (``client`` not offline), the LLM rewrites the
draft (step ``task_request``) and the rewrite must still state every stated value and leak no
looked-up id, else it is refused.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from autoforge.dags.graph import is_key_param, key_fields, param_schemas
from autoforge.dags.reasoning import describe_op
from autoforge.envs import naming
from autoforge.errors import AutoforgeError
from autoforge.tasks.execute import DagRun
from autoforge.tasks.instantiate import PERSON
from autoforge.types import ArgSource, DagNode, EnvironmentRecord, TaskDag, ToolCode

OPENERS = ["Hi,", "Hello!", "Hey there.", "Good morning.", "Hi there,", ""]
HIDDEN = ["the {w} I'll give you", "the {w} I'll tell you", "a {w} I can tell you", "the {w} I have in mind"]
TAILS = ["I'll give you the {x} when you ask.", "I can tell you the {x}.", "Just ask me for the {x}.",
         "Ask me for the {x} when you need it."]
IDENTITY = ["You can look me up by my {x}.", "I can give you my {x} so you can find me.", "Ask me for my {x} to find my account.",
            None, None]  # None: the agent has to ask who the user is
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


@dataclass(frozen=True)
class StatePolicy:
    """Which fact values the offline request states (DEFAULT numbers; the paper gives none).

    A stated value is one the agent need not ask for; the paper's minimum necessary
    information is the goal and a handle on its target, so most values stay hidden."""

    p_lookup: float = 0.3  # a search value (a city, a product name): the handle on a search
    p_select: float = 0.5  # the value a find/filter picks by (a status, a room type): the handle on a list
    p_goal: float = 0.5  # an enum value a write sets (the goal itself: "savings", "cancelled")
    p_data: float = 0.0  # any other value a write sets (dates, quantities, free text)
    per_requirement: int = 1  # at most this many stated values per merged requirement


CREATE_VERBS = ("create", "add", "new", "register", "book", "place", "open", "submit")


def _article(text: str) -> str:
    """'a address ...' -> 'an address ...'."""
    return "an" + text[1:] if text.startswith("a ") and text[2:3].lower() in "aeiou" else text


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


class _Writer:
    def __init__(self, dag: TaskDag, run: DagRun, tools: dict[str, ToolCode], env: EnvironmentRecord, rng: random.Random,
                 policy: StatePolicy):
        self.dag, self.run, self.tools, self.env, self.rng, self.policy = dag, run, tools, env, rng, policy
        self.nodes = {n.node_id: n for n in dag.nodes}
        self.keys = key_fields(env)
        self.colls = {c.name: c for c in env.state_schema.collections}
        self.by_pk = {c.primary_key: c for c in env.state_schema.collections}
        self.stated: set[str] = set()
        self.hidden: set[str] = set()
        self.identity: set[str] = set()  # hidden facts that identify the user (email, their id)
        self.decided: dict[str, bool] = {}
        self.budget = policy.per_requirement * max(1, dag.n_requirements)

    # ------------------------------------------------------------------ values
    def say(self, src: ArgSource, role: str) -> str | None:
        """Fact ``src``'s value as the user states it, or None when it stays hidden (decided once per fact).

        ``role``: identity | key | lookup | select | goal | data (see :class:`StatePolicy`)."""
        name = src.fact or ""
        if name not in self.decided:
            p = self.policy
            prob = {"identity": 0.0, "key": 0.0, "lookup": p.p_lookup, "select": p.p_select, "goal": p.p_goal,
                    "data": p.p_data}[role]
            self.decided[name] = self.rng.random() < prob and len(self.stated) < self.budget
            if role == "identity":
                self.identity.add(name)
        if self.decided[name]:
            self.stated.add(name)
            return _fmt(self.run.facts[name])
        self.hidden.add(name)
        return None

    def unsaid(self, src: ArgSource) -> str:
        """A hidden value named by its fact: 'the room type I'll tell you'."""
        return _article(self.rng.choice(HIDDEN).format(w=_words(src.fact or "value")))

    def is_enum(self, tool: ToolCode, arg: str) -> bool:
        if (param_schemas(tool).get(arg) or {}).get("enum"):
            return True
        c = self.colls.get(tool.collection or "")
        return any(f.name == arg and f.enum for f in (c.fields if c else []))

    # ------------------------------------------------------------------ references
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

    def owner(self, node: DagNode) -> str:
        """Whose list a list-tool returned: 'my', 'of <description>' or 'with <search value>'."""
        for arg, src in node.args.items():
            if is_key_param(arg, self.keys):
                d = self.describe(src)
                return "my" if d == "me" else f"of {d}"
        for arg, src in node.args.items():
            if src.kind == "user":
                v = self.say(src, "lookup")
                return f"with {_words(arg)} {v}" if v is not None else f"with {self.unsaid(src)}"
        return ""

    def describe(self, src: ArgSource) -> str:
        """How the user refers to the thing an argument identifies (never by a looked-up id)."""
        if src.kind == "user":
            c = self.by_pk.get(src.fact or "")
            if c is not None and c.entity in PERSON:  # the user's own id: known, revealed when asked
                self.say(src, "identity")
                return "me"
            what = _words(c.entity) if c else _words(_FACT_SUFFIX.sub("", src.fact or "item"))
            v = self.say(src, "key")
            return f"{what} {v}" if v is not None else _article(f"a {what} I'll tell you about")
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
                self.say(s, "identity")
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
            parts = []
            for a, s in user_args:
                v = self.say(s, "lookup")
                parts.append(f"{_words(a)} {v}" if v is not None else self.unsaid(s))
            return f"the {self.entity(tool)} with {' and '.join(parts)}"
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
        if node.op == "compare":
            left, right = self.describe(node.args["left"]), self.describe(node.args["right"])
            f = _words(node.params.get("field", ""))
            date_like = any(w in f for w in ("date", "time", " at", "deadline", "due"))
            adj = ("later" if date_like else "higher") if node.params.get("pick", "max") == "max" else (
                "earlier" if date_like else "lower")
            return f"whichever of {left} and {right} has the {adj} {f}"
        items = node.args.get("items")
        list_node = self.nodes.get(items.node) if items and items.kind == "node" else None
        value = None
        if "value" in node.args and node.args["value"].kind == "user":
            value = self.say(node.args["value"], "select")
        among = ""
        if list_node is not None and list_node.kind == "reasoning" and list_node.op == "filter":
            fsrc = list_node.args["value"]
            fv = self.say(fsrc, "select")
            among = (f" among those whose {_words(list_node.params['field'])} is {fv}" if fv is not None
                     else f" among those with {self.unsaid(fsrc)}")
            items = list_node.args.get("items")
            list_node = self.nodes.get(items.node) if items and items.kind == "node" else None
        tool = self.tools.get(list_node.tool or "") if list_node is not None else None
        ent = self.entity(tool)
        if node.op in ("find", "filter") and value is None and "value" in node.args:
            base = f"the {ent}{'s' if node.op == 'filter' else ''} with {self.unsaid(node.args['value'])}"
        else:
            base = describe_op(node.op or "", node.params, ent, value)
        owner = self.owner(list_node) if list_node is not None and list_node.kind == "tool" else ""
        if node.op == "filter":
            base = base[4:] if base.startswith("the ") else base
            return f"my {base}" if owner == "my" else f"the {base} {owner}".strip()
        if owner == "my":
            base = base.replace("the ", "my ", 1)
        elif owner:
            base = f"{base} {owner}"
        return base + among

    def describe_list(self, src: ArgSource) -> str:
        """A list the user can name: 'my loans whose status is overdue', 'the passengers of <reservation>'."""
        node = self.nodes[src.node]
        if node.kind == "reasoning" and node.op == "filter":
            inner = self.describe_list(node.args["items"])
            fsrc = node.args["value"]
            v = self.say(fsrc, "select")
            return (f"{inner} whose {_words(node.params['field'])} is {v}" if v is not None
                    else f"{inner} with {self.unsaid(fsrc)}")
        tool = self.tools[node.tool]
        leaf = (src.path or "").rsplit(".", 1)[-1]
        c = self.colls.get(tool.collection or "")
        if c is not None and leaf in (c.name, c.entity + "s"):
            owner = self.owner(node)
            plural = _words(c.entity) + "s"
            return f"my {plural}" if owner == "my" else f"the {plural} {owner}".strip()
        record = self.describe(ArgSource(kind="node", node=node.node_id, path=self.pk_path(tool)))
        return f"the {_words(leaf)} of {'my account' if record == 'me' else record}"

    # ------------------------------------------------------------------ clauses
    def data_phrase(self, tool: ToolCode, arg: str, src: ArgSource) -> tuple[str, str | None]:
        """(parameter words, value phrase) for a write's data argument; phrase None: a hidden value."""
        if src.kind == "user":
            v = self.say(src, "goal" if self.is_enum(tool, arg) else "data")
            return _words(arg), v
        node = self.nodes[src.node]
        if node.kind == "reasoning" and node.op in ("add_days", "add"):
            return _words(arg), describe_op(node.op, node.params, "")
        if node.kind == "reasoning" and node.op == "count":
            return _words(arg), "the number of " + self.describe_list(node.args["items"])
        if node.kind == "reasoning" and node.op == "sum":
            return _words(arg), f"the total {_words(node.params['field'])} of " + self.describe_list(node.args["items"])
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
        data_args = [(a, s) for a, s in sorted(node.args.items()) if not is_key_param(a, self.keys)]
        data = [self.data_phrase(tool, a, s) for a, s in data_args]
        said = [(p, v) for p, v in data if v is not None]
        unsaid = [self.unsaid(s) for (a, s), (p, v) in zip(data_args, data) if v is None]  # named by their fact
        words = naming.words(tool.name)  # placeOrder, place-order, orders.place: words, not one token
        verb = words[0]
        if (tool.kind == "create" or verb in CREATE_VERBS) and obj is None:
            text = f"{verb if verb != 'new' else 'create'} a new {ent}"
            if refs:
                text += " for " + " and ".join(refs)
            if said or unsaid:
                text += " with " + _join([f"{p} {v}" for p, v in said] + unsaid)
            return text
        if tool.kind in ("cancel", "delete") or verb in ("cancel", "delete", "remove", "close", "archive") and not data:
            return f"{verb} {obj or 'the ' + ent}" + (f" (together with {' and '.join(refs)})" if refs else "")
        if data and (tool.kind == "update" or verb in ("update", "set", "change", "edit", "modify", "reschedule", "rename")):
            target = obj or "the " + ent
            parts = []
            for p, v in said:
                relative = v.startswith(("increased", "decreased")) or "later" in v or "earlier" in v
                parts.append(f"make the {p} of {target} {v}" if relative else f"set the {p} of {target} to {v}")
            hidden = [(p, s) for (a, s), (p, v) in zip(data_args, data) if v is None]
            if hidden:
                parts.append(f"{self.rng.choice(['change', 'update'])} the {_join([p for p, _ in hidden])} of {target} "
                             f"to {_join([self.unsaid(s) for _, s in hidden])}")
            return " and ".join(parts)
        action = " ".join(words)
        text = f"{action} for {obj or 'the ' + ent}"
        if refs:
            text += " with " + " and ".join(refs)
        if said:
            text += ", " + ", ".join(f"{p}: {v}" for p, v in said)
        if unsaid:
            text += (", " if said else " with ") + _join(unsaid)
        return text

    def write(self) -> Draft:
        from autoforge.dialogue import names_fact  # the dialogue's convention for naming a fact

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
        text = " ".join(sentences)
        # every fact is known to the user; those not stated are revealed on request, and each is
        # named (never valued) so the agent knows what to ask for
        hidden = sorted(set(self.run.facts) - self.stated)
        unnamed = [f for f in hidden if f not in self.identity and not names_fact(text, f)]
        if unnamed:
            text += " " + self.rng.choice(TAILS).format(x=_join(["the " + _words(f) for f in unnamed])[4:])
        ident = [f for f in hidden if f in self.identity]
        tmpl = self.rng.choice(IDENTITY) if ident else None
        if tmpl:
            text += " " + tmpl.format(x=_join([_words(f) for f in ident]))
        request = f"{opener} {text}".strip()
        return Draft(request=request, stated=set(self.stated), hidden=set(hidden))


def write_request(dag: TaskDag, run: DagRun, tools: dict[str, ToolCode], env: EnvironmentRecord, rng: random.Random,
                  policy: StatePolicy | None = None) -> Draft:
    """The offline request for a gold run (template phrasing chosen by ``rng``, stated values by ``policy``)."""
    return _Writer(dag, run, tools, env, rng, policy or StatePolicy()).write()


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
