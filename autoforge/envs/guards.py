"""The rule engine: runtime rules as data (guards), checked in the sandbox before a tool's code runs.

A rule read from a tool's prose or a policy document (:mod:`autoforge.domain.rules`,
:mod:`autoforge.domain.policy`) that a tool call can break becomes a *guard*: a JSON object
stored with the tool's code (``tool_code.guards``), so every environment built from the
warehouse enforces it. The sandbox worker calls :func:`refusal` before the tool's code runs: a
broken guard refuses the call with an error observation that names the rule
(``policy rule <rule_id>: <message>``) and changes nothing; after a successful call
:func:`after_call` adds 1 to the counters of ``count_limit`` guards. The same guards are probed at
synthesis (:func:`probe_cases`: a call that breaks the rule, and the nearest one that keeps it).

Every guard: ``{"op", "rule_id", "tool", "message"}`` plus its op's keys, and an optional ``when``
(:func:`applies`: the guard holds only for records whose field has one of its values, a tier's row). ``collection`` is a state
collection, ``id_arg`` the argument holding its record's id; a missing record or argument passes
(the tool's own code reports not-found). Values compare case-insensitively as strings.

============  =============================================  ===========================================
op            keys                                           the call is refused when
============  =============================================  ===========================================
status        collection id_arg field allowed|forbidden      the record's field is not allowed / forbidden
arg_limit     arg max? min?                                  the argument (a list: its length) is outside
arg_not       arg values                                     the argument is one of values
arg_in        arg values                                     the argument is none of values
record_limit  collection id_arg field max arg? add?          record[field] (number / length) + the argument
                                                             (or ``add``, default 1) exceeds max
count_limit   collection id_arg counter max                  record[counter] (0 when missing) >= max
record_min    collection id_arg field min                    record[field] (number / length) < min
window        collection id_arg field days? hours?           since: NOW - record[field] > window;
              direction since|until|after                    until: record[field] - NOW < window;
                                                             after: NOW - record[field] < window
arg_filled    args                                           an argument of ``args`` is blank or a placeholder
                                                             (``<name>``, ``[info]``, ``null``, ``N/A``, ``TBD`` ...)
arg_count     args min                                       fewer than ``min`` of ``args`` are given (and
                                                             not blank or a placeholder)
owned         collection id_arg owner_field owner_arg        record[owner_field] != args[owner_arg]
              or owner_from {collection, field}              or != that field of the session collection's
                                                             one record (the caller's own)
member        collection id_arg list_field item_arg          args[item_arg] is not in the record's list
unchanged     collection id_arg field arg                    the argument differs from record[field]
covers        collection id_arg field arg side max|min       max: args[arg] > record[field]; min: <
============  =============================================  ===========================================

Guards run on the worker's hot path: each reads at most one record, by key. Any value a guard
cannot read (a date that is no date, a number that is text) passes: the guard refuses only what
it can show breaks the rule.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime, timedelta
from typing import Any
from autoforge.envs.sandbox import NOW  # the clock every environment sees

_NOW = datetime.fromisoformat(NOW)  # parsed once: guards run on every call
OPS = ("status", "arg_limit", "arg_not", "arg_in", "arg_filled", "arg_count", "record_limit", "record_min", "count_limit", "window", "owned", "member",
       "unchanged", "covers")
RECORD_OPS = frozenset(OPS) - {"arg_limit", "arg_not", "arg_in", "arg_filled", "arg_count"}
_MISSING = object()
# a value a caller types when it has none: "", "<phone number>", "[required info]", "{id}", "null", "N/A", "TBD" ...
_PLACEHOLDER = re.compile(r"\s*(?:<[^<>]*>|\[[^\[\]]*\]|\{[^{}]*\}|null|undefined|n/?a|unknown|tbd|todo|placeholder"
                          r"|x{3,}|\?+|\.{3}|string|your[ _-]\w+(?:[ _-]\w+)?|example(?:[ _-]\w+)?)?\s*", re.I)


def _given(g: dict, args: dict) -> list[str]:
    """The arguments of ``g["args"]`` the call gives a value (not None, empty or a placeholder)."""
    return [a for a in g.get("args") or () if args.get(a) not in (None, "", [], {}) and not placeholder(args.get(a))]


def placeholder(v: Any) -> bool:
    """Whether ``v`` is a blank string or one that stands in for a value (:data:`_PLACEHOLDER`)."""
    return isinstance(v, str) and bool(_PLACEHOLDER.fullmatch(v))


# --------------------------------------------------------------------------- reading values


def _record(g: dict, state: Any, args: dict) -> Any:
    """The record a guard reads, or None (no such collection, argument or record)."""
    key = args.get(g.get("id_arg")) if g.get("id_arg") else None
    if key is None or isinstance(key, (dict, list)):
        return None
    coll = state.get(g.get("collection")) if hasattr(state, "get") else None
    if coll is None or not hasattr(coll, "get"):
        return None
    rec = coll.get(str(key))
    return rec if hasattr(rec, "get") else None


def _size(v: Any) -> float | None:
    """A number, or a list's / mapping's length; None for anything else."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, (list, dict)) or (hasattr(v, "keys") and hasattr(v, "get")):
        return float(len(v))
    if isinstance(v, str):
        try:
            return float(v.strip().replace(",", "").lstrip("$"))
        except ValueError:
            return None
    return None


