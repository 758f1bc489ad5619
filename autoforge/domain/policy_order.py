"""Procedure rules: the order a policy says tools must be called in (kind ``procedure``, judged).

Policies name their tools and say in which order to use them, in these shapes:

* **one statement** naming two tools with ``before`` / ``after`` / ``first ... then``: "Always check the
  latest policies with retrievePolicy() BEFORE calling checkEligibility()", "Run save_address only after
  lookup_customer", "First call get_owner, then assign_ticket". Read as a ``call_before`` check
  ``{"tools": [the later tool], "via": [the earlier]}``: a successful call to the later tool needs a
  successful call to the earlier one before it in the episode.
* **a procedure**: a list item ``<name>: tool-a, tool-b, tool-c`` whose items are all tool names (a
  table of required action sequences), a numbered list whose items start with a tool's name
  (``1. [Pull up Account] ...``, ``2. `verify_identity` ...``: a runbook), or a JSON list of steps that
  name tools (a conversation state machine: each step's first tool, in the list's order). Read as a
  ``sequence`` check ``{"steps": [...]}``: an episode that calls every step (with success) calls them
  first in this order. Whether the user's request is the one the procedure is for is not known from the
  calls, so a missing step is not judged, only the order of the steps made.
* **a write a read decides** (tried last, on a statement no other form reads): "If the employee already
  has access to the environment, the ticket can be auto-resolved" (a read named in the if-clause, a
  write after it), "the ticket should be assigned to the owner of the environment" (one write, and the
  read that gives its value, ``getEnvironmentOwner``): ``call_before``, the read first.

* **a write and its list of conditions**: "Access to the employee can be auto-assigned if all the given
  scenarios are true:" followed by numbered or bulleted conditions ("1. The environment is owned by the
  manager of the employee."). The write is named by the lead-in (by its words, or as the subject of
  "<noun> can be <verb>ed": ``giveAccess`` for "Access"), the reads by the conditions; a condition that
  compares a number ("less than 30 days") is a limit, not a read's result, and gives no read. Read as
  ``call_before`` with ``"all": true``: every read before the write (the order is judged, not what the
  reads returned; each condition is also read on its own, as its own rule).

A tool is named (:func:`autoforge.domain.policy_world.tool_mentions`) by its exact name in the text
(``retrievePolicy()``, ``pull-up-account``, ``save_or_update_address``), or by its name's words in
brackets or backticks (``[Pull up Account]``); the last shape also by every word of its name
(:func:`autoforge.domain.policy_world.tools_named`).
Two procedure rules that an episode could not both keep (the same steps in another order; a procedure
whose steps a longer one orders differently; ``a before b`` and ``b before a``) are both listed ``not
enforced`` with why. Judged by :mod:`autoforge.rollout.rule_judge`; a gold trajectory that breaks one is
rejected (:func:`autoforge.tasks.rules.gold_breaks`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autoforge.domain import words as nm
from autoforge.domain.policy_text import Statement, json_value, stem
from autoforge.domain.policy_world import PolicyTool, PolicyWorld, make_rule, name_key, tool_mentions, tools_named
from autoforge.domain.rule_kinds import ParsedRule

_BEFORE = re.compile(r"\b(before|prior to|ahead of|in advance of)\b", re.I)
_AFTER = re.compile(r"\b(only after|after|once|following)\b", re.I)
_FIRST_THEN = re.compile(r"\bfirst\b.*\bthen\b", re.I)
_LIST = re.compile(r"^\s*[\w\- ]{1,60}:\s*(.+)$")
_NUMBERED = re.compile(r"^(\s*)\d+[.)]\s+(.*)$")
_OPTION = re.compile(r"\b(option \d+|alternatively|or else|either)\b", re.I)  # a list of alternatives, not steps


def call_order(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """A statement naming two tools and their order (``X before Y``, ``Y after X``, ``first X, then Y``)."""
    seen = tool_mentions(st.text, world)
    if len({t.name for _, _, t in seen}) < 2:
        return []
    text = st.text
    first = last = None
    if (m := _BEFORE.search(text)) and any(e <= m.start() for _, e, _ in seen) and any(s >= m.end() for s, _, _ in seen):
        first = [t for _, e, t in seen if e <= m.start()][-1]
        last = next(t for s, _, t in seen if s >= m.end())
    elif (m := _AFTER.search(text)) and any(e <= m.start() for _, e, _ in seen) and any(s >= m.end() for s, _, _ in seen):
        last = [t for _, e, t in seen if e <= m.start()][-1]
        first = next(t for s, _, t in seen if s >= m.end())
    elif _FIRST_THEN.search(text):
        first, last = seen[0][2], next(t for _, _, t in seen if t.name != seen[0][2].name)
    if first is None or last is None or first.name == last.name:
        return []
    check = {"op": "call_before", "tools": [last.name], "via": [first.name]}
    return [make_rule("procedure", text, check, [last], "judged")]


_IF_CLAUSE = re.compile(r"\bif\b(?P<cond>[^,;]{3,160}?)(?:,|\bthen\b)(?P<rest>.*)$", re.I)
_DECIDES = re.compile(r"\b(should|must|only|need|needs|required|can be|may be|if)\b", re.I)


def read_decides(st: Statement, world: PolicyWorld) -> list[ParsedRule]:
    """A write that a read decides (tried last, on a statement no other form reads): "If the employee
    already has access to the environment, the ticket can be auto-resolved" (the read named in the
    if-clause, the write after it), "the ticket should be assigned to the owner of the environment" (one
    write and the read that gives its value). ``call_before``: the read comes first. Tools are named as
    :func:`autoforge.domain.policy_world.tools_named` finds them."""
    text = st.text
    if not _DECIDES.search(text):
        return []
    m = _IF_CLAUSE.search(text)
    via = [t for t in tools_named(m.group("cond"), world) if t.effect == "read"] if m else []
    if via:
        writes = [t for t in tools_named(m.group("rest"), world) if t.effect == "write"]
    else:  # no if-clause, or one that names no read ("If all the above are not true, then ..."): the rest
        named = tools_named(m.group("rest") if m else text, world)
        via = [t for t in named if t.effect == "read"]
        writes = [t for t in named if t.effect == "write"]
        # the write names the read's words too ("assigned to the owner of the environment"): the read gives its value
        writes = writes if len(writes) == 1 and len(via) <= 2 else []
    if not via or not writes:
        return []
    check = {"op": "call_before", "tools": [t.name for t in writes], "via": [t.name for t in via]}
    return [make_rule("procedure", text, check, writes, "judged")]


_LEAD_IN = re.compile(r"^(?P<head>.*?)\b(?:only\s+)?(?:if|when|provided that)\b[^:]*\b(?:all|each|every|both)\b[^:]*"
                      r"\b(?:scenarios?|conditions?|criteria|requirements?|following|below|these)\b[^:]*:\s*$", re.I)
_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022]|[ivx]+[.)]|[a-z][.)])\s+(?P<text>\S.*)$", re.I)
_SUBJECT = re.compile(r"^\s*(?:the\s+|an?\s+)?(?P<noun>[a-z]+)\b[^:]*?\b(?:can|may|should|will|must)\s+(?:only\s+)?be\s+"
                      r"[\w-]+(?:ed|en)\b", re.I)
_COMPARES = re.compile(r"\b(?:less|fewer|more|greater|lower|higher)\s+than\b|\b(?:at most|at least|up to|under|over)\s+\d",
                       re.I)


def condition_rules(text: str, world: PolicyWorld) -> dict[str, list[ParsedRule]]:
    """Each lead-in sentence with its list of conditions read as one ``call_before`` rule with ``"all"``,
    keyed by the lead-in's text (whitespace collapsed): the write it allows, after every read its
    conditions name; then the conditions a guard can check (:func:`owned_by_session`), each its own rule
    with its own text and offset."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out: dict[str, list[ParsedRule]] = {}
    for i, line in enumerate(lines):
        m = _LEAD_IN.match(line.strip())
        if not m:
            continue
        items: list[tuple[str, int]] = []
        for j in range(i + 1, len(lines)):
            nxt = lines[j]
            if not nxt.strip():
                if items:
                    break
                continue
            if not (it := _ITEM.match(nxt.rstrip("\n"))):
                break
            items.append((it.group("text").strip(), starts[j] + it.start("text")))
        if len(items) < 2:
            continue
        writes = [t for t in tools_named(m.group("head"), world) if t.effect == "write"]
        if not writes and (sub := _SUBJECT.match(m.group("head"))):
            noun = stem(nm.singular(sub.group("noun").lower()))
            writes = [t for t in world.writes if noun in {stem(nm.singular(w)) for w in nm.words(t.name)}]
        via = {t.name: t for item, _ in items if not _COMPARES.search(item)
               for t in tools_named(item, world) if t.effect == "read"}
        if len(writes) != 1 or not via:
            continue
        lead = " ".join(line.split())
        check = {"op": "call_before", "tools": [writes[0].name], "via": list(via), "all": True}
        out[lead] = [make_rule("procedure", lead, check, writes, "judged")]
        for item, at in items:
            if (r := owned_by_session(item, writes[0], world)) is not None:
                r.offset = at
                out[lead].append(r)
    return out


