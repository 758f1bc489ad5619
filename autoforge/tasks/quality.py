"""Quality checks of verification: what a replayable task can still get wrong.

Each returns None when the task passes, else the reason (stored as a VerificationResult by
:mod:`autoforge.tasks.verify`):

- :func:`check_writes_observable`: every gold write leaves a trace in S*: it changes something,
  and a later call does not overwrite all of it (the first ``update`` of two on one record is
  invisible in the final state, so no reward could tell whether it happened); and no gold call is
  of a kind no task calls (:func:`check_tool_kinds`: a scratchpad, a calculator, a hand-off), so
  a thought or a transfer is never a task's goal or its only change.
- :func:`check_args_in_domain`: every gold argument is in its documented domain: the enum, a
  vocabulary or domain the docs give (:mod:`autoforge.domain.values`), pattern (through
  :mod:`autoforge.patterns`; one that cannot be used is no check), date format,
  minimum / maximum, an ordered pair in order (check-in before check-out), a birth date in the
  past, an amount-like number above zero.
- :func:`check_ids_bound`: every identifier a gold call passes (an argument
  :func:`autoforge.domain.keys.is_key_param` names, in any spelling, also inside an object or a
  list argument: ``items.*.product_id``, ``item_ids``) is something the user was told (a value
  of the task's user facts, which the request phrases, or the request itself) or something an
  earlier gold call returned; an id from nowhere is one no agent could find.
- :func:`blueprint_cap` / :data:`BLUEPRINT_SHARE`: tasks of one environment with the same tool
  sequence and argument sources are one blueprint (``tasks.generate.blueprint_key``); a
  blueprint may hold at most a share of the environment's tasks, so variety comes from
  blueprints, not from re-drawn values.

Generation applies the same checks to each candidate (and retires a DAG whose blueprint is
full), so a failed candidate is re-drawn instead of lost; verification checks them again.
"""

from __future__ import annotations

import math
from datetime import date
from typing import Any, Iterable

from autoforge.domain.keys import is_key_param, param_schemas
from autoforge.domain.tool_kinds import in_tasks
from autoforge.domain import words as nm
from autoforge.domain.values import domain_for, order_pairs, pair_of
from autoforge.envs.interface import EnvLike
from autoforge.patterns import PatternError
from autoforge.tooldocs.schema import documented_pattern
from autoforge.types import ToolCall, ToolCode, canonical_json, same_json

# A blueprint may hold at most this share of an environment's tasks, and at least
# BLUEPRINT_MIN tasks (DEFAULT, ours: the paper reports no dedup rule; 4% keeps >= 25 blueprints
# per 100 tasks and cost the bundled corpus ~4% of its tasks when introduced).
BLUEPRINT_SHARE = 0.04
BLUEPRINT_MIN = 2
PATTERN_TIMEOUT_S = 0.1  # documented patterns run on RE2 (linear); this bounds the few that backtrack
AMOUNT_WORDS = {"amount", "price", "cost", "quantity", "qty", "total", "fee", "balance", "deposit", "payment"}


def blueprint_cap(n_tasks: int, share: float = BLUEPRINT_SHARE) -> int:
    return max(BLUEPRINT_MIN, math.ceil(share * n_tasks))


SEQUENCE_SHARE = 0.025  # a tool sequence holds at most this share of an environment's tasks (DEFAULT: >= 30% distinct at 110+)


def sequence_cap(n_tasks: int, share: float = SEQUENCE_SHARE) -> int:
    """Tasks one gold tool sequence may hold in one environment: blueprints that differ only in
    where an argument comes from still read as the same task to a learner."""
    return max(BLUEPRINT_MIN + 1, math.ceil(share * n_tasks))