def _norm(v: Any) -> str:
    return str(v).strip().lower().replace("-", "_").replace(" ", "_")


def _when(v: Any) -> datetime | None:
    if not isinstance(v, str) or len(v) < 10:
        return None
    try:
        return datetime.fromisoformat(v[:19].replace("Z", ""))
    except ValueError:
        return None


def _span(g: dict) -> timedelta:
    return timedelta(days=float(g.get("days") or 0), hours=float(g.get("hours") or 0))


def _ids(v: Any) -> list[str]:
    """The ids a record's list field holds: plain ids, or objects' ``*_id`` / ``id`` values."""
    out: list[str] = []
    for x in (v if isinstance(v, list) else list(v.values()) if isinstance(v, dict) else []):
        if isinstance(x, dict):
            out += [str(val) for k, val in x.items() if (k == "id" or k.endswith("_id")) and not isinstance(val, (dict, list))]
        elif x is not None:
            out.append(str(x))
    return out


# --------------------------------------------------------------------------- one guard


def applies(g: dict, state: Any, args: dict) -> bool:
    """Whether a guard's ``when`` holds: ``{"collection", "id_arg", "field", "values"}``, a record the
    call names has one of ``values`` in ``field`` (a tier's limit: "day_pass members: at most 8 hours").
    A guard without ``when`` always applies; one whose record cannot be read does not."""
    w = g.get("when")
    if not w:
        return True
    rec = _record(w, state, args)
    return rec is not None and _norm(rec.get(w.get("field"))) in {_norm(v) for v in w.get("values") or []}


def broken(g: dict, state: Any, args: dict) -> bool:
    """Whether the call (``args``, on ``state``) breaks guard ``g``."""
    if not applies(g, state, args):
        return False
    op = g.get("op")
    if op == "arg_filled":
        return any(placeholder(args.get(a)) for a in g.get("args") or ())
    if op == "arg_count":
        return len(_given(g, args)) < float(g.get("min") or 0)
    if op in ("arg_limit", "arg_not", "arg_in"):
        v = args.get(g.get("arg"), _MISSING)
        if v is _MISSING or v is None:
            return False
        if op == "arg_limit":
            n = _size(v)
            return n is not None and ((g.get("max") is not None and n > float(g["max"]))
                                      or (g.get("min") is not None and n < float(g["min"])))
        vals = {_norm(x) for x in g.get("values") or []}
        got = {_norm(x) for x in v} if isinstance(v, list) else {_norm(v)}
        return bool(got & vals) if op == "arg_not" else not got <= vals
    rec = _record(g, state, args)
    if rec is None:
        return False
    if op == "status":
        v = rec.get(g.get("field") or "status")
        if v is None:
            return False
        if g.get("allowed"):
            return _norm(v) not in {_norm(x) for x in g["allowed"]}
        return _norm(v) in {_norm(x) for x in g.get("forbidden") or []}
    if op == "record_limit":
        have = _size(rec.get(g.get("field"))) or 0.0
        extra = args.get(g["arg"]) if g.get("arg") else None
        add = _size(extra) if extra is not None else float(g.get("add", 1))
        return have + (add or 0.0) > float(g["max"])
    if op == "count_limit":
        return (_size(rec.get(g.get("counter"))) or 0.0) >= float(g["max"])
    if op == "record_min":  # "a prescription with no refills remaining cannot be refilled"
        have = _size(rec.get(g.get("field")))
        return have is not None and have < float(g["min"])
    if op == "window":
        t = _when(rec.get(g.get("field")))
        if t is None:
            return False
        now = _NOW
        direction = g.get("direction", "since")
        if direction == "after":  # "no sooner than 21 days after the last fill"
            return now - t < _span(g)
        return (now - t > _span(g)) if direction == "since" else (t - now < _span(g))
    if op == "owned":
        want = session_value(g, state) if g.get("owner_from") else args.get(g.get("owner_arg"))
        have = rec.get(g.get("owner_field"))
        return want is not None and have is not None and str(want) != str(have)
    if op == "member":
        want = args.get(g.get("item_arg"))
        if want is None:
            return False
        held = set(_ids(rec.get(g.get("list_field"))))
        return any(str(x) not in held for x in (want if isinstance(want, list) else [want]))
    if op == "unchanged":
        v = args.get(g.get("arg"), _MISSING)
        if v is _MISSING or v is None:
            return False
        have = rec.get(g.get("field"))
        if isinstance(v, list) or isinstance(have, list):
            return _size(v) != _size(have)
        return _norm(v) != _norm(have) if have is not None else False
    if op == "covers":
        want, have = _size(args.get(g.get("arg"))), _size(rec.get(g.get("field")))
        if want is None or have is None:
            return False
        return want > have if g.get("side", "max") == "max" else want < have
    return False


