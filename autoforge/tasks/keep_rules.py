"""Gold runs that keep the rules: where a runtime rule on a record refuses a gold call, the task's
world is made to keep it and the DAG runs again (generation and boundary tasks both use it).
"""

from __future__ import annotations

from typing import Any

from autoforge.envs import guards as G
from autoforge.tasks.execute import DagExecutionError, run_dag
from autoforge.types import EnvironmentRecord, TaskDag, ToolCode, canonical_json

ARG_OPS = ("arg_limit", "arg_in", "arg_not")  # guards on the call's own arguments


def value_enum(env: EnvironmentRecord, tool: ToolCode, g: dict) -> list | None:
    """The values a guard's subject can take: the argument's enum, else the record field's (its status)."""
    if g.get("op") in ARG_OPS:
        s = ((tool.parameters or {}).get("properties") or {}).get(g.get("arg")) or {}
        return list(s["enum"]) if isinstance(s.get("enum"), list) else None
    coll = next((c for c in env.state_schema.collections if c.name == g.get("collection")), None)
    f = next((f for f in (coll.fields if coll else []) if f.name == (g.get("field") or "status")), None)
    return list(f.enum) if f is not None and f.enum else None



MAX_RULE_REPAIRS = 3  # worlds re-shaped so a refused gold call keeps its rule, per attempt (DEFAULT)
_RECORD_ONLY = ("status", "window", "count_limit", "record_limit", "record_min")  # guards a world can be made to keep


def run_keeping_rules(runtime: Any, dag: TaskDag, world: dict, facts: dict[str, Any], chooser: Any,
                      tools: dict[str, ToolCode], env: EnvironmentRecord) -> Any:
    """:func:`run_dag` on ``world``; where a runtime rule on a record refuses a gold call (a status, a
    window, a count the record holds), the record is made to keep it (``world`` changes in place: it is
    the task's initial state; an owner the session's record must match) and the DAG runs again, with the facts chosen so far, up to
    :data:`MAX_RULE_REPAIRS` times. A refusal no world can fix (a limit on the user's own value, an
    owner) stays a ``policy_rule`` rejection."""
    for k in range(MAX_RULE_REPAIRS + 1):
        try:
            return run_dag(runtime, dag, world, facts, chooser=chooser)
        except DagExecutionError as exc:
            if exc.reason != "policy_rule" or exc.call is None or k == MAX_RULE_REPAIRS:
                raise
            tool = tools.get(exc.call[0])
            args = dict(exc.call[1])
            now = runtime.get_state()  # the state the refused call saw (a refusal changes nothing)
            g = next((x for x in (tool.guards if tool else ()) if x.get("rule_id") == exc.rule_id
                      and G.broken(x, now, args)), None)
            if g is None or not (g.get("op") in _RECORD_ONLY or g.get("op") == "owned" and g.get("owner_from")):
                raise  # (a record owned by the session's own person: the record's owner is a world's fact)
            field = g.get("counter") if g.get("op") == "count_limit" else \
                g.get("owner_field") if g.get("op") == "owned" else g.get("field") or "status"
            was, seen = G._record(g, world, args), G._record(g, now, args)
            if was is None or seen is None or canonical_json(was.get(field)) != canonical_json(seen.get(field)):
                raise  # the record is new or an earlier gold call changed what the rule reads: the DAG runs into it
            enum = value_enum(env, tool, g)
            if g.get("op") == "status" and not enum and not g.get("allowed"):
                raise  # no listed status to give the record instead
            if g.get("op") == "record_limit":
                keep_within(g, world, args)
            elif g.get("op") == "record_min" and isinstance(G._record(g, world, args).get(g.get("field")), list):
                raise  # a list too short: no made-up items
            else:
                G.shape(g, world, args, keep=True, enum=enum, force_when=False)
            if args != exc.call[1] or G.broken(g, world, args):
                raise


def keep_within(g: dict, world: dict, args: dict) -> None:
    """A ``record_limit`` kept by the record: its list cut (or its number lowered) to leave room for the call."""
    rec = G._record(g, world, args)
    extra = args.get(g["arg"]) if g.get("arg") else None
    add = G._size(extra) if extra is not None else float(g.get("add", 1))
    room = max(0, int(float(g["max"]) - (add or 0)))
    have = rec.get(g["field"])
    if isinstance(have, list):
        rec[g["field"]] = have[:room]
    elif G._size(have) is not None:
        rec[g["field"]] = room