def _cells(before: dict, after: dict) -> dict[tuple, Any]:
    """(collection, record key, field) -> new value for everything that differs; a removed record
    is (collection, key, None) -> None, an added one sets each of its fields."""
    out: dict[tuple, Any] = {}
    for coll in set(before) | set(after):
        a, b = before.get(coll), after.get(coll)
        if not isinstance(a, dict) or not isinstance(b, dict):
            if not same_json(a, b):
                out[(coll, None, None)] = b
            continue
        for k in set(a) | set(b):
            ra, rb = a.get(k), b.get(k)
            if same_json(ra, rb):
                continue
            if rb is None:
                out[(coll, k, None)] = None
            elif ra is None and isinstance(rb, dict):
                out.update({(coll, k, f): v for f, v in rb.items()} or {(coll, k, "*"): rb})
            elif not isinstance(ra, dict) or not isinstance(rb, dict):
                out[(coll, k, "*")] = rb
            else:
                for f in set(ra) | set(rb):
                    if not same_json(ra.get(f), rb.get(f)):
                        out[(coll, k, f)] = rb.get(f)
    return out


def _value_at(state: dict, cell: tuple) -> Any:
    coll, key, field = cell
    table = state.get(coll)
    if key is None:
        return table
    rec = table.get(key) if isinstance(table, dict) else None
    if field in (None, "*"):
        return rec
    return rec.get(field) if isinstance(rec, dict) else None


def check_tool_kinds(calls: list[ToolCall], tools: dict[str, ToolCode]) -> str | None:
    """The first gold call of a tool no task may call (:func:`autoforge.domain.tool_kinds.in_tasks`:
    a scratchpad, a calculator, a hand-off), as a reason (None: every call may be in a task)."""
    for i, call in enumerate(calls):
        tool = tools.get(call.name)
        if tool is not None and not in_tasks(tool.kind):
            return (f"call {i + 1} is {call.name}, a {tool.kind} tool: no task's gold run calls it "
                    "(a thought, a calculation or a hand-off is never what a user asks for)")
    return None


def check_writes_observable(env: EnvLike, initial_state: dict, calls: list[ToolCall],
                            tools: dict[str, ToolCode], *, steps: list[tuple[dict, dict]] | None = None) -> str | None:
    """Replay the gold calls one by one; each write must change the state and some cell it
    changed must still hold its value in S*. A call of a kind no task calls fails first
    (:func:`check_tool_kinds`). ``steps``: the states before and after each call where the caller
    has replayed them already (:func:`autoforge.tasks.verify.gold_steps`)."""
    why = check_tool_kinds(calls, tools)
    if why:
        return why
    if steps is None:
        env.reset(initial_state)
        steps, before = [], env.get_state()
        for call in calls:
            env.call(call.name, dict(call.arguments))
            after = env.get_state()
            steps.append((before, after))
            before = after
    changes: list[tuple[ToolCall, dict[tuple, Any]]] = []
    final = steps[-1][1] if steps else initial_state
    for call, (before, after) in zip(calls, steps):
        tool = tools.get(call.name)
        if tool is not None and tool.effect == "write":
            changes.append((call, _cells(before, after)))
    for i, (call, cells) in enumerate(changes):
        if not cells:
            return f"write {call.name} (call {i + 1}) changes nothing"
        if not any(canonical_json(_value_at(final, c)) == canonical_json(v) for c, v in cells.items()):
            return f"write {call.name} (call {i + 1}) is overwritten by later calls: S* shows none of its change"
    return None


def _is_date(v: str) -> bool:
    try:
        date.fromisoformat(v[:10])
        return True
    except ValueError:
        return False


def out_of_domain(name: str, value: Any, schema: dict, today: str) -> str | None:
    """Why ``value`` is not a valid ``name`` by its schema and the docs' value domains (None: it is)."""
    if isinstance(value, list):  # each item against the item schema (and the list's description)
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        if items and not items.get("description") and not items.get("enum") and schema.get("description"):
            items = {**items, "description": schema["description"]}
        for v in value:
            why = out_of_domain(name, v, items, today) if not isinstance(v, (dict, list)) else None
            if why:
                return f"an item {v!r} {why}"
        return None
    if value is None or isinstance(value, dict):
        return None
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return f"not one of {enum[:8]}"
    if isinstance(value, str):
        pat = schema.get("pattern")
        rx = documented_pattern(pat)
        try:
            if rx is not None and not rx.search(value, timeout_s=PATTERN_TIMEOUT_S):
                return f"does not match pattern {pat}"
        except PatternError:
            pass  # a pattern that cannot be used (syntax, size, out of time) is not a check
        if schema.get("format") in ("date", "date-time") and not _is_date(value):
            return f"not a {schema['format']}"
        dom = domain_for(name, schema)
        if dom is not None and dom.values and dom.name not in ("enum",):
            if value.strip().lower() not in {str(v).strip().lower() for v in dom.values}:
                return f"not in the {dom.name} domain ({', '.join(map(str, dom.values[:6]))} ...)"
        if dom is not None and dom.name == "birth_date" and _is_date(value) and value[:10] >= today:
            return "a birth date that is not in the past"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, (int, float)) and value < lo:
            return f"below the minimum {lo}"
        if isinstance(hi, (int, float)) and value > hi:
            return f"above the maximum {hi}"
        if set(nm.snake(name).split("_")) & AMOUNT_WORDS and value <= 0:
            return "an amount that is not positive"
    return None