def refusal(guards: list[dict] | None, state: Any, args: dict) -> tuple[str, str] | None:
    """(rule_id, error text) of the first guard the call breaks; None when it keeps them all."""
    for g in guards or ():
        try:
            bad = broken(g, state, args)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError):
            bad = False  # a value the guard cannot read: it refuses only what it can show breaks the rule
        if bad:
            rid = str(g.get("rule_id") or "")
            return rid, f"policy rule {rid}: {g.get('message') or g.get('op')}"
    return None


def after_call(guards: list[dict] | None, state: Any, args: dict) -> None:
    """After a successful call: each ``count_limit`` guard's counter on its record goes up by one."""
    for g in guards or ():
        if g.get("op") != "count_limit":
            continue
        rec = _record(g, state, args)
        if rec is not None and hasattr(rec, "__setitem__"):
            n = _size(rec.get(g["counter"])) or 0.0
            rec[g["counter"]] = int(n) + 1


# --------------------------------------------------------------------------- probes


def _other(values: list, enum: list | None) -> Any:
    """A value that is none of ``values`` (from the enum where there is one)."""
    taken = {_norm(v) for v in values}
    for e in enum or ():
        if _norm(e) not in taken:
            return e
    return "not_" + str(values[0] if values else "allowed")


def _fill(have: Any, n: int) -> Any:
    """A list of ``n`` elements shaped like ``have``'s (a number when ``have`` is one)."""
    if isinstance(have, list):
        proto = have[0] if have else "X0001"
        return [copy.deepcopy(proto) if isinstance(proto, dict) else f"{proto}-{k}" if k else proto for k in range(n)]
    if isinstance(have, dict):
        return {f"k{k}": copy.deepcopy(next(iter(have.values()), {})) for k in range(n)}
    return n


def _stamp(dt: datetime, like: Any) -> str:
    return dt.strftime("%Y-%m-%d") if isinstance(like, str) and len(like) <= 10 else dt.strftime("%Y-%m-%dT%H:%M:%S")


