"""Status gates along a walk: the status each write requires of its record and the status it leaves.

A prose rule such as "Only confirmed reservations can be checked in; the reservation becomes
checked_in" (:mod:`autoforge.domain.rules`: a ``source_status`` and a ``result_status`` rule)
is enforced in the write's code by the offline templates (:mod:`autoforge.envs.code.writes`,
:meth:`autoforge.envs.code.context.Ctx.emit_status_precondition`) in three statement forms,
read back here from the code, since the code is what the gold run executes:

- ``if record.get('status') not in ['booked', 'confirmed']:``: the statuses it accepts;
- ``if record.get('status') == 'cancelled':``: the status it refuses as already done;
- ``record['status'] = 'cancelled'`` (or a create's ``'status': 'confirmed',``): the status it leaves.

A delete (``kind == "delete"``) leaves no record. Code in another form (an LLM's) states no gate
and is never held back. :func:`gate_break` follows a walk's writes collection by collection: the
later write on a collection acts on the record the earlier one left (the DAG builder binds a
write's id to the most recent earlier output holding it: the record the earlier write returned),
so a later write whose gate no status left by the earlier writes passes fails in every gold
run (reserve -> cancel -> check in: check-in needs a confirmed reservation, the cancel left it
cancelled). A create starts a new record: what earlier writes left no longer matters.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from autoforge import pyast
from autoforge.types import TaskDag, ToolCode

_REQUIRES = re.compile(r"if record\.get\('status'\) not in (\[[^\]]*\]):")
_REFUSES = re.compile(r"if record\.get\('status'\) == ('[^']*'):")
_LEAVES = re.compile(r"record\['status'\] = ('[^']*')\s*$", re.M)
_CREATED = re.compile(r"^\s*'status': ('[^']*'),\s*$", re.M)


@dataclass(frozen=True)
class Gate:
    """What one write needs of its record's status and what it leaves there."""

    requires: frozenset[str] | None  # the statuses it accepts (None: any)
    refuses: frozenset[str]  # statuses it refuses as already done ("is already cancelled")
    leaves: frozenset[str] | None  # the statuses the record may have after it (None: unchanged; empty: no record)
    creates: bool = False  # it makes a new record (what earlier writes left does not apply to it)

    def accepts(self, status: str) -> bool:
        return (self.requires is None or status in self.requires) and status not in self.refuses

    def after(self, before: frozenset[str] | None) -> frozenset[str] | None:
        """The statuses the record may be in after this write, given those it may be in before
        (None: not known), counting only the statuses it accepts."""
        if self.leaves is not None:
            return self.leaves
        if before is None:
            return None if self.requires is None else frozenset(s for s in self.requires if s not in self.refuses)
        return frozenset(s for s in before if self.accepts(s))


def _literal(text: str):
    try:
        return pyast.literal_eval(text)  # (one thread at a time: pyast)
    except (ValueError, SyntaxError):
        return None


def gate_of(tool: ToolCode) -> Gate | None:
    """The gate the write's code states; None for a read, a write without a collection, or code
    that states nothing about the status."""
    if tool.effect != "write" or not tool.collection:
        return None
    src = tool.source or ""
    req = _REQUIRES.search(src)
    allowed = _literal(req.group(1)) if req else None
    requires = frozenset(str(s) for s in allowed) if isinstance(allowed, list) else None
    refuses = frozenset(str(_literal(m)) for m in _REFUSES.findall(src))
    set_to = [str(_literal(m)) for m in _LEAVES.findall(src)]
    creates = tool.kind == "create"
    leaves: frozenset[str] | None = None
    if set_to:
        leaves = frozenset(set_to[-1:])
    elif creates:
        made = _CREATED.findall(src)
        leaves = frozenset(str(_literal(m)) for m in made[:1]) or None
    elif tool.kind == "delete" and f"[{tool.collection!r}].pop(" in src:
        leaves = frozenset()
    if requires is None and not refuses and leaves is None:
        return None
    return Gate(requires, refuses, leaves, creates)


def gates(tools: Iterable[ToolCode]) -> dict[str, Gate]:
    """The gate of every write in ``tools`` that states one, by tool name."""
    out = {}
    for t in tools:
        g = gate_of(t)
        if g is not None:
            out[t.name] = g
    return out


def gate_break(names: list[str], tools: dict[str, ToolCode], known: dict[str, Gate] | None = None) -> int | None:
    """The position of the first write in ``names`` whose status gate the earlier writes on its
    collection leave no way through (None: every write can pass). ``known``: the gates by tool
    name, when the caller checks many walks of one tool set."""
    known = known if known is not None else gates(tools[n] for n in names if n in tools)
    status: dict[str, frozenset[str] | None] = {}  # collection -> statuses its record may be in (None: any)
    for i, name in enumerate(names):
        tool = tools.get(name)
        if tool is None or tool.effect != "write" or not tool.collection:
            continue
        g = known.get(name)
        coll = tool.collection
        if g is None:
            if tool.kind == "create":
                status.pop(coll, None)
            continue
        before = None if g.creates else status.get(coll)
        if before is not None and not any(g.accepts(s) for s in before):
            return i
        status[coll] = g.after(before)
    return None


def feeding_write(dag: TaskDag, node_id: str, collection: str, key: str, tools: dict[str, ToolCode]) -> ToolCode | None:
    """The first write on ``collection`` in ``dag`` whose record id is ``node_id``'s output ``key``
    (``get_order`` -> ``cancel_order(order_id)``), also through reads that pass the id on (a find
    over the orders -> ``get_order`` -> ``cancel_order``): the write whose gate the record must pass."""
    carrying = {node_id}
    for n in dag.nodes:
        t = tools.get(n.tool or "") if n.kind == "tool" else None
        if t is None or not any(a.kind == "node" and a.node in carrying and (a.path or "").rsplit(".", 1)[-1] == key
                                for a in n.args.values()):
            continue
        if t.effect == "write" and t.collection == collection:
            return t
        if t.effect == "read" and t.collection == collection:
            carrying.add(n.node_id)
    return None


__all__ = ["Gate", "gate_of", "gates", "gate_break", "feeding_write"]
