"""The entities of a tool set: which role ids are another entity, and each tool's plan.

``manager_id`` and ``employee_id`` documented with one pattern are one entity; ``receiver_id``
described as "User ID of the user ..." is a user's id (:func:`id_aliases`). :func:`plan_tools`
reads every tool of a set against those entities.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace

from autoforge.domain import words as nm
from autoforge.domain.ids import ROLE_PEOPLE, id_param_entity, id_pattern, known_entities, walk_ids
from autoforge.domain.tools import ToolPlan, analyze_tool
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import ToolSpec

def id_aliases(specs: list[ToolSpec]) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    """Role entities that are another entity, read from documented id patterns.

    ``manager_id`` and ``employee_id`` both documented as ``^E\\d{4}$`` -> manager is an
    employee. Of the entities sharing a prefix, the one most tools are about keeps it.
    Returns (aliases, {entity: (prefix, width)})."""
    said = described_aliases(specs)
    if said:
        aliases, info = _pattern_aliases(specs)
        return {**said, **aliases}, {e: pat for e, pat in info.items() if e not in said}
    return _pattern_aliases(specs)


# "The ID of the sub-issue to be prioritized after" / "User ID of the user to send the message to."
_DESCRIBED_ID = [re.compile(r"^\W*(?:the |a |an )?(?:numeric |unique )?(?:id|identifier) of (?:the |a |an )?([a-z][a-z-]*)", re.I),
                 re.compile(r"^\W*(?:the |a |an )?([a-z][a-z-]*) id of (?:the|a|an) ", re.I)]


def described_aliases(specs: list[ToolSpec]) -> dict[str, str]:
    """Role ids whose description names the entity they are: ``receiver_id`` ("User ID of the user to
    send the message to") is a user's id, ``after_id`` ("The ID of the sub-issue to be prioritized
    after") a sub-issue's. Only for a role no tool name mentions, naming an entity a tool name does."""
    known = known_entities(specs)
    named_by_tools = {nm.singular(w) for spec in specs for w in nm.words(spec.name)}
    named_by_tools |= {e for e in known if all(w in named_by_tools for w in e.split("_"))}
    found: dict[str, Counter] = {}  # role -> entities its descriptions name
    for spec in specs:
        for p, ps in props(spec.parameters).items():
            e = id_param_entity(p)
            s = unwrap(ps) if isinstance(ps, dict) else {}
            desc = s.get("description") if isinstance(s.get("description"), str) else ""
            if not e or not desc or e in named_by_tools:
                continue
            for rx in _DESCRIBED_ID:
                m = rx.search(desc)
                if m:
                    named = nm.singular(nm.snake(m.group(1).replace("-", "_")))
                    if named != e and named in known and named in named_by_tools:
                        found.setdefault(e, Counter())[named] += 1
                    break
    return {e: c.most_common(1)[0][0] for e, c in found.items() if c}


def _pattern_aliases(specs: list[ToolSpec]) -> tuple[dict[str, str], dict[str, tuple[str, int]]]:
    info: dict[str, tuple[str, int]] = {}
    for examples in (False, True):  # documented patterns first, then ids shown by example ("such as 'INV-00042'")
        for k, v in walk_ids(specs):
            e = id_param_entity(k)
            pat = id_pattern(v, examples) or (id_pattern(unwrap(v).get("items"), examples) if isinstance(v, dict) else None)
            if e and pat and e not in info:
                info[e] = pat
    if not info:
        return {}, {}
    known = known_entities(specs)
    mentions: dict[str, int] = {}
    for spec in specs:
        plan = analyze_tool(spec, known)
        mentions[plan.entity] = mentions.get(plan.entity, 0) + 2
        for p in props(spec.parameters):
            e = id_param_entity(p)
            if e and nm.snake(p) == f"{e}_id":
                mentions[e] = mentions.get(e, 0) + 1
    by_prefix: dict[tuple[str, int], list[str]] = {}
    for e, pat in info.items():
        by_prefix.setdefault(pat, []).append(e)
    aliases: dict[str, str] = {}
    for pat, ents in by_prefix.items():
        if len(ents) < 2:
            continue
        canon = max(ents, key=lambda e: (mentions.get(e, 0), e not in ROLE_PEOPLE, -len(e)))
        for e in ents:
            if e != canon:
                aliases[e] = canon
    return aliases, {e: pat for e, pat in info.items() if e not in aliases}


def plan_tools(specs: list[ToolSpec]) -> dict[str, ToolPlan]:
    aliases, _ = id_aliases(specs)
    known = known_entities(specs, aliases)
    plans = {s.name: analyze_tool(s, known, aliases) for s in specs}
    by_name = {s.name: s for s in specs}
    for s in specs:
        granted = _granted(plans[s.name], s, plans, by_name, aliases)
        if granted:
            plans[s.name] = replace(plans[s.name], entity=granted, kind="create", other=plans[s.name].entity)
    return plans


GRANT_VERBS = {"give", "grant", "provide"}


def _granted(plan: ToolPlan, spec: ToolSpec, plans: dict[str, ToolPlan], specs: dict[str, ToolSpec],
             aliases: dict[str, str]) -> str | None:
    """The record a grant makes: ``giveAccess(environmentId)`` "Give an employee access to the
    environment", where ``checkEmployeeAccess(environmentId)`` lists the ``employee_access`` records of
    an environment, creates an ``employee_access`` naming the environment (it does not change the
    environment). None for any other tool."""
    if plan.kind != "generic" or plan.verb not in GRANT_VERBS or not plan.field_hint:
        return None
    hint = plan.field_hint

    def names_entity(sp: ToolSpec) -> bool:
        return any(id_param_entity(p, aliases) == plan.entity for p in props(sp.parameters))

    if not names_entity(spec):
        return None
    for name, other in plans.items():
        e = other.entity
        if other.effect == "read" and e != plan.entity and (e == hint or e.endswith(f"_{hint}")) and names_entity(specs[name]):
            return e
    return None
