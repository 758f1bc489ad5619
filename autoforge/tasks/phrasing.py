"""The user's request: the goal and a minimal handle; every other value is a hidden user fact.

Paper (arXiv 2512.22857, Sec. 3.3, "task refinement"): the final task Q_k holds only the
minimum necessary information; the simulated user knows more and reveals it when asked.
Offline, templates with varied phrasing say *what to change* for each requirement and *how
to find* its target (the reasoning chain: "my order with the highest total"), never by an id
the agent must look up. Values are stated sparingly (:class:`StatePolicy`): the user's own
identity (email, phone, their id) never; a search or selection value (the handle: a city, a
status) sometimes; an enum value a write sets (the goal: "savings") sometimes; dates,
quantities and free text never. At most one value per requirement is stated. Every hidden
fact is still *named* in the request, once, in one closing sentence ("I can give you the check
in and the guests count when you ask"; grouped by record when several records need facts:
"the amount and price for the order, and the threshold for the price change"), so an agent
knows what to ask for; the offline user reveals a fact when asked by that name
(:func:`autoforge.dialogue.fact_label`: ``fuelAmount`` is "fuel amount", ``order_type_2`` the
"second order type"). Clauses say what to do in words a person uses: camelCase split, no object
that repeats the tool's noun ("adjust the climate control"), a record's many fields as "the new
details" or "my new address", a whole-record argument as "update the article", a read no write
depends on as a side question ("could you also show me the car status"). Online (``client`` not offline), the LLM rewrites the
draft (step ``task_request``) and the rewrite must still state every stated value and leak no
looked-up id, else it is refused.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from autoforge.domain.entities import GRANT_VERBS
from autoforge.domain.keys import is_key_param, key_canon, key_fields, param_schemas
from autoforge.dags.reasoning import describe_op
from autoforge.dialogue import fact_label, fact_words
from autoforge.domain import words as nm
from autoforge.errors import AutoforgeError
from autoforge.tasks.execute import DagRun
from autoforge.tasks.instantiate import PERSON
from autoforge.types import ArgSource, DagNode, EnvironmentRecord, TaskDag, ToolCode

OPENERS = ["Hi,", "Hello!", "Hey there.", "Good morning.", "Hi there,", ""]
# One sentence names every hidden fact the agent will need to ask for (never one "I'll give you" per field).
TAILS = ["I can give you {x} when you ask.", "Just ask me for {x}.", "Ask me for {x} when you need {it}.",
         "I'll tell you {x} when you ask.", "I have {x} ready if you need {it}."]
IDENTITY = ["You can look me up by my {x}.", "I can give you my {x} so you can find me.", "Ask me for my {x} to find my account.",
            None, None]  # None: the agent has to ask who the user is
ASKS = ["could you {x}?", "please {x}.", "I'd like you to {x}.", "can you {x}?", "I need you to {x}."]
JOINERS = ["Also,", "After that,", "One more thing:", "And then", "Besides that,"]
SIDE_ASKS = ["Could you also {x}?", "While you're at it, please {x}.", "I'd also like you to {x}."]  # a read no write needs
SHOW = ["show me", "check", "look up"]
_NOUNISH = re.compile(r"(?:ship|tion|sion|ment|ness|ity|ance|ence|ism|hood)$")  # a noun where a tool name's verb would be
_ADVERBS = {"again", "now", "later", "back", "away", "together"}
_FACT_SUFFIX = re.compile(r"_\d+$")  # quantity_2 -> quantity
PERSONAL = ("email", "phone", "username", "password", "handle", "login", "ssn", "dob", "birth")
# Tool-name verbs written as one word: "login" -> "log in".
_VERB_WORDS = {"login": "log in", "logout": "log out", "signin": "sign in", "signup": "sign up", "signout": "sign out",
               "checkin": "check in", "checkout": "check out", "setup": "set up", "logon": "log on", "logoff": "log off"}
_PREPS = {"to", "from", "for", "into", "onto", "on", "in", "with", "by", "of", "at", "as"}
_NOT_NOUN = {"with", "by", "list", "input", "batch", "array", "bulk", "many", "multiple", "all", "from", "for"}
# Fields that together are a postal address ("address1, city, zip" -> "my new address").
_ADDRESS = {"address", "street", "city", "zip", "zipcode", "postal", "postcode", "country", "state", "province",
            "line", "region", "county", "suburb", "town"}
READ_VERBS = ("get", "list", "show", "display", "fetch", "find", "search", "lookup", "look", "view", "check", "read",
              "retrieve", "query", "describe", "browse")
UPDATE_VERBS = ("update", "set", "change", "edit", "modify", "reschedule", "rename", "patch", "replace")
DETAILS = ["update {t} with the new details", "update the details of {t}", "make the changes to {t}"]


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
    """A name as a person says it: ``fuelAmount`` -> ``fuel amount``, ``order_type`` -> ``order type``."""
    return fact_words(name) if name else name


def _singular_words(text: str) -> set[str]:
    return {nm.singular(w) for w in text.split()}


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


def _merge_refs(refs: list[str]) -> str:
    """'the pickup location of X and the vehicle of X' -> 'the pickup location and vehicle of X'."""
    groups: dict[str, list[str]] = {}
    for r in refs:
        m = re.match(r"the (.+?) of (.+)$", r)
        key, head = (m.group(2), m.group(1)) if m else (r, None)
        groups.setdefault(key, []).append(head)
    out = []
    for key, heads in groups.items():
        if None in heads or len(heads) == 1:
            out.extend(key if h is None else f"the {h} of {key}" for h in heads)
        else:
            out.append(f"the {_join(heads)} of {key}")
    return " and ".join(out)


def _leaf(path: str | None) -> str:
    return (path or "").rsplit(".", 1)[-1]


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
        # hidden facts to name in the one closing sentence, grouped by the clause that needs them
        self.groups: list[tuple[str | None, list[str]]] = []
        self.placed: set[str] = set()
        self.clauses_said: list[str] = []

    # ------------------------------------------------------------------ values
    def say(self, src: ArgSource, role: str) -> str | None:
        """Fact ``src``'s value as the user states it, or None when it stays hidden (decided once per fact).

        ``role``: identity | key | lookup | select | goal | data (see :class:`StatePolicy`). A hidden
        fact (other than the user's identity) joins the current clause's group, named at the end."""
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
        if name not in self.identity and name not in self.placed:
            self.placed.add(name)
            if not self.groups:
                self.groups.append((None, []))
            self.groups[-1][1].append(name)
        return None

    def label(self, fact: str) -> str:
        """How the request names a hidden fact: 'fuel amount', 'second order type', 'comment details'."""
        words = fact_label(fact)
        if isinstance(self.run.facts.get(fact), dict) and not words.endswith(("details", "info", "data")):
            words += " details"
        return words

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
                return f"with {_words(arg)} {v}" if v is not None else f"with a certain {_words(arg)}"
        return ""

    def of_leaf(self, text: str, src: ArgSource, own_pk: str) -> str:
        """'the flights of <text>' when ``src`` picks an id field (``flight_ids``) of the record ``text`` names."""
        leaf = _leaf(src.path)
        if not leaf or leaf == own_pk or leaf in self.by_pk or not is_key_param(leaf, self.keys) or text == "me":
            return text
        words = _words(leaf).split()
        if words[-1] == "ids" and len(words) > 1:
            stem = " ".join(words[:-2] + [nm.plural(words[-2])])
        elif words[-1] == "id" and len(words) > 1:
            stem = " ".join(words[:-1])
        else:
            return text
        return f"my {stem}" if text == "my account" else f"the {stem} of {text}"

    def describe(self, src: ArgSource) -> str:
        """How the user refers to the thing an argument identifies (never by a looked-up id)."""
        if src.kind == "user":
            c = self.by_pk.get(src.fact or "")
            if c is not None and c.entity in PERSON:  # the user's own id: known, revealed when asked
                self.say(src, "identity")
                return "me"
            what = _words(c.entity) if c else _words(_FACT_SUFFIX.sub("", src.fact or "item"))
            v = self.say(src, "key")
            if v is not None:
                return f"{what} {v}"
            words = what.split()
            if len(words) > 1 and words[-1] == "ids":  # flight ids -> some flights
                return "some " + " ".join(words[:-2] + [nm.plural(words[-2])])
            if len(words) > 1 and words[-1] == "id":
                what = " ".join(words[:-1])
            return _article(f"a {what}")
        if src.kind == "const":
            return _fmt(src.value)
        node = self.nodes[src.node]
        if node.kind == "reasoning":
            text = self.describe_reasoning(node)
            leaf_key = self.by_pk.get(_leaf(src.path))
            if leaf_key is not None and _words(leaf_key.entity) != self.reasoning_entity(node):
                if leaf_key.entity in PERSON and text.startswith("my "):
                    return "me"
                return f"the {_words(leaf_key.entity)} of {text}"
            return self.of_leaf(text, src, self.reasoning_pk(node))
        tool = self.tools[node.tool]
        if self.is_me(node):
            for s in node.args.values():
                self.say(s, "identity")
            return "me"
        leaf_key = self.by_pk.get(_leaf(src.path))
        if leaf_key is not None and _words(leaf_key.entity) != self.entity(tool, ""):
            inner = self.describe(ArgSource(kind="node", node=src.node, path=self.pk_path(tool)))
            return "me" if leaf_key.entity in PERSON and inner.startswith("my ") else (
                f"the {_words(leaf_key.entity)} of {inner if inner != 'me' else 'my account'}")
        if leaf_key is None and _leaf(src.path) != self.pk_path(tool):
            inner = self.describe(ArgSource(kind="node", node=src.node, path=self.pk_path(tool)))
            return self.of_leaf("my account" if inner == "me" else inner, src, self.pk_path(tool))
        if tool.effect == "write":
            return f"the new {self.entity(tool)}" if tool.kind == "create" else f"that same {self.entity(tool)}"
        user_args = [(a, s) for a, s in node.args.items() if s.kind == "user"]
        if user_args and len(user_args) == len(node.args):
            parts = []
            for a, s in user_args:
                v = self.say(s, "lookup")
                if v is not None:
                    parts.append(f"{_words(a)} {v}")
            ent = self.entity(tool)
            return f"the {ent} with {' and '.join(parts)}" if parts else f"a certain {ent}"
        for arg, s in node.args.items():
            if is_key_param(arg, self.keys):
                inner = self.describe(s)
                ent = self.entity(tool)
                if inner == "me":
                    owner = self.by_pk.get(arg)
                    return "me" if owner is not None and _words(owner.entity) == ent else f"my {ent}"
                return inner
        return f"the {self.entity(tool)}"

    def reasoning_base(self, node: DagNode) -> DagNode | None:
        while node is not None and node.kind == "reasoning":
            items = node.args.get("items") or node.args.get("left")
            node = self.nodes.get(items.node) if items is not None and items.kind == "node" else None
        return node

    def reasoning_entity(self, node: DagNode) -> str:
        base = self.reasoning_base(node)
        return self.entity(self.tools.get(base.tool or "")) if base is not None else "item"

    def reasoning_pk(self, node: DagNode) -> str:
        base = self.reasoning_base(node)
        tool = self.tools.get(base.tool or "") if base is not None else None
        return self.pk_path(tool) if tool is not None else ""

    def pk_path(self, tool: ToolCode) -> str:
        c = self.colls.get(tool.collection or "")
        return c.primary_key if c else ""

    def describe_reasoning(self, node: DagNode) -> str:
        params = {**node.params, "field": _words(node.params.get("field", "") or "")}
        if node.op == "compare":
            left, right = self.describe(node.args["left"]), self.describe(node.args["right"])
            f = params["field"]
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
            ff = _words(list_node.params["field"])
            among = f" among those whose {ff} is {fv}" if fv is not None else f" among those with a certain {ff}"
            items = list_node.args.get("items")
            list_node = self.nodes.get(items.node) if items and items.kind == "node" else None
        tool = self.tools.get(list_node.tool or "") if list_node is not None else None
        ent = self.entity(tool)
        if node.op in ("find", "filter") and value is None and "value" in node.args:
            base = f"the {ent}{'s' if node.op == 'filter' else ''} with a certain {params['field']}"
        else:
            base = describe_op(node.op or "", params, ent, value)
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
            ff = _words(node.params["field"])
            return f"{inner} whose {ff} is {v}" if v is not None else f"{inner} with a certain {ff}"
        tool = self.tools[node.tool]
        leaf = _leaf(src.path)
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
        if src.kind == "const":
            return _words(arg), _fmt(src.value)
        node = self.nodes[src.node]
        if node.kind == "reasoning" and node.op in ("add_days", "add"):
            return _words(arg), describe_op(node.op, {**node.params, "field": _words(node.params.get("field") or "")}, "")
        if node.kind == "reasoning" and node.op == "count":
            return _words(arg), "the number of " + self.describe_list(node.args["items"])
        if node.kind == "reasoning" and node.op == "sum":
            return _words(arg), f"the total {_words(node.params['field'])} of " + self.describe_list(node.args["items"])
        d = self.describe(src)
        leaf = _words(_leaf(src.path)) or _words(arg)
        return _words(arg), (f"my {leaf}" if d in ("me", "my account") else f"the {leaf} of {d}")

    def is_ref(self, src: ArgSource) -> bool:
        """A value copied from a record's primary key: it names that record, it is no data."""
        return src.kind == "node" and _leaf(src.path) in self.by_pk

    def target_arg(self, node: DagNode, pk: str | None) -> str | None:
        """The argument naming the record a write acts on (``pet_id``, ``petId``, or a copied primary key)."""
        if not pk:
            return None
        if pk in node.args:
            return pk
        for arg in sorted(node.args):
            if key_canon(arg) == key_canon(pk):
                return arg
        for arg, src in sorted(node.args.items()):
            if src.kind == "node" and _leaf(src.path) == pk:
                return arg
        return None

    def new_group(self, noun: str | None) -> None:
        self.groups.append((noun, []))

    def noun_of(self, words: list[str], ent: str) -> str:
        """The thing a tool name acts on, after its verb: 'place_order' -> 'order', else the entity."""
        rest = words[1:]
        if rest and rest[0] not in _PREPS and len(rest) <= 3 and not set(rest) & _NOT_NOUN:
            return " ".join(rest[:-1] + [nm.singular(rest[-1])])
        return ent

    def clause(self, node: DagNode) -> str:
        tool = self.tools[node.tool]
        ent = self.entity(tool)
        coll = self.colls.get(tool.collection or "")
        pk = coll.primary_key if coll else None
        words = nm.words(tool.name)  # placeOrder, place-order, orders.place: words, not one token
        verb = words[0] if words else "update"
        rest = words[1:]
        if rest[:1] and rest[0] in ("the", "a", "an"):  # ask-the-oracle: "ask the oracle", not "ask the the oracle"
            rest = rest[1:]
        said_verb = _VERB_WORDS.get(verb, verb)
        self.new_group(None)
        tgt = self.target_arg(node, pk)
        obj = self.describe(node.args[tgt]) if tgt else None
        obj = {"me": "my account"}.get(obj, obj) if obj else obj
        refs, ref_args = [], {}
        is_ref = {a: a != tgt and (is_key_param(a, self.keys) or self.is_ref(s)) for a, s in node.args.items()}
        for arg, src in sorted(node.args.items()):
            if is_ref[arg]:
                d = self.describe(src)
                if d != "me" and d != obj and d not in refs:
                    refs.append(d)
                    ref_args[d] = arg
        data_args = [(a, s) for a, s in sorted(node.args.items()) if a != tgt and not is_ref[a]]
        data = [self.data_phrase(tool, a, s) for a, s in data_args]
        said = [(p, v) for p, v in data if v is not None]
        hidden = [p for p, v in data if v is None]
        if (tool.kind == "create" or verb in CREATE_VERBS) and obj is None:
            if rest and rest[0] in _PREPS and len(data) == 1:  # add_to_watchlist(stock): add a stock to the watchlist
                p, v = data[0]
                thing = f"{p} {v}" if v is not None else _article(f"a {p}")
                text = f"{said_verb} {thing} {rest[0]} the {' '.join(rest[1:]) or ent}"
                noun, said = f"the {p}", []
            else:
                noun = self.noun_of(words, ent)
                if verb in CREATE_VERBS:
                    text = f"{'create' if verb == 'new' else said_verb} a new {noun}"
                    if text in self.clauses_said:
                        text = text.replace(" a new ", " another ", 1)
                else:  # a grant is asked for oneself: "give me access to a certain environment"
                    text = f"{said_verb} {'me' if verb in GRANT_VERBS else 'the'} {noun}"
                noun = f"the {noun}"
            if refs:
                text += (" to " if verb in GRANT_VERBS else " for ") + _merge_refs(refs)
            if said:
                text += " with " + _join([f"{p} {v}" for p, v in said])
        elif tool.kind in ("cancel", "delete") or verb in ("cancel", "delete", "remove", "close", "archive") and not data:
            text = f"{said_verb} {obj or 'the ' + ent}" + (f" (together with {_merge_refs(refs)})" if refs else "")
            if said:
                text += ", " + ", ".join(f"{p}: {v}" for p, v in said)
            noun = f"the {'cancellation' if verb == 'cancel' else ent}"
        elif data and (tool.kind == "update" or verb in UPDATE_VERBS):
            target = obj or "the " + ent
            parts = []
            for p, v in said:  # the target once, then "its"
                relative = v.startswith(("increased", "decreased")) or "later" in v or "earlier" in v
                field_of = f"the {p} of {target}" if not parts else f"its {p}"
                parts.append(f"make {field_of} {v}" if relative else f"set {field_of} to {v}")
            if hidden:
                parts.append(self.change_phrase(hidden, target if not parts else "it", ent, said_verb, rest))
            text = " and ".join(parts)
            noun = target if target.startswith(("the ", "my ")) else f"the {ent}"
        else:
            if obj is None and rest and rest[0] not in _PREPS:  # checkout_book(book_id): check out <that book>
                for d, arg in ref_args.items():
                    c = self.by_pk.get(arg) or next((c for k, c in self.by_pk.items() if key_canon(k) == key_canon(arg)), None)
                    if c is not None and _singular_words(_words(c.entity)) == _singular_words(" ".join(rest)):
                        obj, ent = d, _words(c.entity)
                        refs.remove(d)
                        break
            ent_in = bool(rest) and _singular_words(ent) <= _singular_words(" ".join(rest))
            if _NOUNISH.search(verb) and verb not in nm.ALL_VERBS:  # a name with no verb ("membership")
                text = f"take care of the {' '.join(words)}" + (f" for {obj}" if obj else "")
            elif not rest:
                text = said_verb + (f" for {obj}" if obj else "")
            elif rest[0] in _PREPS or set(rest) <= _ADVERBS:  # "try-again": try again
                text = f"{said_verb} {' '.join(rest)}" + (f" for {obj}" if obj else "")
            elif obj and ent_in and len(rest) == len(ent.split()):
                text = f"{said_verb} {obj}"
            else:
                text = f"{said_verb} the {' '.join(rest)}" + (f" for {obj}" if obj and not ent_in else "")
            if refs:
                text += " using " + _merge_refs(refs)
            if said:
                text += (", with " if refs else " with ") + _join([f"{p} {v}" for p, v in said])
            noun = f"the {' '.join(rest)}" if rest and not set(rest) & _PREPS and not set(rest) <= _ADVERBS else f"the {ent}"
        if text in self.clauses_said and " another " not in text:
            text += " again"
        self.groups[-1] = (noun, self.groups[-1][1])
        self.clauses_said.append(text)
        return text

    def change_phrase(self, fields: list[str], target: str, ent: str, tool_verb: str, rest: list[str]) -> str:
        """'change the mode of the headlight', 'change the address of my account', 'update the new article',
        'set the budget limit' (set_budget_limit: the tool names the record its fields belong to)."""
        whole = [p for p in fields if set(ent.split()) <= set(p.split())]  # 'article' of an article: the record
        addressy = sum(bool(set(p.split()) & _ADDRESS) for p in fields)
        verb = self.rng.choice(["change", "update"])
        if len(fields) >= 2 and addressy >= max(2, len(fields) - 1):
            if target == "my account":
                return f"{verb} the address on my account to my new address"
            if target == "it":
                return f"{verb} its address to the new address"
            return f"{verb} the address of {target} to the new address"
        if target == "it":
            return f"{verb} its {_join(fields)}" if len(fields) <= 2 and not whole else f"{verb} its details"
        if whole and target == f"the {ent}" and rest and " ".join(rest) == ent:
            return f"{tool_verb} {target}"
        if whole and len(fields) == 1:
            return f"update {target}"
        if len(fields) >= 3 or whole:
            return self.rng.choice(DETAILS).format(t=target)
        return f"{verb} the {_join(fields)} of {target}"

    def side_read(self, node: DagNode) -> str | None:
        """A read no write depends on, asked for as information ('could you also show me the car status')."""
        tool = self.tools.get(node.tool or "")
        if tool is None or not any(s.kind == "user" for s in node.args.values()):
            return None
        self.new_group(None)
        if self.is_me(node):
            for s in node.args.values():
                self.say(s, "identity")
            return "pull up my account"
        words = nm.words(tool.name)
        rest = words[1:] if words and words[0] in READ_VERBS else []  # ticket_read: no read verb, say its entity
        if "by" in rest:
            rest = rest[:rest.index("by")]
        thing = " ".join(rest) if rest and rest[0] not in _PREPS else self.entity(tool)
        said = []
        for a, s in sorted(node.args.items()):
            if s.kind == "user":
                v = self.say(s, "lookup")
                if v is not None:
                    said.append(f"{_words(a)} {v}")
            elif s.kind == "node":
                d = self.describe(s)
                if d not in ("me", "my account"):
                    said.append(d)
        self.groups[-1] = (f"the {thing}", self.groups[-1][1])
        return f"{self.rng.choice(SHOW)} the {thing}" + (f" for {_join(said)}" if said else "")

    def tail(self, facts: list[str]) -> str:
        """The one sentence that names every hidden fact: 'I can give you the fuel amount and the mode when you ask.'"""
        groups = [(n, [f for f in fs if f in facts]) for n, fs in self.groups]
        groups = [(n, fs) for n, fs in groups if fs]
        rest = [f for f in facts if not any(f in fs for _, fs in groups)]
        if rest:
            groups.append((None, rest))
        nouns = [n for n, _ in groups]
        qualify = len(groups) >= 2 and sum(len(fs) for _, fs in groups) >= 4 and None not in nouns and len(
            set(nouns)) == len(nouns)
        if qualify:
            parts = [f"the {_join([self.label(f) for f in fs])} for {n}" for n, fs in groups]
            x = ", ".join(parts[:-1]) + ", and " + parts[-1]
        else:
            x = "the " + _join([self.label(f) for _, fs in groups for f in fs])
        return self.rng.choice(TAILS).format(x=x, it="it" if len(facts) == 1 else "them")

    def write(self) -> Draft:
        reqs: dict[int, list[str]] = {}
        feeds = set()  # nodes some write depends on
        todo = [n for n in self.dag.nodes if n.kind == "tool" and self.tools[n.tool].effect == "write"]
        while todo:
            for s in todo.pop().args.values():
                if s.kind == "node" and s.node not in feeds:
                    feeds.add(s.node)
                    todo.append(self.nodes[s.node])
        side: list[str] = []
        for node in self.dag.nodes:
            if node.kind == "reasoning":  # a pick no write uses, on the user's value: asked as information
                if node.node_id not in feeds and any(s.kind == "user" for s in node.args.values()):
                    self.new_group(None)
                    thing = self.describe_reasoning(node)
                    self.groups[-1] = (thing, self.groups[-1][1])
                    ask = f"{self.rng.choice(SHOW)} {thing}"
                    if ask not in side:
                        side.append(ask)
                continue
            if self.tools[node.tool].effect == "write":
                reqs.setdefault(node.requirement, []).append(self.clause(node))
            elif node.node_id not in feeds:
                ask = self.side_read(node)
                if ask is not None and ask not in side:
                    side.append(ask)
        sentences = []
        for i, r in enumerate(sorted(reqs)):
            body = " and then ".join(reqs[r])
            if i == 0:
                sentences.append(self.rng.choice(ASKS).format(x=body))
            else:
                sentences.append(f"{self.rng.choice(JOINERS)} {self.rng.choice(ASKS).format(x=body)}")
        if side:  # "also" only beside a request (a read asked for alone is the request)
            sentences.append(self.rng.choice(SIDE_ASKS if sentences else ASKS).format(x=_join(side)))
        opener = self.rng.choice(OPENERS)
        if sentences and not opener.endswith(","):
            sentences[0] = sentences[0][0].upper() + sentences[0][1:]
        sentences[1:] = [x[0].upper() + x[1:] for x in sentences[1:]]
        text = " ".join(sentences)
        # every fact is known to the user; those not stated are revealed on request, and each is
        # named (never valued), once, in one closing sentence, so the agent knows what to ask for
        hidden = sorted(set(self.run.facts) - self.stated)
        order = {f: i for i, f in enumerate(f for _, fs in self.groups for f in fs)}
        named = sorted((f for f in hidden if f not in self.identity), key=lambda f: (order.get(f, len(order)), f))
        if named:
            text += " " + self.tail(named)
        ident = [f for f in hidden if f in self.identity]
        tmpl = self.rng.choice(IDENTITY) if ident else None
        if tmpl:
            text += " " + tmpl.format(x=_join([fact_label(f) for f in ident]))
        request = f"{opener} {text}".strip()
        return Draft(request=request, stated=set(self.stated), hidden=set(hidden))


def write_request(dag: TaskDag, run: DagRun, tools: dict[str, ToolCode], env: EnvironmentRecord, rng: random.Random,
                  policy: StatePolicy | None = None) -> Draft:
    """The offline request for a gold run (template phrasing chosen by ``rng``, stated values by ``policy``)."""
    return _Writer(dag, run, tools, env, rng, policy or StatePolicy()).write()


# A boundary task's request (autoforge/tasks/boundary.py) asks for the write like any request; some users
# add that they want to hear why when it cannot be done, most do not (the agent must say why either way).
BOUNDARY_TAILS = ["If that isn't possible, please tell me why.", "If you can't do it, let me know why.",
                  "And if there's a problem, tell me what it is.", None, None, None]


def boundary_request(dag: TaskDag, run: DagRun, tools: dict[str, ToolCode], env: EnvironmentRecord, rng: random.Random,
                     policy: StatePolicy | None = None) -> Draft:
    """The request of a boundary task: the user asks for the write a rule forbids (``dag``: the reads it
    needs and the write, last), in the words of any request, never naming what blocks it."""
    draft = _Writer(dag, run, tools, env, rng, policy or StatePolicy()).write()
    tail = rng.choice(BOUNDARY_TAILS)
    return Draft(request=f"{draft.request} {tail}" if tail else draft.request, stated=draft.stated, hidden=draft.hidden)


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
