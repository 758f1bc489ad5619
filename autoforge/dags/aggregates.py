"""Where ``count`` and ``sum`` reasoning nodes make sense: lists of records an earlier call
returned, aggregated into a numeric argument of a later write.

Paper (arXiv 2512.22857, Sec. 3.2) lists "counting" and "summing" among the inferences a
reasoning node performs over earlier outputs; it gives no placement rule. Ours (offline,
DEFAULT) is name affinity, so the result reads as a sensible request:

- ``sum``: a write's money/points parameter (``amount``, ``points``, ``total_baggages``) from
  a numeric field of a list whose name shares a word with it (``amount`` <- ``bills.*.amount``,
  ``points`` <- ``bookings.*.points_earned``), or any money field when the parameter is a bare
  ``amount`` (``amount`` <- ``loans.*.fine``): "pay the total fine of my overdue loans";
- ``count``: a write's integer parameter that counts things (``guests_count``, ``total_baggages``,
  ``quantity``, ``rating``) from the number of items of a list: "set the bags to the number of
  passengers on that reservation".

Only lists the task owns are aggregated (a list from a read that takes an identifier, not from
a search by name or city), so the count means something to the user.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MONEY = {"amount", "total", "price", "cost", "fee", "fine", "fines", "balance", "salary", "budget", "deposit", "payment",
         "refund", "credit", "fare", "due", "subtotal", "tip", "points", "charge", "charged"}
COUNTABLE = {"quantity", "qty", "count", "number", "guests", "seats", "nights", "baggages", "bags", "passengers", "tickets",
             "copies", "items", "gb", "days", "rating", "pieces", "units"}


def _words(name: str) -> set[str]:
    return {w for w in name.lower().replace("-", "_").split("_") if w}


@dataclass
class ListSource:
    """A list of records at ``path`` in the output of node ``node_id`` (e.g. ``n1`` / ``orders``)."""

    node_id: str
    path: str
    fields: dict[str, set[str]] = field(default_factory=dict)  # item field -> JSON types (one level)
    collection: str | None = None  # the collection its items belong to, when known


def list_sources(node_id: str, paths: dict[str, set[str]], collection_of: dict[str, str]) -> list[ListSource]:
    """Lists of objects in one node's output paths (``orders``, ``items``; not lists inside list items).

    ``collection_of`` maps a list name or its singular (``orders``/``order``) to a collection."""
    out = []
    for p in sorted(paths):
        if "*" in p:
            continue
        prefix = p + ".*."
        fields = {q[len(prefix):]: t for q, t in paths.items() if q.startswith(prefix) and "." not in q[len(prefix):]}
        if not fields:
            continue
        leaf = p.rsplit(".", 1)[-1]
        coll = collection_of.get(leaf) or collection_of.get(leaf.rstrip("s"))
        out.append(ListSource(node_id, p, fields, coll))
    return out


def sum_fields(param: str, param_types: set[str], src: ListSource, keys: set[str]) -> list[str]:
    """Item fields of ``src`` whose sum can stand for ``param`` (type-compatible, name affinity)."""
    pw = _words(param)
    out = []
    for f, t in sorted(src.fields.items()):
        if f in keys or f.endswith("_id") or not t & {"integer", "number"} or "boolean" in t:
            continue
        if "integer" in param_types and "number" not in param_types and "integer" not in t:
            continue  # an integer parameter cannot take a sum of decimals
        fw = _words(f)
        shared = pw & fw & (MONEY | COUNTABLE)
        if f == param or shared or ("amount" in pw and fw & MONEY):
            out.append(f)
    return out


def countable(param: str, param_types: set[str]) -> bool:
    """Can the number of items of a list stand for ``param``?"""
    return "integer" in param_types and "boolean" not in param_types and bool(_words(param) & COUNTABLE) \
        and not _words(param) & (MONEY - {"points", "total"})
