"""Ids: which entity an id names, how documented ids look, and how state keys hold them.

``order_id`` names an order and ``from_account_id`` an account (:func:`id_param_entity`); a
pattern ``^AC\\d{4}$`` or an example ``'INV-00042'`` documents the ids' prefix and width
(:func:`id_pattern`); ``format: uuid``, a UUID pattern or a UUID in the prose documents UUIDs and
an integer type or "the numeric id" integers (:func:`documented_id_style`); :func:`make_id` writes
record number n of a collection in its docs' style (``BK-0042``, ``42``, a UUID), for the sample
state and for every task's world; state keys are strings, and an integer-id collection's records
hold ints (:func:`id_key`, :func:`id_value`).
"""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import TYPE_CHECKING, Any, Iterable, Literal

from autoforge.domain import words as nm
from autoforge.domain.values import example_value
from autoforge.tooldocs.schema import documented_pattern, json_type, props, unwrap

if TYPE_CHECKING:  # annotations only: the sandbox worker imports this module and starts faster without pydantic
    from autoforge.types import CollectionSpec, StateSchema, ToolSpec

# Prefixes of id parameters that name a role, not an entity: from_account_id -> account.
ROLE_PREFIXES = ("from_", "to_", "source_", "src_", "destination_", "dest_", "target_", "origin_", "new_",
                 "old_", "primary_", "secondary_", "parent_", "sender_", "receiver_", "recipient_", "current_")
# Id fields naming a person's role; they point at the people collection when there is one.
ROLE_PEOPLE = {"owner", "assignee", "author", "creator", "requester", "reporter", "manager", "approver",
               "reviewer", "sender", "recipient", "host", "organizer", "instructor", "holder", "agent"}
# fields whose value is a person's name ("owner": "Dana Lee"): the roles, and a few that only name people
PERSON_FIELDS = ROLE_PEOPLE | {"lead", "supervisor", "mentor", "boss", "coordinator", "supervisor_name"}
# ... unless the description says it holds an account ("Repository owner (username or organization name)")
_ACCOUNT_WORDS = re.compile(r"\b(?:user\s?names?|logins?|handles?|accounts?|organi[sz]ations?|orgs?|teams?|compan(?:y|ies)|"
                            r"e-?mails?|ids?|identifiers?)\b", re.I)


def person_name_fields(schema: StateSchema) -> frozenset[str]:
    """The string fields of a state that hold a person's name: ``owner``, ``manager`` ... where no field of
    that name in the whole schema is described as an account, a login or an organization (GitHub's
    ``owner``, "username or organization name", stays an account in every collection that holds one)."""
    fields = [f for c in schema.collections for f in c.fields if f.name in PERSON_FIELDS]
    accounts = {f.name for f in fields if _ACCOUNT_WORDS.search(f.description or "")}
    return frozenset(f.name for f in fields if f.type == "string" and f.name not in accounts
                     and not (f.enum or f.pattern or f.format))


def id_param_entity(param: str, aliases: dict[str, str] | None = None) -> str | None:
    """``order_id`` -> order; ``from_account_id`` -> account; ``tag_ids`` -> tag; ``id`` -> None.

    ``aliases`` maps role entities to the entity they are (``manager`` -> ``employee`` when both
    ids follow the documented pattern ``^E\\d{4}$``)."""
    p = nm.snake(param)
    if p.endswith("_ids"):
        base = p[:-4]
    elif p.endswith("_id"):
        base = p[:-3]
    else:
        return None
    for pre in ROLE_PREFIXES:
        if base.startswith(pre) and len(base) > len(pre):
            base = base[len(pre):]
            break
    if not base:
        return None
    ent = nm.singular(base)
    return (aliases or {}).get(ent, ent)


# AC0001, PET-0001, 1Z0000001. The prefix is spelled "digits, a letter, letters or digits" rather than
# [A-Z0-9]*[A-Z][A-Z0-9]* (the same strings, and the same matches): that form backtracks quadratically
# on a long run of letters, and these expressions read document text.
ID_PATTERN = re.compile(r"^\^?([0-9]*[A-Z][A-Z0-9]*[-_]?)\\d\{(\d+)\}\$?$")
MAX_ID_WIDTH = 20  # digits of a documented id shape; \d{999999999} is not an id (its ids would fill memory)
MAX_ID_PATTERN_CHARS = 80  # an id shape is short; a longer pattern is read as no id shape


