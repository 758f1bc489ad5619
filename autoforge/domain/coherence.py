"""One coherent world: links realized in both directions, derived numbers that agree, dates in order.

The entity model (:mod:`~autoforge.domain.state`) records a link once: a child collection's
scalar reference to its parent (``orders.user_id``), with the parent's id list
(``users.order_ids``) as its inverse where the docs show one. :func:`schema_links` lists those
pairs; :func:`cohere` makes a state agree with them and with itself, and is applied to the sample
state (:func:`autoforge.envs.sample.sample_state`) and to every task's world
(:func:`autoforge.tasks.instantiate.make_world`):

* every id list that is the inverse of a scalar reference equals the set of children pointing
  at the parent, and every reference resolves (a dangling one is pointed at an existing record);
* every id inside a record's nested objects and lists (:func:`nested_refs`: an order's
  ``items[0].product_id``, a user's ``payment_methods[0].payment_method_id``) names a record of
  its collection: in a nested object (not a list's items) the record's own value of that key
  where it has one (a user's ``profile.user_id`` is the user's id), else one of the records linked to it (the user's own
  payment methods) when there are any, else any record;
* a total next to a list of priced items is the sum of price x quantity; a count of children
  (``item_count``, ``num_orders``) is the number of children; balances, stock and counts are not
  negative;
* dates are ordered: created before updated before closed, booking before departure, and birth
  dates lie before the tools' clock.
"""

from __future__ import annotations

import re
from functools import lru_cache
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from autoforge.domain import words as nm
from autoforge.types import CollectionSpec, StateSchema

CLOCK_DAY = "2025-01-15"  # the sandbox's fixed clock (autoforge.envs.sandbox.TODAY)


@dataclass(frozen=True)
class Link:
    """A parent/child link: ``child.back`` names one ``parent`` record; ``parent.listing`` (when
    the parent record lists its children) holds the ids of the children pointing at it."""

    parent: str  # collection names
    child: str
    back: str  # the child's scalar reference field
    listing: str | None  # the parent's id-list field, or None when the parent does not list them


def schema_links(schema: StateSchema) -> list[Link]:
    """Every scalar reference of a collection to another, paired with the parent's id list of
    that child collection when the parent has exactly one."""
    by_name = {c.name: c for c in schema.collections}
    out: list[Link] = []
    for c in schema.collections:
        for f in c.fields:
            if not f.ref or f.type == "array" or f.ref == c.name or f.ref not in by_name or f.name == c.primary_key:
                continue
            parent = by_name[f.ref]
            lists = [g.name for g in parent.fields if g.type == "array" and g.ref == c.name]
            backs = [g for g in c.fields if g.ref == parent.name and g.type != "array" and g.name != c.primary_key]
            # one listing, and it inverts the reference only when that reference is the child's only one to the parent
            listing = lists[0] if len(lists) == 1 and len(backs) == 1 else None
            out.append(Link(parent.name, c.name, f.name, listing))
    return out


def _id_of(coll: CollectionSpec, key: str) -> Any:
    if coll.id_type == "integer":
        try:
            return int(key)
        except (TypeError, ValueError):
            return key
    return key


def realize_links(state: dict[str, dict[str, dict]], schema: StateSchema) -> None:
    """Make ``state`` agree with :func:`schema_links`, in place: a reference that names no record
    is pointed at one that exists (round robin), and each parent's listing becomes the sorted ids
    of its children."""
    by_name = {c.name: c for c in schema.collections}
    for link in schema_links(schema):
        parents = state.get(link.parent)
        children = state.get(link.child)
        if not isinstance(parents, dict) or not isinstance(children, dict):
            continue
        pcoll, ccoll = by_name[link.parent], by_name[link.child]
        pids = [_id_of(pcoll, k) for k in sorted(parents)]
        known = {str(p) for p in pids}
        for i, (_, rec) in enumerate(sorted(children.items())):
            if not isinstance(rec, dict) or link.back not in rec:
                continue
            if rec[link.back] is not None and str(rec[link.back]) not in known and pids:
                rec[link.back] = pids[i % len(pids)]
        if link.listing is None:
            continue
        for pkey, prec in parents.items():
            if not isinstance(prec, dict):
                continue
            mine = str(_id_of(pcoll, pkey))
            kids = [_id_of(ccoll, k) for k, r in children.items() if isinstance(r, dict) and str(r.get(link.back)) == mine]
            prec[link.listing] = sorted(kids, key=lambda v: (str(type(v)), v))


# --------------------------------------------------------------------------- ids inside nested values

MAX_NESTED_DEPTH = 4  # levels of nested objects and lists walked inside one record


def nested_refs(schema: StateSchema, coll: CollectionSpec) -> dict[str, str]:
    """Key names that name a record wherever they appear inside a record of ``coll``: every
    collection's primary key, and ``coll``'s own scalar reference fields (a message's
    ``receiver_id``). A bare ``id`` is no such name: inside a nested object it is that object's
    own id (a pet's ``category.id``, its ``tags[0].id``)."""
    out = {c.primary_key: c.name for c in schema.collections if c.primary_key != "id"}
    out.update({f.name: f.ref for f in coll.fields if f.ref and f.type != "array" and f.name != "id"})
    return out


