"""The worker's committed state: resident initial states, per-record JSON bytes and digests, copy on write.

The state a task starts from is sent once and stays RESIDENT (a few, least recently used
first out, keyed by the parent's hash of its JSON): per dict-valued entry the JSON bytes of
each record, its digest and the entry's share of the hash. An episode shares those (copy on
write) and the tools see, per collection, a :class:`Records` dict whose values are decoded
from the committed bytes only when read. After a call only the records it read or wrote are
encoded again and compared; a reset puts back only the collections the episode changed.

Used by the worker loop (:mod:`autoforge.envs._worker`), whose docstring gives the protocol.
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import orjson

from autoforge.envs.state_hash import collection_digest, record_digest, value_digest
from autoforge.envs.wire import STRICT, describe_problem, int_too_big, is_finite, loads, show, try_encode

RESIDENT_STATES = 8  # initial states kept per worker
RESIDENT_BYTES = 64 * 1024 * 1024  # ... and at most this much JSON of them, and an eighth of the
# worker's memory limit (the current one always stays; in memory a state takes ~2-3x its JSON)


class _Absent:
    """The value of a record nobody has read yet in this call (read it with ``records[key]``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<record not read>"


_ABSENT = _Absent()
MISSING = object()


def _version_reader() -> Any:
    """A reader of CPython's dict version tag (PEP 509: it changes on every change to a dict), or
    None where it is missing or does not behave so (then every call checks a collection whole).

    Read with ctypes at the field's offset; used only on our own dicts, never by tool code. A
    self-test here checks a write, a removal and a write past a subclass's methods change it and
    a read does not."""
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        return None
    try:
        import ctypes

        offset = object.__basicsize__ + ctypes.sizeof(ctypes.c_ssize_t)
        field = ctypes.c_uint64.from_address

        def version(d: dict) -> int:
            return field(id(d) + offset).value

        class _Probe(dict):
            __slots__ = ("x",)

        for d in ({}, _Probe(a=1)):
            seen = [version(d)]
            d["k"] = 1
            seen.append(version(d))
            _ = d["k"], d.get("k"), len(d), list(dict.values(d))
            seen.append(version(d))
            dict.update(d, {"k": 2})
            seen.append(version(d))
            dict.pop(d, "k")
            seen.append(version(d))
            if not (seen[0] != seen[1] == seen[2] != seen[3] != seen[4]):
                return None
        return version
    except Exception:  # noqa: BLE001 - no ctypes, another layout: check collections whole
        return None


_VERSION = _version_reader()


class Records(dict):
    """A collection as the tools see it: a dict whose records are decoded on first access.

    Every method that hands out or replaces a record notes its key (``seen``); those that hand out
    all of them decode all (``scan``). ``dict(records)``, ``{**records}``, ``records.copy()``,
    ``copy.copy`` and ``json.dumps`` go through them too (``__iter__`` is overridden, which sends
    CPython's dict merge through ``keys()`` and ``[]``). A call that reaches the dict's storage
    some other way (``dict.get(records, k)``) sees placeholders, not records; what it writes there
    is still found (:meth:`StoredCollection.examine` checks the whole key set and every value's kind)."""

    __slots__ = ("col", "seen", "scan", "edit", "tag", "past")

    def _mark(self) -> None:
        """Before we change the storage: was it changed since we last did (``past``: by a tool
        reaching it past our methods)?"""
        if _VERSION is not None and _VERSION(self) != self.tag:
            self.past = True

    def _marked(self) -> None:
        if _VERSION is not None:
            self.tag = _VERSION(self)

    def _fill(self, key: Any) -> Any:
        value = loads(self.col.vals[key])
        self._mark()
        dict.__setitem__(self, key, value)
        self._marked()
        self.seen.add(key)
        return value

    def _all(self) -> None:
        if self.scan:
            return
        self.scan = True
        missing = [k for k, v in dict.items(self) if v is _ABSENT]
        if missing:
            fresh = loads(self.col.blob()) if len(missing) > 8 else None
            self._mark()
            for k in missing:
                dict.__setitem__(self, k, fresh[k] if fresh is not None else loads(self.col.vals[k]))
            self._marked()

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        return self._fill(key) if value is _ABSENT else value

    def get(self, key, default=None):
        value = dict.get(self, key, MISSING)
        if value is MISSING:
            return default
        return self._fill(key) if value is _ABSENT else value

    def setdefault(self, key, default=None):
        if dict.__contains__(self, key):
            return self[key]
        self[key] = default
        return default

    def __setitem__(self, key, value):
        self.seen.add(key)
        self._mark()
        dict.__setitem__(self, key, value)
        self._marked()

    def __delitem__(self, key):
        self._mark()
        dict.__delitem__(self, key)
        self._marked()
        self.seen.add(key)
        self.edit = True

    def pop(self, key, *default):
        if dict.__contains__(self, key):
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def popitem(self):
        if not dict.__len__(self):
            raise KeyError("popitem(): dictionary is empty")
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def clear(self):
        self.seen.update(dict.keys(self))
        self.edit = True
        self._mark()
        dict.clear(self)
        self._marked()

    def __ior__(self, other):
        self.update(other)
        return self

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = dict(other)
        out.update(self.items())
        return out

    def values(self):
        self._all()
        return dict.values(self)

    def items(self):
        self._all()
        return dict.items(self)

    def copy(self):
        self._all()
        return dict(dict.items(self))

    def __iter__(self):
        return dict.__iter__(self)

    def __eq__(self, other):
        self._all()
        if isinstance(other, Records):
            other._all()
        return dict.__eq__(self, other)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = None

    def __repr__(self):
        self._all()
        return dict.__repr__(self)

    def __reduce_ex__(self, protocol):
        return dict, (self.copy(),)

    @classmethod
    def fromkeys(cls, keys, value=None):
        return dict.fromkeys(keys, value)


def _materialize(value: Any) -> bool:
    """Decode every placeholder in the collections ``value`` holds (a tool put a collection, or
    something holding one, into the state or its output); True when there was one."""
    stack, found, visited = [value], False, set()
    while stack:
        v = stack.pop()
        if not isinstance(v, (dict, list, tuple)) or id(v) in visited:
            continue
        visited.add(id(v))  # a value that contains itself is walked once
        if isinstance(v, Records):
            v._all()
            found = True
        stack.extend(dict.values(v) if isinstance(v, dict) else v)
    return found


def _strict_bytes(value: Any, depth: int) -> bytes | None:
    """``value``'s strict JSON (see :func:`encode`; None when it is not JSON), nested ``depth``
    levels below the top of the state, so the depth limit is the state's."""
    for attempt in (0, 1):
        try:
            data = orjson.dumps([[value]] if depth == 2 else [value], option=STRICT)[depth:-depth]
            break
        except TypeError:
            if attempt or not _materialize(value):
                return None
    if b"null" in data and not is_finite(value):
        return None
    if int_too_big(data, value, False):
        return None
    return data


def _record_bytes(value: Any) -> bytes | None:
    return _strict_bytes(value, 2)


def value_bytes(value: Any) -> bytes | None:
    return _strict_bytes(value, 1)


def key_ok(key: Any) -> bool:
    return type(key) is str and try_encode(key, False) is not None


class StoredCollection:
    """A dict-valued entry of the committed state: ``vals`` (record key -> JSON bytes, in the
    state's order; a resident entry's is never changed, a live one has its own), ``kps`` / ``digs``
    (key -> its JSON and a colon / its digest, the resident state's) with this episode's
    additions and changes in ``kpx`` / ``dd`` (None: removed), ``term`` (its share of the hash
    sum) and ``live`` (what the tools see)."""

    __slots__ = ("name", "vals", "kps", "kpx", "digs", "dd", "term", "_blob", "own", "live", "moved")

    @classmethod
    def build(cls, name: str, value: dict, data: bytes | None = None) -> "StoredCollection":
        col = cls()
        col.name, col.own, col.live = name, True, None
        col.vals = {k: orjson.dumps(v) for k, v in value.items()}
        col.kps = {k: orjson.dumps(k) + b":" for k in value}
        col.digs = {k: record_digest(name, k, v) for k, v in value.items()}
        col.kpx, col.dd, col.moved = {}, {}, False
        col.term = collection_digest(name) + sum(col.digs.values())
        col._blob = data
        return col

    def fork(self) -> "StoredCollection":
        """A live copy: its own ``vals`` (a reset undoes the episode's changes in it, so it is copied
        once per state, not per episode); ``kps`` and ``digs`` stay shared, changes go to ``kpx``/``dd``."""
        col = StoredCollection()
        col.name, col.vals, col.kps, col.digs, col.term, col._blob = (
            self.name, dict(self.vals), self.kps, self.digs, self.term, self._blob)
        col.own, col.live, col.kpx, col.dd, col.moved = True, None, {}, {}, False
        col.refill()
        return col

    def revert(self, base: "StoredCollection") -> bool:
        """Back to ``base`` (the resident entry this one was forked from) by putting back only the
        records the episode changed; False when records were removed or moved (fork again)."""
        if self.moved or self.live is None or not self.own:
            return False
        live, vals, bvals = self.live, self.vals, base.vals
        for k in self.dd:
            if k in bvals:
                vals[k] = bvals[k]
                dict.__setitem__(live, k, _ABSENT)
            else:
                vals.pop(k, None)
                dict.pop(live, k, None)
        self.kpx, self.dd, self.term, self._blob = {}, {}, base.term, base._blob
        live.seen, live.scan, live.edit, live.past = set(), False, False, False
        live._marked()
        return True

    def blob(self) -> bytes:
        if self._blob is None:
            kp, kpx = self.kps.get, self.kpx
            self._blob = b"{" + b",".join([(kp(k) or kpx[k]) + v for k, v in self.vals.items()]) + b"}"
        return self._blob

    def refill(self, keys: Any = None) -> None:
        """Make ``live`` the committed records again (all, or only ``keys`` when the key set and
        order did not change)."""
        live = self.live
        if live is None:
            live = self.live = Records()
            live.col = self
        elif keys is not None:  # the records a call read, wrote or added (none removed)
            vals = self.vals
            for k in keys:
                if k in vals:
                    dict.__setitem__(live, k, _ABSENT)
                else:
                    dict.pop(live, k, None)
            live.seen, live.scan, live.edit, live.past = set(), False, False, False
            live._marked()
            return
        else:
            dict.clear(live)
        dict.update(live, dict.fromkeys(self.vals, _ABSENT))
        live.seen, live.scan, live.edit, live.past = set(), False, False, False
        live._marked()

    def examine(self) -> tuple[list, bool] | str:
        """What the last call changed: ``(changes, structural)``, ``changes`` a list of ``(key,
        JSON bytes, or None when removed)`` and ``structural`` whether keys were added, removed or
        moved; or a message when a record is not JSON. Looks at the records the call read or wrote
        (all of them after a scan); the key set, the key order and which values are still
        placeholders are checked as a whole (C-speed), so a write that bypassed our methods is
        found too and then every record that is not a placeholder is looked at."""
        live, vals = self.live, self.vals
        seen = live.seen
        keys: Any = None
        structural = live.edit
        if live.scan:
            try:
                whole = orjson.dumps(live, option=STRICT)
            except TypeError:
                whole = None
            if whole is not None and whole == self.blob():
                if b"null" in whole and not is_finite(list(dict.values(live))):
                    return f"state[{show(self.name)}] holds NaN or infinity, which are not JSON: use None"
                return [], False
        elif _VERSION is not None and not live.past and _VERSION(live) == live.tag:
            # nothing reached the storage past our methods: the seen records are all that changed
            if not seen:
                return [], False
            keys = seen  # structural: a record was removed (added ones come last, in order)
        else:
            n = dict.__len__(live)
            absent = list(dict.values(live)).count(_ABSENT)
            real = added = 0
            for k in seen:
                v = dict.get(live, k, MISSING)
                if v is MISSING:
                    structural = structural or k in vals
                    continue
                if k not in vals:
                    added += 1
                if v is not _ABSENT:
                    real += 1
            if n - absent == real:  # every value we did not hand out is still a placeholder
                if structural:  # a record removed (or put back): the key set may have any order
                    if (dict.keys(live) ^ vals.keys()) <= seen:
                        keys = seen
                elif n == len(vals) + added and list(itertools.islice(dict.keys(live), len(vals))) == list(vals):
                    keys = seen  # the committed keys in their order, then the added ones
            if keys is not None and not keys:
                return [], False
        if keys is None:  # everything that is not a placeholder, and the key set
            structural = True
            keys = [k for k, v in dict.items(live) if v is not _ABSENT]
            keys += list(vals.keys() - dict.keys(live))
            keys += [k for k in dict.keys(live) - vals.keys() if dict.get(live, k) is _ABSENT]
        changes = []
        for k in keys:
            value = dict.get(live, k, MISSING)
            if value is MISSING:
                if k in vals:
                    changes.append((k, None))
                continue
            if value is _ABSENT:
                if k in vals:
                    continue
                return f"state[{show(self.name)}][{show(k)}] is a placeholder, not a record"
            data = _record_bytes(value)
            if data is None:
                return describe_problem(value, f"state[{show(self.name)}][{show(k)}]")
            if k not in vals and not key_ok(k):
                return describe_problem({k: None}, f"state[{show(self.name)}]")
            if vals.get(k) != data:
                changes.append((k, data))
        if structural and not changes and list(dict.keys(live)) == list(vals):
            structural = False
        return changes, structural

    def apply(self, changes: list, reorder: bool) -> int:
        """Commit ``changes``; returns the change of ``term``."""
        vals, kps, kpx, digs, dd, name = self.vals, self.kps, self.kpx, self.digs, self.dd, self.name
        delta = 0
        if not reorder and len(changes) > 1:  # records added: in the order the tool added them
            tail = {k: i for i, k in enumerate(itertools.islice(dict.keys(self.live), len(vals), None))}
            changes = sorted(changes, key=lambda c: tail.get(c[0], -1))
        for k, data in changes:
            old = dd[k] if k in dd else digs.get(k)
            if old is not None:
                delta -= old
            if data is None:
                del vals[k]
                dd[k] = None
            else:
                vals[k] = data
                if k not in kps and k not in kpx:
                    kpx[k] = orjson.dumps(k) + b":"
                new = dd[k] = record_digest(name, k, loads(data))
                delta += new
        if reorder:
            order = list(dict.keys(self.live))
            if order != list(vals):
                self.vals = {k: vals[k] for k in order}
            self.moved = True
        self.term += delta
        self._blob = None
        return delta


class StoredValue:
    """A top-level entry that is not a dict: one JSON value, decoded afresh after every call."""

    __slots__ = ("name", "data", "term", "live")

    @classmethod
    def build(cls, name: str, value: Any, data: bytes) -> "StoredValue":
        v = cls()
        v.name, v.data, v.term, v.live = name, data, value_digest(name, value), loads(data)
        return v

    def fork(self) -> "StoredValue":
        v = StoredValue()
        v.name, v.data, v.term, v.live = self.name, self.data, self.term, loads(self.data)
        return v


class Resident:
    """An initial state kept in the worker: its entries (in order) and its hash sum."""

    __slots__ = ("entries", "total", "size")

    def __init__(self, state: dict, size: int):
        self.entries = {}
        for name, value in state.items():
            if type(value) is dict:
                self.entries[name] = StoredCollection.build(name, value)
            else:
                self.entries[name] = StoredValue.build(name, value, orjson.dumps(value))
        self.total = sum(e.term for e in self.entries.values())
        self.size = size