def id_pattern(schema: dict | None, examples: bool = False) -> tuple[str, int] | None:
    """``{"pattern": "^AC\\d{4}$"}`` -> ("AC", 4): the prefix and width of documented ids.

    ``examples``: without a pattern, an example the schema gives (``"The invoice id, such as 'INV-00042'"``,
    or ``example: "INV-00042"``) documents the same: ("INV-", 5)."""
    s = (unwrap(schema) or {}) if isinstance(schema, dict) else {}
    pat = s.get("pattern")
    shape = id_shape(pat)
    if shape:
        return shape
    if examples and pat is None and json_type(s) == "string":
        return example_id_pattern(s)
    return None


def id_shape(pattern: Any) -> tuple[str, int] | None:
    """``"^AC\\d{4}$"`` -> ("AC", 4); None for anything else, for a pattern that cannot be used
    (:func:`~autoforge.tooldocs.schema.documented_pattern`), and for a width over :data:`MAX_ID_WIDTH`
    (the pattern is then ignored as an id shape)."""
    if not isinstance(pattern, str) or len(pattern) > MAX_ID_PATTERN_CHARS:
        return None
    m = ID_PATTERN.match(pattern)
    if not m or not 0 <= int(m.group(2)) <= MAX_ID_WIDTH or documented_pattern(pattern) is None:
        return None
    return (m.group(1), int(m.group(2)))


_EXAMPLE_ID = re.compile(r"([0-9]*[A-Z][A-Z0-9]*[-_]?)(\d{2,10})")  # prefix spelled as in ID_PATTERN
_CUED_ID = re.compile(r"(?:such as|for example|for instance|e\.g\.|like|format)\s*[:,]?\s*['\"`‘’“”]?"
                      r"([0-9]*[A-Z][A-Z0-9]*[-_]?\d{2,10})(?![\w-])", re.IGNORECASE)


def example_id_pattern(schema: dict) -> tuple[str, int] | None:
    """(prefix, width) of the id a string schema shows by example: its ``example`` / ``examples``,
    or one its description quotes after "such as" / "e.g." (:func:`autoforge.domain.values.example_value`)."""
    examples = schema.get("examples")
    cands: list[Any] = [schema.get("example")] + (list(examples)[:3] if isinstance(examples, list) else [])
    desc = schema.get("description")
    if isinstance(desc, str):
        cands.append(example_value(desc))
        cands += [m.group(1) for m in _CUED_ID.finditer(desc)]  # "The customer's id, e.g. 'CUS-0012'"
    for v in cands:
        m = _EXAMPLE_ID.fullmatch(v) if isinstance(v, str) else None
        if m:
            return (m.group(1), len(m.group(2)))
    return None


UUID_TEXT = re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
_UUID_WORDS = re.compile(r"\b(?:uuids?|guids?|universally unique identifiers?)\b", re.IGNORECASE)
# "the numeric id of the order", "an integer ID", "ID (integer)", "a number identifying the order"
_NUMERIC_WORDS = re.compile(r"\b(?:numeric(?:al)?|integer|int)\s+(?:id|identifier|key)\b|\bids?\s*\((?:integer|int|number)\)"
                            r"|\bnumber (?:that )?identif(?:y|ies|ying)\b", re.IGNORECASE)
_A_UUID = "3f2b8c1e-9d4a-4e7b-8a6c-1d2e3f4a5b6c"


def _uuid_pattern(pattern: Any) -> bool:
    """Whether ``pattern`` is a UUID's: it matches a UUID and no short code (``A0001``, a slug ``abc-123``)."""
    if not isinstance(pattern, str) or len(pattern) > 4 * MAX_ID_PATTERN_CHARS:
        return False
    rx = documented_pattern(pattern)
    try:
        return rx is not None and rx.search(_A_UUID) is not None and not any(
            rx.search(x) for x in ("A0001", "a0001", "abc-123", _A_UUID[:8]))
    except Exception:  # noqa: BLE001 - a pattern that cannot run documents no style
        return False


IdStyle = Literal["uuid", "integer", "code"]