_OWNED_BY = re.compile(r"^\s*(?:the\s+)?(?P<thing>[a-z]+)\s+(?:is|are|must\s+be|should\s+be)\s+(?P<verb>owned|managed)\s+"
                       r"by\s+(?:the|their|his|her)\s+(?P<x>[a-z]+)\s+of\s+(?:the|an?)\s+(?P<y>[a-z]+)\b", re.I)
_AGENT = {"owned": "owner", "managed": "manager"}


def owned_by_session(item: str, write: PolicyTool, world: PolicyWorld) -> ParsedRule | None:
    """A condition on a write, "The environment is owned by the manager of the employee.": the record
    the write names (``environment_id``) holds an ``owner`` that must equal ``manager`` of the caller's
    own record (a session collection, :class:`~autoforge.types.CollectionSpec`), an ``owned`` guard
    with ``owner_from``. None when the tool set holds no such record or field."""
    m = _OWNED_BY.match(item)
    if not m:
        return None
    thing = world.coll(m.group("thing"))
    x, y = m.group("x").lower(), stem(nm.singular(m.group("y").lower()))
    owner_field = _AGENT[m.group("verb").lower()]
    if thing is None or thing.primary_key not in write.params or owner_field not in {f.name for f in thing.fields}:
        return None
    sess = next((c for c in world.schema.collections if c.session and any(f.name == x for f in c.fields)
                 and y in {stem(w) for w in nm.words(c.entity)}), None)
    if sess is None:
        return None
    check = {"op": "owned", "collection": thing.name, "id_arg": thing.primary_key, "owner_field": owner_field,
             "owner_from": {"collection": sess.name, "field": x}}
    return make_rule("cross_record", item, check, [write])