def shape(g: dict, state: dict, args: dict, *, keep: bool, enum: list | None = None, force_when: bool = True) -> None:
    """Change ``state`` / ``args`` in place so that the call keeps (``keep``) or breaks guard ``g``
    (its ``when`` made to hold either way; without ``force_when``, a guard whose ``when`` does not hold
    is left alone: it cannot be broken)."""
    w = g.get("when")
    if w and not force_when:
        if not applies(g, state, args):
            return
    elif w:
        wrec = _record(w, state, args)
        if wrec is None:
            recs = state.get(w.get("collection")) or {}
            if recs and w.get("id_arg"):
                args[w["id_arg"]] = next(iter(recs))
                wrec = _record(w, state, args)
        if wrec is not None and w.get("values"):
            wrec[w["field"]] = w["values"][0]
    op = g.get("op")
    if op == "arg_limit":
        v = args.get(g["arg"])
        lo, hi = g.get("min"), g.get("max")
        if keep and v is not None and not broken(g, state, args):
            return  # the call's own value keeps the limit (the nearest call that keeps it)
        if keep and hi is not None and float(hi) <= 0:
            args.pop(g["arg"], None)  # "no guests": the call without the argument
            return
        n = (hi if hi is not None else lo) if keep else (float(hi) + 1 if hi is not None else float(lo) - 1)
        n = int(n) if float(n).is_integer() else n
        args[g["arg"]] = _fill(v, int(n)) if isinstance(v, list) else n
        return
    if op == "arg_count":
        if not keep:  # the call with one argument too few: the last ones given left out
            for a in reversed(_given(g, args)[int(g.get("min") or 0) - 1:]):
                args.pop(a, None)
        return
    if op == "arg_filled":
        first = next(iter(g.get("args") or ()), None)
        if first is not None and not keep:
            args[first] = ""
        elif keep:
            for a in g.get("args") or ():
                if placeholder(args.get(a)):
                    args[a] = f"{a.replace('_', ' ')} 1"
        return
    if op in ("arg_not", "arg_in"):
        vals = list(g.get("values") or [])
        bad = (op == "arg_not") != keep
        args[g["arg"]] = vals[0] if bad else _other(vals, enum)
        return
    rec = _record(g, state, args)
    if rec is None:
        return
    if op == "status":
        f = g.get("field") or "status"
        allowed, forbidden = list(g.get("allowed") or []), list(g.get("forbidden") or [])
        if keep:
            rec[f] = allowed[0] if allowed else _other(forbidden, enum)
        else:
            rec[f] = forbidden[0] if forbidden else _other(allowed, enum)
    elif op == "record_limit":
        extra = args.get(g["arg"]) if g.get("arg") else None
        add = int(_size(extra) or 0) if extra is not None else int(g.get("add", 1))
        room = int(float(g["max"])) - add
        rec[g["field"]] = _fill(rec.get(g["field"]), max(0, room if keep else room + 1))
    elif op == "count_limit":
        rec[g["counter"]] = 0 if keep else int(float(g["max"]))
    elif op == "record_min":
        have, lo = rec.get(g["field"]), float(g["min"])
        if isinstance(have, list):
            rec[g["field"]] = _fill(have, max(0, int(lo) if keep else int(lo) - 1))
        else:
            n = max(_size(have) or 0.0, lo) if keep else lo - 1
            rec[g["field"]] = int(n) if float(n).is_integer() else n
    elif op == "window":
        now, span = datetime.fromisoformat(NOW), _span(g)
        since = g.get("direction", "since") == "since"
        if g.get("direction") == "after":
            t = now - (span + timedelta(days=1) if keep else span / 2)
        elif since:
            t = now - (span / 2 if keep else span + timedelta(days=1))
        else:
            t = now + (span + timedelta(days=30) if keep else (span / 2 if span else -timedelta(days=1)))
        rec[g["field"]] = _stamp(t, rec.get(g["field"]))
    elif op == "owned" and g.get("owner_from"):  # the record's owner is (not) the session's one
        want = session_value(g, state)
        if want is not None:
            rec[g["owner_field"]] = want if keep else _other_value(state, g, want)
    elif op == "owned":
        have = rec.get(g["owner_field"])
        args[g["owner_arg"]] = have if keep else _other_owner(state, g["owner_field"], have)
    elif op == "member":
        held = _ids(rec.get(g["list_field"]))
        listed = isinstance(args.get(g["item_arg"]), list)  # product_ids: a list of ids, each must be held
        if keep:
            if held:
                args[g["item_arg"]] = [held[0]] if listed else held[0]
            else:
                rec[g["list_field"]] = list(args[g["item_arg"]]) if listed else [args.get(g["item_arg"])]
        else:
            other = _other_member(state, g, held)
            args[g["item_arg"]] = [other] if listed else other
    elif op == "unchanged":
        have = rec.get(g["field"])
        if keep:
            args[g["arg"]] = copy.deepcopy(have)
        elif isinstance(have, list):
            args[g["arg"]] = list(have) + [copy.deepcopy(have[0]) if have else "extra"]
        elif isinstance(have, (int, float)) and not isinstance(have, bool):
            args[g["arg"]] = have + 1
        else:
            args[g["arg"]] = f"{have}-changed"
    elif op == "covers":
        have = _size(rec.get(g["field"])) or 0.0
        up = g.get("side", "max") == "max"
        v = have if keep else (have + 1 if up else max(0.0, have - 1) if have >= 1 else -1.0)
        args[g["arg"]] = int(v) if float(v).is_integer() else round(v, 2)