def documented_id_style(schema: dict | None) -> IdStyle | None:
    """How one documented id looks: "uuid" (``format: uuid``, a UUID pattern, a UUID example or the
    word UUID / GUID in its description), "integer" (an integer type, "the numeric id of ..."),
    "code" (a pattern ``^BK-\\d{4}$`` or an example ``'BK-1042'``), None where the doc shows nothing."""
    s = (unwrap(schema) or {}) if isinstance(schema, dict) else {}
    if json_type(s) == "array" and isinstance(s.get("items"), dict):
        s = unwrap(s["items"]) or {}
    fmt = s.get("format")
    if isinstance(fmt, str) and fmt.lower() in ("uuid", "guid"):
        return "uuid"
    if json_type(s) in ("integer", "number"):
        return "integer"
    pat = s.get("pattern")
    if _uuid_pattern(pat):
        return "uuid"
    if id_shape(pat):
        return "code"
    examples = s.get("examples") if isinstance(s.get("examples"), list) else []
    shown = [v for v in [s.get("example"), *examples[:3]] if v is not None]
    if any(isinstance(v, str) and UUID_TEXT.fullmatch(v) for v in shown):
        return "uuid"
    desc = s.get("description") if isinstance(s.get("description"), str) else ""
    if UUID_TEXT.search(desc) or _UUID_WORDS.search(desc):
        return "uuid"
    if example_id_pattern(s):
        return "code"
    if _NUMERIC_WORDS.search(desc) or any(isinstance(v, int) and not isinstance(v, bool) for v in shown):
        return "integer"
    return None


def id_style(coll: CollectionSpec) -> IdStyle:
    """The style of ``coll``'s ids: "integer" for integer-id collections, "uuid" when its key field is
    documented as a UUID (:func:`documented_id_style`), else "code" (``<prefix><digits>``)."""
    if is_integer_ids(coll):
        return "integer"
    pk = next((f for f in coll.fields if f.name == coll.primary_key), None)
    if pk is not None and documented_id_style({"type": pk.type, "format": pk.format, "pattern": pk.pattern,
                                                "description": pk.description}) == "uuid":
        return "uuid"
    return "code"


def uuid_for(collection: str, n: int) -> str:
    """The version-4 UUID of record number ``n`` of ``collection``: a hash of the two, so every process
    (and the sandbox's ``next_id`` for a new record) writes the same one."""
    return str(uuid.UUID(bytes=hashlib.sha256(f"{collection}/{n}".encode()).digest()[:16], version=4))


def make_id(coll: CollectionSpec, n: int, width: int | None = None, *, style: IdStyle | None = None) -> str:
    """The state key of record number ``n`` (1-based) of ``coll``, in its docs' style: ``"42"`` for
    integer ids, a version-4 UUID made from the collection and ``n`` for UUID ids (the same in every
    process), else the prefix and ``width`` digits (default the collection's): ``BK-0042``. ``style``:
    ``id_style(coll)``, where the caller knows it already."""
    style = style or id_style(coll)
    if style == "integer":
        return str(n)
    if style == "uuid":
        return uuid_for(coll.name, n)
    return f"{coll.id_prefix}{n:0{max(width or coll.id_width, 1)}d}"


def id_key(value: Any) -> str:
    """The state key of an id value: ids are keys as strings (``3`` -> ``"3"``; ``"T0001"`` as is)."""
    return value if isinstance(value, str) else str(value)


def id_value(coll: CollectionSpec | None, key: Any) -> Any:
    """The value a record holds for state key ``key`` of ``coll``: an int for integer-id collections."""
    if coll is not None and getattr(coll, "id_type", "string") == "integer" and isinstance(key, str) \
            and key.lstrip("-").isdigit():
        return int(key)
    return key


def is_integer_ids(coll: CollectionSpec | None) -> bool:
    return coll is not None and getattr(coll, "id_type", "string") == "integer"


def free_key(coll: CollectionSpec, table: dict, offset: int = 0, *, width: int | None = None,
             avoid: Iterable[Any] = ()) -> Any:
    """A key of ``coll`` no record in ``table`` has and not in ``avoid``, shaped like its ids
    (:func:`make_id`: ``n_0005``, ``5``, a UUID; ``width`` digits, default the collection's)."""
    n, avoid = len(table) + 1 + offset, list(avoid)
    while True:
        key = make_id(coll, n, width)
        if key not in table and id_value(coll, key) not in avoid:
            return id_value(coll, key)
        n += 1


def walk_ids(specs: list[ToolSpec]):
    """Every ``(name, schema)`` of an id-like property in parameters and output schemas."""
    def walk(schema: Any, depth: int = 0):
        s = unwrap(schema) if isinstance(schema, dict) else {}
        if depth > 5:
            return
        for k, v in props(s).items():
            if id_param_entity(k):
                yield k, v
            yield from walk(v, depth + 1)
        if isinstance(s.get("items"), dict):
            yield from walk(s["items"], depth + 1)

    for spec in specs:
        yield from walk(spec.parameters)
        yield from walk(spec.output_schema)


def known_entities(specs: list[ToolSpec], aliases: dict[str, str] | None = None) -> set[str]:
    """Entities named by id parameters or id output fields anywhere in the tool set."""
    return {id_param_entity(k, aliases) for k, _ in walk_ids(specs)} - {None}