@dataclass
class Procedure:
    text: str  # the list item, or the numbered list's heading and items
    offset: int
    steps: list[PolicyTool]


def procedures(text: str, world: PolicyWorld) -> list[Procedure]:
    """The procedures of a document: ``name: tool, tool, ...`` items, numbered lists whose items start
    with a tool's name, and JSON lists of steps that name tools (two steps or more), in document order."""
    out: list[Procedure] = []
    heading, run, pos, in_code = "", [], 0, False
    by_key = {name_key(t.name): t for t in world.tools}

    def close() -> None:
        steps = [t for _, _, t in run if t is not None]
        options = sum(bool(_OPTION.search(line)) for _, line, _ in run)
        if len(steps) >= 2 and 2 * len(steps) >= len(run) and options < 2:
            body = " / ".join(line for _, line, _ in run)
            out.append(Procedure(f"{heading}: {body}" if heading else body, run[0][0], steps))
        run.clear()

    for line in text.splitlines(keepends=True):
        start, s = pos, line.strip()
        pos += len(line)
        if s.startswith(("```", "~~~")):
            in_code = not in_code
            continue
        if in_code or not s:
            continue
        if s.startswith("#"):
            close()
            heading = s.lstrip("#").strip()
            continue
        if (m := _NUMBERED.match(line.rstrip("\n"))) and not m.group(1):
            body = m.group(2).strip()
            seen = tool_mentions(body, world)
            lead = seen[0][2] if seen and seen[0][0] <= 2 else None
            run.append((start + m.start(2), body, lead))
            continue
        if line[:1].isspace() and run:
            continue  # a sub-item of the current step
        close()
        if s[:1] in "-*+" and (m := _LIST.match(s[1:])):
            items = [i.strip(" .`()[]") for i in m.group(1).split(",")]
            named = [by_key.get(name_key(i)) for i in items]  # every item is a tool's name, one word or more
            if len(items) >= 2 and all(named):
                out.append(Procedure(s[1:].strip(), start + line.find(s[1:].strip()), named))
    close()
    return sorted(out + _json_steps(text, world), key=lambda p: p.offset)


