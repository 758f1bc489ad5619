"""Reasoning nodes: typed, deterministic operations over earlier tool outputs.

Paper (arXiv 2512.22857, Sec. 3.2, "reasoning nodes"): an LLM inserts nodes that "perform
inference on the outputs of preceding nodes" (pick the cheapest, add two days, compare
totals) so that a task cannot be solved by copying values out of the request. Here every
reasoning node is one operation from the registry :data:`OPS`: its inputs are named
arguments (``DagNode.args``: the output of an earlier node, or a user fact), its fixed
operands are ``DagNode.params`` (which field, how many days), and its result feeds later
arguments through ``ArgSource(kind="node", node=<reasoning node>, path=...)``.

Every operation is pure and fails loudly (:class:`ReasoningError`) instead of guessing:
an empty list, a tie for the max, or a filter value matching two records all raise, so a
task whose reasoning is ambiguous is rejected instead of being kept with an arbitrary gold.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any, Callable

from autoforge.errors import AutoforgeError


class ReasoningError(AutoforgeError):
    """A reasoning operation cannot give one well-defined answer on its inputs."""


class UnknownOpError(AutoforgeError):
    """A DAG names a reasoning op that is not in the registry."""


@dataclass(frozen=True)
class OpSpec:
    """One reasoning operation: its argument names, fixed params and result type."""

    name: str
    args: tuple[str, ...]  # named inputs (DagNode.args keys)
    params: tuple[str, ...]  # fixed operands (DagNode.params keys)
    returns: str  # "object" | "list" | "integer" | "number" | "date" | "boolean"
    fn: Callable[[dict[str, Any], dict[str, Any]], Any]
    doc: str


def _items(args: dict, op: str) -> list[dict]:
    items = args.get("items")
    if not isinstance(items, list):
        raise ReasoningError(f"{op}: argument 'items' must be a list, got {type(items).__name__}")
    if not all(isinstance(x, dict) for x in items):
        raise ReasoningError(f"{op}: every item must be an object")
    return items


def _key(item: dict, field: str, op: str) -> Any:
    if field not in item or item[field] is None:
        raise ReasoningError(f"{op}: an item has no value for field {field!r}")
    return item[field]


def _extreme(args: dict, params: dict, *, largest: bool, op: str) -> dict:
    items = _items(args, op)
    field = params["field"]
    if not items:
        raise ReasoningError(f"{op}: no items to choose from")
    keys = [_key(x, field, op) for x in items]
    best = max(keys) if largest else min(keys)
    winners = [x for x, k in zip(items, keys) if k == best]
    if len(winners) != 1:
        raise ReasoningError(f"{op}: {len(winners)} items tie on {field}={best!r}; the choice would be ambiguous")
    return winners[0]


def _argmax(args: dict, params: dict) -> dict:
    return _extreme(args, params, largest=True, op="argmax")


def _argmin(args: dict, params: dict) -> dict:
    return _extreme(args, params, largest=False, op="argmin")


def _filter(args: dict, params: dict) -> list[dict]:
    items = _items(args, "filter")
    out = [x for x in items if x.get(params["field"]) == args["value"]]
    if not out:
        raise ReasoningError(f"filter: no item has {params['field']}={args['value']!r}")
    return out


def _find(args: dict, params: dict) -> dict:
    items = _items(args, "find")
    out = [x for x in items if x.get(params["field"]) == args["value"]]
    if len(out) != 1:
        raise ReasoningError(f"find: {len(out)} items have {params['field']}={args['value']!r}; need exactly one")
    return out[0]


def _count(args: dict, params: dict) -> int:
    items = _items(args, "count")
    field = params.get("field")
    if field is None:
        return len(items)
    return sum(1 for x in items if x.get(field) == params.get("equals"))


def _sum(args: dict, params: dict) -> float | int:
    items = _items(args, "sum")
    vals = [_key(x, params["field"], "sum") for x in items]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
        raise ReasoningError(f"sum: field {params['field']!r} is not numeric")
    total = sum(vals)
    return round(total, 2) if isinstance(total, float) else total


def _compare(args: dict, params: dict) -> dict:
    """Of two records, the one whose ``field`` is larger (``pick="max"``) or smaller (``"min"``)."""
    left, right = args.get("left"), args.get("right")
    if not isinstance(left, dict) or not isinstance(right, dict):
        raise ReasoningError("compare: 'left' and 'right' must be objects")
    field = params["field"]
    a, b = _key(left, field, "compare"), _key(right, field, "compare")
    if a == b:
        raise ReasoningError(f"compare: both have {field}={a!r}; the choice would be ambiguous")
    pick_max = params.get("pick", "max") == "max"
    return left if (a > b) == pick_max else right


def _parse_date(value: Any) -> tuple[date, str]:
    if not isinstance(value, str):
        raise ReasoningError(f"add_days: {value!r} is not an ISO date string")
    try:
        if len(value) > 10:
            return datetime.fromisoformat(value), value[10:]
        return date.fromisoformat(value), ""
    except ValueError as exc:
        raise ReasoningError(f"add_days: {value!r} is not an ISO date ({exc})") from exc


def _add_days(args: dict, params: dict) -> str:
    d, _ = _parse_date(args.get("date"))
    out = d + timedelta(days=int(params["days"]))
    return out.isoformat() if isinstance(out, datetime) else out.isoformat()


def _add(args: dict, params: dict) -> float | int:
    v = args.get("value")
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ReasoningError(f"add: {v!r} is not a number")
    out = v + params["delta"]
    return round(out, 2) if isinstance(out, float) else out


OPS: dict[str, OpSpec] = {
    s.name: s
    for s in [
        OpSpec("argmax", ("items",), ("field",), "object", _argmax, "the item with the largest field value (unique)"),
        OpSpec("argmin", ("items",), ("field",), "object", _argmin, "the item with the smallest field value (unique)"),
        OpSpec("filter", ("items", "value"), ("field",), "list", _filter, "the items whose field equals value (non-empty)"),
        OpSpec("find", ("items", "value"), ("field",), "object", _find, "the one item whose field equals value"),
        OpSpec("count", ("items",), ("field", "equals"), "integer", _count, "how many items (optionally with field == equals)"),
        OpSpec("sum", ("items",), ("field",), "number", _sum, "the sum of a numeric field over the items"),
        OpSpec("compare", ("left", "right"), ("field", "pick"), "object", _compare, "of two records, the one with the larger/smaller field"),
        OpSpec("add_days", ("date",), ("days",), "date", _add_days, "an ISO date shifted by a number of days"),
        OpSpec("add", ("value",), ("delta",), "number", _add, "a number plus a fixed delta"),
    ]
}


def get_op(name: str | None) -> OpSpec:
    try:
        return OPS[name]  # type: ignore[index]
    except KeyError:
        raise UnknownOpError(f"unknown reasoning op {name!r}; valid ops: {', '.join(sorted(OPS))}") from None


def apply_op(name: str, args: dict[str, Any], params: dict[str, Any]) -> Any:
    """Run reasoning op ``name`` on resolved ``args`` with fixed ``params``."""
    spec = get_op(name)
    missing = [a for a in spec.args if a not in args]
    if missing:
        raise ReasoningError(f"{name}: missing argument(s) {missing}")
    return spec.fn(args, params)


# --------------------------------------------------------------------------- phrasing


def _words(field: str) -> str:
    return field.replace("_", " ")


_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
                 "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]


def number_words(n: Any) -> str:
    """A small whole number in words ('two days later'), so an op constant never reads like a user's value."""
    if isinstance(n, int) and not isinstance(n, bool) and 0 <= n < len(_NUMBER_WORDS):
        return _NUMBER_WORDS[n]
    if isinstance(n, float) and n.is_integer() and 0 <= n < len(_NUMBER_WORDS):
        return _NUMBER_WORDS[int(n)]
    return str(n)


