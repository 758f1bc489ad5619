"""What every template shares: the draft record, a source emitter, literal and schema helpers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from autoforge.domain.rule_kinds import ParsedRule
from autoforge.envs import pynames
from autoforge.types import CollectionSpec, FieldSpec


# Names the generated code uses itself: a parameter with one of these names (or one that is not
# a usable identifier: ``order-id``, ``from``, ``state``) gets another Python name
# (:func:`pynames.argument_names`; recorded as ToolCode.arg_map, applied by the runtime).
RESERVED = {"state", "db", "args", "table", "record", "result", "results", "key", "value", "new_id", "other",
            "target", "item", "items_list", "copy", "NOW", "TODAY", "next_id", "add_days", "error", "len", "str",
            "int", "float", "isinstance", "sorted", "list", "dict", "bool", "round", "min", "max", "sum", "any",
            "all", "found", "amount_value", "source", "dest", "text", "limit_value", "offset_value", "bound",
            "balance_value", "existing", "ref_table", "ref_record", "wanted", "kept", "changed", "rest", "stock",
            "current", "remaining"}
NULL_DEFAULTS = {"None", "none", "null", "NULL", "nil"}  # a documented string default that means no value
INCREASE_VERBS = {"deposit", "credit", "top", "topup", "refund", "fund", "reload", "award", "increment", "restock", "add"}
DECREASE_VERBS = {"withdraw", "debit", "pay", "charge", "spend", "redeem", "deduct", "decrement", "bill", "use", "consume"}
STOCK_FIELDS = ("stock", "seats_available", "available_seats", "quantity_available", "stock_quantity", "inventory",
                "capacity_remaining", "remaining", "available", "seats_left", "spots_left", "available_spots",
                "available_rooms", "rooms_available", "copies_available", "available_copies", "tickets_available")
PAID_FIELDS = ("amount_paid", "paid_amount", "paid", "total_paid")
TOTAL_FIELDS = ("total", "total_price", "total_amount", "amount", "cost", "total_cost", "price")


@dataclass
class ToolDraft:
    """Generated code plus what the synthesizer records about it (see :class:`ToolCode`)."""

    name: str
    source: str
    kind: str
    collection: str | None
    effect: str
    output_schema: dict[str, Any] | None
    function_name: str = ""  # the Python function (ToolCode.function_name)
    arg_map: dict[str, str] | None = None  # public -> Python argument names, where they differ (ToolCode.arg_map)
    rules: list[ParsedRule] = field(default_factory=list)  # rules the prose states; enforcement "code" where written


# --------------------------------------------------------------------------- small helpers


def lit(value: Any) -> str:
    """A Python literal for a JSON value (``None``/``True``, not ``null``/``true``)."""
    return repr(json.loads(json.dumps(value)))


def func_name(tool_name: str) -> str:
    """The Python function name of a tool (:func:`pynames.function_name`)."""
    return pynames.function_name(tool_name)


class Code:
    """A tiny source emitter with indentation."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0

    def __call__(self, line: str) -> "Code":
        self.lines.append("    " * self.depth + line)
        return self

    def indent(self) -> "Code":
        self.depth += 1
        return self

    def dedent(self) -> "Code":
        self.depth -= 1
        return self

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _loose(schema: Any, depth: int = 0) -> Any:
    """A nested schema without ``required`` lists: the code may not fill every documented sub-field."""
    if not isinstance(schema, dict) or depth > 8:
        return schema
    out = {k: v for k, v in schema.items() if k not in ("required", "minItems", "additionalProperties")}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _loose(v, depth + 1) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _loose(out["items"], depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [_loose(v, depth + 1) for v in out[key]]
    return out


def field_schema(f: FieldSpec) -> dict[str, Any]:
    """The JSON Schema of one record field, as tool outputs carry it (``x-ref``: the collection an id points at)."""
    s: dict[str, Any] = {"type": f.type}
    if f.enum:
        s["enum"] = list(f.enum)
    if f.format:
        s["format"] = f.format
    if f.type == "array":
        s["items"] = _loose(f.items) if f.items else ({"type": "string"} if f.ref else {})
    if f.type == "object" and f.properties:
        s["properties"] = _loose(f.properties)
    if f.ref:
        s["x-ref"] = f.ref
    return s


def record_schema(coll: CollectionSpec) -> dict[str, Any]:
    return {"type": "object", "properties": {f.name: field_schema(f) for f in coll.fields}, "required": [coll.primary_key]}