def check_args_in_domain(calls: list[ToolCall], tools: dict[str, ToolCode], today: str) -> str | None:
    """The first gold argument outside its domain, as a reason (None: all are in)."""
    for call in calls:
        tool = tools.get(call.name)
        if tool is None:
            continue
        schemas = param_schemas(tool)
        for arg, value in call.arguments.items():
            why = out_of_domain(arg, value, schemas.get(arg) or {}, today)
            if why:
                return f"{call.name}.{arg}={value!r} is {why}"
        flat = {k: v for k, v in call.arguments.items() if not isinstance(v, (dict, list))}
        ordered = order_pairs(flat)
        for k, v in flat.items():
            if pair_of(k) and canonical_json(ordered.get(k)) != canonical_json(v):
                return f"{call.name}: {k}={v!r} is not after its start"
    return None


def _is_id_name(name: str, keys: set[str]) -> bool:
    """An identifier name (:func:`is_key_param`), or a list of them: ``item_ids``, ``itemIds``, ``product_IDs``."""
    if is_key_param(name, keys):
        return True
    return name.endswith(("ids", "Ids", "IDs")) and is_key_param(name[:-1], keys)


def _scalars(value: Any) -> set[str]:
    """Every scalar of a JSON value (and every key of its objects: records keyed by their id), as text."""
    out: set[str] = set()
    todo = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            out.update(str(k) for k in v)
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif v is not None and not isinstance(v, bool):
            out.add(str(v))
    return out


def _id_args(name: str, value: Any, keys: set[str], inside_id: bool = False) -> Iterable[tuple[str, Any]]:
    """(path, value) for every identifier value in an argument: the argument itself when its name
    is an identifier's, the fields of objects and the items of lists inside it likewise."""
    is_id = inside_id or _is_id_name(name, keys)
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _id_args(f"{name}.{k}", v, keys, _is_id_name(str(k), keys))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _id_args(f"{name}.{i}", v, keys, is_id)
    elif is_id and value is not None and not isinstance(value, bool) and value != "":
        yield name, value


def check_ids_bound(calls: list[ToolCall], outputs: dict[str, Any], facts: dict[str, Any], request: str,
                    tools: dict[str, ToolCode], keys: set[str]) -> str | None:
    """The first identifier a gold call passes that is bound to nothing, as a reason naming the call,
    the argument and the value (None: every id is bound).

    Bound: a value of the user facts (anywhere inside one: a list of item ids the user names), a
    token of the request (:func:`autoforge.dialogue.mentions`), or a value or record key anywhere
    in the output of an earlier call (``outputs``: node id -> output; a call's node id is its
    ``ToolCall.id``). Values compare as text, so ``42`` and ``"42"`` are one id. A tool's own
    names for its parameters count too (``ToolCode.arg_map``: ``slug`` keys the articles)."""
    from autoforge.dialogue import mentions

    told = _scalars(facts)
    returned: set[str] = set()
    for i, call in enumerate(calls):
        tool = tools.get(call.name)
        arg_map = (tool.arg_map if tool is not None else None) or {}
        for arg, value in call.arguments.items():
            named = arg_map.get(arg, arg)
            for path, v in _id_args(arg, value, keys, _is_id_name(named, keys)):
                text = str(v)
                if text in told or text in returned or mentions(request, text):
                    continue
                return (f"gold call {i + 1} ({call.name}) argument {path}={v!r} is an identifier the user was not told "
                        "and no earlier call returned")
        if call.id is not None and call.id in outputs:
            returned |= _scalars(outputs[call.id])
    return None