def describe_op(name: str, params: dict[str, Any], entity: str, value: Any = None) -> str:
    """A user-facing phrase for the op (offline request templates): 'the order with the highest total'."""
    field = _words(params.get("field", "") or "")
    date_like = any(w in field for w in ("date", "time", " at", "deadline", "due"))
    if name == "argmax":
        return f"the {entity} with the {'latest' if date_like else 'highest'} {field}"
    if name == "argmin":
        return f"the {entity} with the {'earliest' if date_like else 'lowest'} {field}"
    if name == "find":
        return f"the {entity} whose {field} is {value}"
    if name == "filter":
        return f"{entity}s whose {field} is {value}"
    if name == "compare":
        return f"whichever {entity} has the {'higher' if params.get('pick', 'max') == 'max' else 'lower'} {field}"
    if name == "add_days":
        d = int(params["days"])
        return f"{number_words(abs(d))} day{'s' if abs(d) != 1 else ''} {'later' if d >= 0 else 'earlier'} than the current {field or 'date'}"
    if name == "add":
        delta = params["delta"]
        return f"{'increased' if delta >= 0 else 'decreased'} by {number_words(abs(delta))} from the current {field or 'value'}"
    if name == "count":
        return f"the number of {entity}s"
    if name == "sum":
        return f"the total {field} of the {entity}s"
    get_op(name)
    return name