def session_value(g: dict, state: Any) -> Any:
    """``owner_from``'s value: ``field`` of the one record of a session collection (the caller's own,
    ``CollectionSpec.session``); None when the collection holds no record."""
    src = g.get("owner_from") or {}
    table = state.get(src.get("collection")) if isinstance(state, dict) else None
    if not isinstance(table, dict) or not table:
        return None
    rec = table[min(table)]
    return rec.get(src.get("field")) if isinstance(rec, dict) else None


def _other_value(state: dict, g: dict, want: Any) -> Any:
    """Another value of the owner field than ``want``: another record's (a real person of this world),
    else ``want`` changed."""
    for r in (state.get(g["collection"]) or {}).values():
        v = r.get(g["owner_field"]) if isinstance(r, dict) else None
        if v is not None and _norm(v) != _norm(want):
            return v
    return f"{want} (other)"


def _other_owner(state: dict, key: str, have: Any) -> Any:
    """Another record's id of the collection keyed by ``key`` (a real one, so the call passes its schema)."""
    for recs in state.values():
        if isinstance(recs, dict):
            for k, r in recs.items():
                if isinstance(r, dict) and key in r and str(r[key]) == str(k) and str(k) != str(have):
                    return r[key]
    return f"{have}-other"


def _other_member(state: dict, g: dict, held: list[str]) -> Any:
    """An id the record's list does not hold: a real record's of the same kind where the state has one
    (so the call passes its schema), else a made-up one."""
    key = str(g.get("item_arg") or "")
    key = key[:-1] if key.endswith("_ids") else key
    for recs in state.values():
        if isinstance(recs, dict):
            for k, r in recs.items():
                if isinstance(r, dict) and key in r and str(r[key]) == str(k) and str(k) not in held:
                    return r[key]
    return "not-in-" + "-".join(held[:1] or ["list"])


def _enum(g: dict, enums: dict[str, list] | None) -> list | None:
    """The values a guard's subject can take: an argument's enum (``"arg:<name>"``), else the collection's statuses."""
    key = f"arg:{g['arg']}" if g.get("op") in ("arg_not", "arg_in") else g.get("collection")
    return (enums or {}).get(key)


def probe_cases(guards: list[dict], g: dict, state: dict, args: dict,
                enums: dict[str, list] | None = None) -> tuple[tuple[dict, dict], tuple[dict, dict]]:
    """((state, args) that keep every guard of the tool, (state, args) that break only ``g``), from a
    sample state and a call's arguments. ``enums``: collection -> the status field's values, and
    ``"arg:<name>"`` -> an argument's enum."""
    def build(keep_g: bool) -> tuple[dict, dict]:
        st, a = copy.deepcopy(state), copy.deepcopy(args)
        recs = (st.get(g.get("collection")) or {}) if g.get("id_arg") else {}
        if recs and str(a.get(g["id_arg"])) not in recs:  # absent, or a new id: a record that exists
            key = next(iter(recs))
            a[g["id_arg"]] = int(key) if isinstance(a.get(g["id_arg"]), int) and key.isdigit() else key
        if g.get("when"):  # the probed guard's condition first, so that the others see it
            shape({"op": "none", "when": g["when"]}, st, a, keep=True)
        for other in guards:
            if other is not g:
                shape(other, st, a, keep=True, enum=_enum(other, enums), force_when=False)
        shape(g, st, a, keep=keep_g, enum=_enum(g, enums))
        step = (enums or {}).get(f"step:{g.get('arg')}") if g.get("op") == "arg_limit" else None
        if step and isinstance(a.get(g["arg"]), (int, float)) and not isinstance(a[g["arg"]], bool):
            v, k = float(a[g["arg"]]), float(step[0])  # a documented multipleOf: the nearest multiple outward
            lo = g.get("min") is not None and g.get("max") is None
            n = (v // k) * k if (keep_g != lo) else -(-v // k) * k
            a[g["arg"]] = int(n) if n.is_integer() else n
        return st, a

    return build(True), build(False)
