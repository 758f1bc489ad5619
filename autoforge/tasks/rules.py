"""The rules of an environment as task generation, verification and the rollouts read them (issue 33).

Two kinds of rule reach a task:

- *runtime* rules: guards on the tool code (``ToolCode.guards``, :mod:`autoforge.envs.guards`); the
  sandbox refuses a call that breaks one (``Observation.rule_id``), so a gold run that breaks one
  fails with reason ``policy_rule`` (:func:`autoforge.tasks.execute.run_dag`);
- *judged* rules: conversation rules (``tool_rules`` rows with enforcement ``judged``), checked over
  a trajectory (:mod:`autoforge.rollout.rule_judge`). Their checks, as :func:`judged_checks` gives
  them: ``{"op", "rule_id", "message", "tools": [writes], "via": [lookup tools]}``.

:func:`task_rules` lists the rule ids a task exercises (``Task.rules``); :func:`gold_breaks` the
judged rules a gold call sequence breaks by its order alone (an ``identify_first`` rule whose
write comes before any of its lookups), which generation and verification reject.
"""

from __future__ import annotations

from typing import Any, Iterable

from autoforge.domain.rule_kinds import VALID_JUDGED_OPS
from autoforge.types import ToolCall, ToolCode, ToolRule



def judged_checks(rules: Iterable[ToolRule | dict] | None) -> list[dict]:
    """The judged checks of ``rules`` (``tool_rules`` rows with enforcement ``judged``, or checks already
    in this form), each with its ``rule_id``, ``message``, ``tools`` and ``via``; other rows are skipped."""
    out: list[dict] = []
    for r in rules or ():
        if isinstance(r, dict):
            check, rid, text, tools = r, r.get("rule_id"), r.get("message") or "", r.get("tools") or []
        else:
            if r.enforcement != "judged" or not isinstance(r.guard, dict):
                continue
            check, rid, text, tools = r.guard, r.rule_id, r.text, r.tools
        if check.get("op") not in VALID_JUDGED_OPS or not rid:
            continue
        out.append({**check, "rule_id": str(rid), "message": " ".join(str(text).split())[:300],
                    "tools": [str(t) for t in (check.get("tools") or tools or [])],
                    "via": [str(t) for t in (check.get("via") or [])],
                    **({"steps": [str(t) for t in check.get("steps") or []]} if check.get("op") == "sequence" else {})})
    return out


def runtime_guards(tools: Iterable[ToolCode]) -> list[dict]:
    """Every runtime guard of ``tools`` (each names its ``tool`` and ``rule_id``)."""
    return [{**g, "tool": g.get("tool") or t.name} for t in tools for g in (t.guards or ()) if g.get("rule_id")]


def task_rules(calls: Iterable[ToolCall], tools: dict[str, ToolCode], judged: list[dict] | None = None,
               first: Iterable[str] = ()) -> list[str]:
    """The rule ids a task exercises: ``first`` (a boundary task's rule), then the runtime guards of the
    tools its gold ``calls`` make and the judged rules binding those tools, each once, in that order."""
    names = [c.name for c in calls]
    ids = list(first)
    for name in names:
        tool = tools.get(name)
        ids += [str(g.get("rule_id")) for g in (tool.guards if tool is not None else ()) if g.get("rule_id")]
    called = set(names)
    ids += [c["rule_id"] for c in judged or () if called & set(c.get("tools") or ()) and (
        c.get("op") != "sequence" or set(c.get("steps") or ()) <= called)]  # a procedure: every step made
    return list(dict.fromkeys(i for i in ids if i))


def order_breaks(names: list[str], checks: Iterable[dict] | None) -> list[tuple[str, str]]:
    """``(rule_id, why)`` of each procedure rule that calls in this order (``names``: the successful calls'
    tool names, in order) break. ``call_before``: a call to one of ``tools`` with no call to one of ``via``
    before it (with ``"all"``: without a call to every one of ``via`` before it). ``sequence``: every step was called, and the steps' first calls are not in the steps' order."""
    out: dict[str, str] = {}
    for c in checks or ():
        rid = c.get("rule_id")
        if not rid:
            continue
        if c.get("op") == "call_before" and c.get("all"):  # every one of via before any call to tools
            via, tools = set(c.get("via") or ()), set(c.get("tools") or ())
            for i, name in enumerate(names):
                if name in tools and (missing := via - set(names[:i])):
                    out[rid] = f"call {i + 1} ({name}) comes before any call to {' and '.join(sorted(missing))}"
                    break
        elif c.get("op") == "call_before":
            via, tools = set(c.get("via") or ()), set(c.get("tools") or ())
            for i, name in enumerate(names):
                if name in via:
                    break
                if name in tools:
                    out[rid] = f"call {i + 1} ({name}) comes before any call to {' or '.join(sorted(via))}"
                    break
        elif c.get("op") == "sequence":
            steps = list(c.get("steps") or ())
            first = {n: names.index(n) for n in steps if n in names}
            if steps and len(first) == len(steps):
                made = sorted(steps, key=first.__getitem__)
                if made != steps:
                    out[rid] = f"the procedure's steps were called in the order {' -> '.join(made)}, not {' -> '.join(steps)}"
    return list(out.items())


def gold_breaks(calls: list[ToolCall], judged: list[dict] | None) -> list[tuple[str, str]]:
    """``(rule_id, why)`` of each judged rule the gold calls break by their order alone: an
    ``identify_first`` rule with lookups (``via``) one of whose writes comes before any of them, and the
    procedure rules (:func:`order_breaks`). (A rule without lookups, and ``confirm_first``, are kept in the
    dialogue: the oracle asks.)"""
    out = [(rid, f"gold {why}") for rid, why in order_breaks([c.name for c in calls], judged)]
    for c in judged or ():
        if c.get("op") != "identify_first" or not c.get("via"):
            continue
        via, writes = set(c["via"]), set(c.get("tools") or ())
        for i, call in enumerate(calls):
            if call.name in via:
                break
            if call.name in writes:
                out.append((c["rule_id"], f"gold call {i + 1} ({call.name}) comes before any lookup that identifies "
                                          f"the user ({', '.join(sorted(via))}): {c.get('message') or c['op']}"))
                break
    return out


def describe_break(rule_id: str, why: str) -> str:
    """The detail of a ``policy_rule`` rejection: the rule's id first, then what broke it."""
    return f"rule {rule_id}: {why}"


def rule_message(guards: Iterable[dict], rule_id: str) -> str:
    """The message of the guard ``rule_id`` among ``guards`` ('' when none has it)."""
    return next((str(g.get("message") or "") for g in guards if g.get("rule_id") == rule_id), "")


def by_tool(guards: Iterable[dict[str, Any]]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for g in guards:
        out.setdefault(str(g.get("tool")), []).append(g)
    return out