def _names_record(v: Any, table: Any) -> bool:
    """Whether ``v`` is an id the ``table`` (a collection's records) holds; what cannot be an id
    (unset, empty, a boolean, a float, a container) counts as fine, as the world check reads it."""
    if v is None or v == "" or isinstance(v, (bool, dict, list, float)):
        return True
    return not isinstance(table, dict) or str(v) in table


def _linked_keys(schema: StateSchema, owner: CollectionSpec, owner_key: str, target: str, table: dict) -> list[str]:
    """The keys of ``target`` records whose scalar reference names the ``owner`` record (a user's
    payment methods); empty when ``target`` has no such reference or none points at it."""
    tcoll = next((c for c in schema.collections if c.name == target), None)
    backs = [f.name for f in (tcoll.fields if tcoll else []) if f.ref == owner.name and f.type != "array"
             and f.name != tcoll.primary_key]
    mine = str(_id_of(owner, owner_key))
    return sorted(k for k, r in table.items() if isinstance(r, dict) and any(str(r.get(b)) == mine for b in backs))


def resolve_nested_ids(state: dict[str, dict[str, dict]], schema: StateSchema) -> None:
    """Point every id inside a record's nested objects and lists (:func:`nested_refs`) that names
    no record at one that exists, in place. In a nested object that is no list's item, a key the
    record itself holds at its top level (its own primary key, a reference field) takes the
    record's value when that resolves: the ``profile.user_id`` of user U0001 is U0001. Others
    (a list's items: the legs of an itinerary are other flights) take, in turn, the records of the target
    collection linked to the owning record (its payment methods), else all of the target's."""
    by_name = {c.name: c for c in schema.collections}
    for coll in schema.collections:
        table = state.get(coll.name)
        if not isinstance(table, dict):
            continue
        refs = nested_refs(schema, coll)
        for key, rec in sorted(table.items()):
            if not isinstance(rec, dict):
                continue
            turns: dict[str, int] = {}

            def pick(k: str, target: str, in_list: bool) -> Any:
                ttable = state[target]
                own = rec.get(k)
                if not in_list and isinstance(own, (str, int)) and not isinstance(own, bool) and str(own) in ttable:
                    return own
                pool = _linked_keys(schema, coll, key, target, ttable) or sorted(ttable)
                n = turns.get(target, 0)
                turns[target] = n + 1
                return _id_of(by_name[target], pool[n % len(pool)])

            def walk(value: Any, depth: int, in_list: bool) -> None:
                if depth > MAX_NESTED_DEPTH:
                    return
                if isinstance(value, list):
                    for item in value:
                        walk(item, depth + 1, True)
                    return
                if not isinstance(value, dict):
                    return
                for k, v in value.items():
                    target = refs.get(k)
                    if isinstance(v, (dict, list)):
                        walk(v, depth + 1, in_list)
                    elif target and isinstance(state.get(target), dict) and state[target] \
                            and not _names_record(v, state[target]):
                        value[k] = pick(k, target, in_list)

            for v in rec.values():
                if isinstance(v, (dict, list)):
                    walk(v, 0, False)


# --------------------------------------------------------------------------- derived numbers

PRICE_KEYS = ("price", "unit_price", "item_price", "price_each", "unit_cost", "cost")
QTY_KEYS = ("quantity", "qty", "count", "units", "amount_ordered")
TOTAL_KEYS = ("total", "total_price", "total_amount", "order_total", "amount_total", "grand_total", "subtotal",
              "total_cost")
NONNEGATIVE = ("balance", "stock", "quantity", "qty", "count", "inventory", "available", "remaining", "seats",
               "capacity", "credits", "credit", "points", "price", "total", "fee", "cost", "copies", "spots",
               "units", "age")


_NONNEGATIVE = frozenset(NONNEGATIVE)


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _priced(items: Any) -> float | None:
    """The sum of price x quantity over a list of item dicts that all show a price, else None."""
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        return None
    total = 0.0
    for it in items:
        price = next((it[k] for k in PRICE_KEYS if _number(it.get(k))), None)
        if price is None:
            return None
        qty = next((it[k] for k in QTY_KEYS if _number(it.get(k))), 1)
        total += price * qty
    return round(total, 2)


@lru_cache(maxsize=8192)  # asked for every field of every record of every world: the answer is the name's
def _count_target(name: str) -> str | None:
    """The listed thing a count field counts: ``item_count`` / ``num_items`` / ``number_of_items`` -> items."""
    m = re.match(r"^(?:num|n|number_of|count_of|total)_(\w+)$", name) or re.match(r"^(\w+)_count$", name)
    return nm.singular(m.group(1)) if m else None


