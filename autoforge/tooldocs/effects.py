"""Read/write effect of a tool: explicit hints first, then the verb of its name or description.

docs/design.md#stage-1-ingest (read/write effect) and docs/conventions.md#tag-side-effects (tau2-bench's READ/WRITE
tool types): verification's read-only-agent check and the offline synthesizer rely on it.
Order of evidence: an explicit hint (MCP ``readOnlyHint``/``destructiveHint``, the HTTP
method, ``x-effect``) > the leading verb of the tool name > the leading verb of the
description > ``"unknown"``. The verb lists are our default; the paper leaves this to the LLM.
"""

from __future__ import annotations

import re
from typing import Any

from autoforge.errors import ToolDocError
from autoforge.types import Effect

READ_VERBS = frozenset(
    """get find list search lookup look check calculate compute fetch query read show view describe count
    retrieve estimate quote validate verify browse track preview is has can summarize summarise inspect
    lookup locate compare filter sort rank recommend suggest explain download export""".split()
)
WRITE_VERBS = frozenset(
    """create add update cancel delete book assign remove set transfer make place submit register reserve
    modify edit change return exchange pay refund send post put patch approve reject decline close open move
    upgrade downgrade enroll enrol unassign unenroll schedule reschedule renew issue borrow checkin checkout
    archive restore mark apply redeem activate deactivate suspend block unblock rename insert upsert write
    grant revoke confirm complete start stop link unlink attach detach rate review hold release deposit
    withdraw lock unlock dispatch ship file log record request report replace reset clear upload import
    invite accept dismiss terminate hire promote rebook void charge credit debit topup reactivate
    port swap subscribe unsubscribe enable disable flag escalate resolve reopen discharge admit
    refill prescribe waive adjust allocate deallocate extend shorten publish unpublish tag untag freeze unfreeze dispute resume""".split()
)
# Third-person / participle forms that start descriptions ("Returns the order ...").
_DESCRIPTION_READ = frozenset(
    """gets finds lists searches looks checks calculates computes fetches queries reads shows views describes
    counts retrieves estimates quotes validates verifies returns""".split()
)

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def words(name: str) -> list[str]:
    """``findUserIdByEmail`` / ``find_user_id_by_email`` / ``find-user`` -> lowercase words."""
    return [w for w in re.split(r"[^a-z0-9]+", _CAMEL.sub("_", name).lower()) if w]


def verb_effect(name: str, description: str = "") -> Effect:
    """The effect implied by the leading verb of the name, else of the description."""
    ws = words(name)
    if ws:
        first, second = ws[0], (ws[1] if len(ws) > 1 else "")
        if first == "check" and second in ("in", "out"):  # check_in_guest, check_out_book
            return "write"
        if first in WRITE_VERBS:
            return "write"
        if first in READ_VERBS:
            return "read"
    dws = re.findall(r"[a-z]+", description.lower())[:1]
    if dws:
        d = dws[0]
        if d in _DESCRIPTION_READ or d in READ_VERBS:
            return "read"
        stem = d[:-1] if d.endswith("s") else d
        if d in WRITE_VERBS or stem in WRITE_VERBS or (d.endswith("es") and d[:-2] in WRITE_VERBS):
            return "write"
    return "unknown"


def explicit_effect(obj: dict[str, Any], path: str, pointer: str) -> Effect | None:
    """An ``x-effect`` ("read"/"write") or boolean ``readOnly``/``x-read-only`` hint on a tool object."""
    if "x-effect" in obj:
        value = obj["x-effect"]
        if value not in ("read", "write"):
            raise ToolDocError(
                f"x-effect must be 'read' or 'write', got {value!r}", path=path, location=f"{pointer}/x-effect"
            )
        return value
    for key in ("readOnly", "x-read-only", "x-readonly", "readOnlyHint"):
        if key in obj:
            value = obj[key]
            if not isinstance(value, bool):
                raise ToolDocError(f"{key} must be true or false, got {value!r}", path=path, location=f"{pointer}/{key}")
            return "read" if value else "write"
    return None


def mcp_effect(annotations: Any, path: str, pointer: str) -> Effect | None:
    """MCP tool annotations: ``readOnlyHint: true`` -> read; ``destructiveHint: true`` or
    ``readOnlyHint: false`` -> write (the MCP spec's default for readOnlyHint is false, but
    only an explicit value counts as evidence here)."""
    if annotations is None:
        return None
    if not isinstance(annotations, dict):
        raise ToolDocError("annotations must be an object", path=path, location=pointer)
    for key in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"):
        if key in annotations and not isinstance(annotations[key], bool):
            raise ToolDocError(f"{key} must be true or false", path=path, location=f"{pointer}/{key}")
    if annotations.get("readOnlyHint") is True:
        return "read"
    if annotations.get("destructiveHint") is True or annotations.get("readOnlyHint") is False:
        return "write"
    return None


def method_effect(method: str) -> Effect:
    """HTTP semantics: safe methods read, the others write."""
    return "read" if method.lower() in ("get", "head", "options", "trace") else "write"


def infer_effect(name: str, description: str = "", *, hint: Effect | None = None) -> Effect:
    """Public helper: an explicit hint if given, else the verb heuristic (used by the offline backend)."""
    return hint if hint in ("read", "write") else verb_effect(name, description)