def _json_steps(text: str, world: PolicyWorld) -> list[Procedure]:
    """A JSON list of steps (a conversation state machine: ``[{"id": ..., "instructions": [...]}, ...]``)
    whose steps name tools: the first tool each step names, in the list's order (two or more)."""
    out = []
    for m in re.finditer(r"^\s*\[\s*$|^\s*\[\s*\{", text, re.M):
        at = text.index("[", m.start())
        got = json_value(text, at)
        value = got[0] if got else None
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            continue
        steps, names = [], []
        for v in value:
            prose = " ".join(str(x) for k, x in v.items() if k not in ("examples", "transitions", "id"))
            seen = tool_mentions(prose, world)
            if seen:
                steps.append(seen[0][2])
                names.append(str(v.get("id") or v.get("name") or seen[0][2].name))
        if len(steps) >= 2:
            out.append(Procedure("steps: " + ", ".join(names), at, steps))
    return out


def procedure_rules(text: str, world: PolicyWorld) -> list[tuple[int, ParsedRule]]:
    """Each procedure of ``text`` as a judged ``sequence`` rule, with its offset."""
    out = []
    for p in procedures(text, world):
        steps = list(dict.fromkeys(t.name for t in p.steps))
        check = {"op": "sequence", "steps": steps, "tools": steps}
        tools = list({t.name: t for t in p.steps}.values())
        out.append((p.offset, make_rule("procedure", " ".join(p.text.split())[:2000], check, tools, "judged")))
    return out


def _order(check: dict) -> list[str]:
    if check.get("op") == "sequence":
        return list(check.get("steps") or [])
    return list(check.get("via") or [])[:1] + list(check.get("tools") or [])[:1]


def drop_conflicts(rules: list[ParsedRule]) -> None:
    """Mark ``not enforced`` every procedure rule an episode could not keep beside another: a rule whose
    steps all occur in another rule that orders them differently (that rule's episodes would break it).
    An ``identify_first`` rule with lookups no longer binds a write that one of the policy's procedures
    makes with no lookup before it (the policy's own steps show that write goes without it)."""
    orders = [(r, _order(r.check)) for r in rules if r.kind == "procedure" and r.check]
    for r in rules:
        if not r.check or r.check.get("op") != "identify_first" or not r.check.get("via"):
            continue
        via, free = set(r.check["via"]), set()
        for _, steps in orders:
            for k, step in enumerate(steps):
                if step in r.check["tools"] and not via & set(steps[:k]):
                    free.add(step)
        if free:
            keep = [t for t in r.check["tools"] if t not in free]
            r.check = {**r.check, "tools": keep}
            r.tools = [t for t in r.tools if t not in free]
            if not keep:
                r.enforcement, r.check = "not enforced", None
                r.why = "the policy's own procedures make every write it binds without " + " or ".join(sorted(via))
    for r, mine in orders:
        for other, theirs in orders:
            if other is r or not set(mine) <= set(theirs):
                continue
            if [s for s in theirs if s in mine] != mine:
                r.enforcement, r.check = "not enforced", None
                r.why = (f"another procedure orders these tools differently ({' -> '.join(theirs)}), so an episode "
                         "following it would break this one")
                break