def _settle_record(rec: dict, children_total: float | None = None, child_counts: dict[str, int] | None = None) -> None:
    for k, v in list(rec.items()):
        if isinstance(v, dict):
            _settle_record(v)
        elif isinstance(v, list):
            for item in v:
                if isinstance(item, dict):
                    _settle_record(item)
    for k, v in rec.items():  # never negative: a balance, a stock, a count
        if _number(v) and v < 0 and not _NONNEGATIVE.isdisjoint(k.split("_")):
            rec[k] = type(v)(-v)
    total_key = next((k for k in TOTAL_KEYS if k in rec and _number(rec[k])), None)
    if total_key:
        listed = next((s for s in (_priced(v) for v in rec.values()) if s is not None), None)
        derived = listed if listed is not None else children_total
        if derived is not None:
            rec[total_key] = derived if isinstance(rec[total_key], float) or derived != int(derived) else int(derived)
    for k, v in rec.items():  # a count of listed things agrees with the list
        target = _count_target(k)
        if not target or not _number(v) or isinstance(v, float):
            continue
        for lk in (nm.plural(target), f"{target}_ids", f"{nm.singular(target)}_ids"):
            if isinstance(rec.get(lk), list):
                rec[k] = len(rec[lk])
                break
        else:
            if child_counts and target in child_counts:
                rec[k] = child_counts[target]


def _child_totals(state: dict, schema: StateSchema) -> tuple[dict, dict]:
    """Per parent record: the priced children's sum (an order's line items held in their own
    collection) and the number of children by entity."""
    totals: dict[tuple[str, str], float] = {}
    counts: dict[tuple[str, str], dict[str, int]] = {}
    for link in schema_links(schema):
        children = state.get(link.child)
        if not isinstance(children, dict):
            continue
        for rec in children.values():
            if not isinstance(rec, dict) or rec.get(link.back) is None:
                continue
            key = (link.parent, str(rec[link.back]))
            ent = nm.singular(link.child)
            counts.setdefault(key, {})[ent] = counts.get(key, {}).get(ent, 0) + 1
            price = next((rec[k] for k in PRICE_KEYS if _number(rec.get(k))), None)
            if price is not None and any(k in rec for k in QTY_KEYS):
                qty = next((rec[k] for k in QTY_KEYS if _number(rec.get(k))), 1)
                totals[key] = round(totals.get(key, 0.0) + price * qty, 2)
    return totals, counts


# --------------------------------------------------------------------------- dates

# The order a record's dates are written in: created < changed < finished. Fields of one rank
# are not compared with each other (an update and a departure may come in either order).
_DATE_RANKS = [
    ("created", "registered", "joined", "opened", "placed", "booked", "booking", "ordered", "issued", "submitted",
     "requested", "signup", "enrolled", "hired", "purchased", "reserved"),
    ("updated", "modified", "changed", "paid", "confirmed", "approved", "shipped", "departure", "depart", "scheduled",
     "due", "start", "started", "pickup", "event", "travel", "flight", "appointment", "expires", "expiry", "expiration"),
    ("delivered", "completed", "closed", "resolved", "cancelled", "canceled", "returned", "finished", "ended",
     "refunded", "archived"),
]
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}")


def _rank(name: str) -> int | None:
    ws = set(nm.snake(name).split("_"))
    if not ws & {"at", "date", "on", "time", "timestamp", "day"} and not name.endswith(("_at", "_on")):
        return None
    for r, group in enumerate(_DATE_RANKS):
        if ws & set(group):
            return r
    return None


def _after(value: str, earlier: str) -> str:
    """``value`` moved to a day after ``earlier`` in ``value``'s own shape (date or date-time)."""
    try:
        day = date.fromisoformat(earlier[:10]) + timedelta(days=1 + (len(value) % 5))
    except ValueError:
        return value
    return day.isoformat() + value[10:]


def _order_dates(rec: dict) -> None:
    dated = [(k, _rank(k)) for k, v in rec.items() if isinstance(v, str) and _ISO.match(v)]
    dated = [(k, r) for k, r in dated if r is not None]
    for rank in range(1, len(_DATE_RANKS)):
        for k, r in dated:
            if r != rank:
                continue
            before = [rec[j] for j, rj in dated if rj is not None and rj < rank]
            latest = max(before, key=lambda s: s[:10], default=None)
            if latest is not None and rec[k][:10] <= latest[:10]:
                rec[k] = _after(rec[k], latest)
    for k, v in rec.items():  # a birth date lies in the past
        if isinstance(v, str) and _ISO.match(v) and ("birth" in k or k in ("dob", "birthday")) and v[:10] >= CLOCK_DAY:
            try:
                rec[k] = f"{int(v[:4]) - 35:04d}{v[4:]}"
            except ValueError:
                pass


def cohere(state: dict[str, dict[str, dict]], schema: StateSchema) -> dict[str, dict[str, dict]]:
    """``state`` made into one coherent world (in place, and returned): links both ways, nested
    ids that resolve, derived numbers, dates in order."""
    realize_links(state, schema)
    resolve_nested_ids(state, schema)
    totals, counts = _child_totals(state, schema)
    for c in schema.collections:
        table = state.get(c.name)
        if not isinstance(table, dict):
            continue
        for key, rec in table.items():
            if isinstance(rec, dict):
                own = str(_id_of(c, key))
                _settle_record(rec, totals.get((c.name, own)), counts.get((c.name, own)))
                _order_dates(rec)
    return state
