"""Realistic sample state for a state schema, and smoke-call arguments built from it.

Paper (arXiv 2512.22857, Sec. 3.1): generated tool code is checked by running it on a
sample state. Ours is deterministic (no RNG: values are picked by record index), a few
records per collection, with names, emails, dates around the fixed clock (2025-01-15),
amounts, statuses that cycle through the enum, and references that always point at
existing records. The same state is stored with the environment (``sample_state``) and is
what later stages start from when they instantiate task values.
"""

from __future__ import annotations

import random
import re
import string
import time
import zlib
from typing import Any

try:  # the regular-expression parser (renamed in Python 3.11)
    from re import _constants as C, _parser as sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_constants as C  # type: ignore[no-redef]
    import sre_parse  # type: ignore[no-redef]

from autoforge.domain import fakes
from autoforge.domain import values as D
from autoforge.domain.coherence import cohere
from autoforge.domain import words as nm
from autoforge.domain.fields import list_filter_field
from autoforge.domain.placeholders import placeholder_reason
from autoforge.domain.ids import free_key, person_name_fields, id_param_entity, id_shape, id_value, is_integer_ids, make_id
from autoforge.patterns import PatternError, remaining
from autoforge.tooldocs.schema import documented_pattern, json_type, unwrap
from autoforge.types import CollectionSpec, FieldSpec, StateSchema

N_RECORDS = 4  # records per collection: enough for filters to select a subset, small enough to read
MAX_ITEMS = 8  # items in a generated list, whatever minItems the docs give
MAX_VALUE_DEPTH = 32  # levels of nested objects/arrays in one generated value
# Documented patterns run on RE2 (linear time); the few that need the backtracking engine get this
# many seconds per value in all (a value that runs out keeps its text, the pattern ignored).
PATTERN_BUDGET_S = 0.05

# People, addresses, companies and countries come from the pools of autoforge.domain.fakes (Faker,
# airportsdata, pycountry), record i taking entry i: the city, state and ZIP of record i are one address.
ADJ = ["Classic", "Premium", "Compact", "Deluxe", "Essential", "Urban", "Summit", "Coastal"]
PEOPLE_ENTITIES = {"user", "customer", "employee", "member", "person", "staff", "patient", "student", "client",
                   "agent", "courier", "driver", "doctor", "guest", "passenger", "author", "contact", "owner",
                   "teacher", "instructor", "tenant", "buyer", "seller", "applicant", "candidate", "technician",
                   "vendor_contact", "physician", "nurse", "traveler", "attendee", "player", "volunteer", "account_holder"}
MONEY = ("price", "amount", "total", "cost", "fee", "balance", "salary", "budget", "payment", "fare", "rate",
         "credit", "subtotal", "tax", "refund", "deposit", "limit", "charge", "value", "revenue", "spend")
COUNTS = ("quantity", "qty", "stock", "count", "seats", "capacity", "inventory", "units", "available", "remaining",
          "nights", "guests", "points", "duration", "minutes", "hours", "days", "age", "size", "pages", "floor", "priority", "level", "year")


_CATEGORY = {C.CATEGORY_DIGIT: string.digits, C.CATEGORY_WORD: string.ascii_letters + string.digits + "_",
             C.CATEGORY_SPACE: " ", C.CATEGORY_NOT_DIGIT: string.ascii_letters,
             C.CATEGORY_NOT_SPACE: string.ascii_letters + string.digits, C.CATEGORY_NOT_WORD: "-"}
_REPEATS = tuple(getattr(C, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT") if hasattr(C, n))


def _person(i: int) -> tuple[str, str]:
    p = fakes.people()[i % len(fakes.people())]
    return p.first, p.last


def _address(i: int) -> fakes.Address:
    return fakes.addresses()[i % len(fakes.addresses())]


def _date(i: int, future: bool) -> str:
    day = 10 + (i * 4) % 18
    return f"2025-{'02' if future else '01'}-{day:02d}"


def field_value(f: FieldSpec, coll: CollectionSpec, i: int, ids: dict[str, list[str]], record: dict,
                people: frozenset[str] = frozenset()) -> Any:
    """A realistic value for field ``f`` of record number ``i`` (0-based) of ``coll``; ``people``: the fields
    that hold a person's name."""
    if f.ref and f.type != "array":
        pool = ids.get(f.ref) or []
        if not pool:
            return None
        return pool[(i + 1) % len(pool)] if f.ref == coll.name else pool[i % len(pool)]
    if f.type == "array" and f.ref and ids.get(f.ref):
        pool = ids[f.ref]
        return [pool[i % len(pool)]]
    if f.name in people:  # "owner", "manager": a person's name (ids.person_name_fields)
        return " ".join(_person(i))
    schema: dict[str, Any] = {"type": f.type}
    for key in ("enum", "format", "pattern", "minimum", "items", "properties", "description"):
        if getattr(f, key) is not None:
            schema[key] = getattr(f, key)
    return value_for(schema, f.name, i, ids, coll)


def value_for(schema: dict, name: str, i: int, ids: dict[str, list[str]], coll: CollectionSpec | None = None,
              _depth: int = 0) -> Any:
    """A realistic value for a JSON Schema (enum, const, pattern, minimum, nested objects and arrays)."""
    schema = unwrap(schema) if isinstance(schema, dict) else {}
    if _depth > MAX_VALUE_DEPTH:
        return None
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][i % len(schema["enum"])]
    typ = json_type(schema)
    e = id_param_entity(name) if name else None
    if e and typ in ("string", "integer") and ids.get(nm.plural(e)):
        pool = ids[nm.plural(e)]
        if all(isinstance(v, int) for v in pool) == (typ == "integer"):  # ids of the documented type only
            return pool[i % len(pool)]
    if typ == "object":
        props = schema.get("properties") or {}
        if not props:
            return _named_object(name, i)
        out = {k: value_for(v if isinstance(v, dict) else {}, k, i, ids, coll, _depth + 1) for k, v in props.items()}
        required = schema.get("required") if isinstance(schema.get("required"), list) else []
        for k in required:  # a required list holds something (an option group's choices), never []
            sub = props.get(k)
            if out.get(k) == [] and isinstance(sub, dict) and isinstance(sub.get("items"), dict) and sub["items"]:
                out[k] = value_for({**sub, "minItems": max(1, _count(sub.get("minItems")))}, k, i, ids, coll, _depth + 1)
        return out
    if typ == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        n = max(_count(schema.get("minItems")), 1 if (items.get("properties") or items.get("type") == "object"
                                                       or name.lower() in ("tags", "labels", "keywords")) else 0)
        return [value_for(items, nm.singular(name), i + k, ids, coll, _depth + 1) for k in range(n)]
    if typ == "boolean":
        return (i + len(name)) % 2 == 0  # the phase depends on the name, so booleans do not all agree
    if typ in ("integer", "number"):
        val = _number(name.lower(), typ, i)
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if isinstance(lo, (int, float)) and val < lo:
            val = lo
        if isinstance(hi, (int, float)) and val > hi:
            val = hi
        return int(val) if typ == "integer" else val
    entity = coll.entity if coll is not None else (nm.singular(name.split("_")[0]) if name else "item")
    dom = D.domain_for(name, schema, siblings=[f.name for f in coll.fields] if coll is not None else ())
    if dom is not None and dom.name != "url":  # a real value of the field's domain, record i's where it is a part
        text = dom.value(random.Random(zlib.crc32(f"{name}/{i}".encode())), i)
        pattern = schema.get("pattern")
        return fit_pattern(pattern, text, i) if isinstance(pattern, str) and isinstance(text, str) else text
    text = _string(name.lower(), schema.get("format"), i, entity, coll.id_prefix if coll is not None else "X",
                   coll.name if coll is not None else "items")
    hint = D.format_hint(schema.get("description") or "") if isinstance(schema.get("description"), str) else None
    if hint and not schema.get("format"):  # "YYYY-MM-DD" in the prose: a value of that shape, never the hint
        text = D.in_format(text, hint, i)
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        text = fit_pattern(pattern, text, i)
    return text


def _count(value: Any) -> int:
    """A documented item count (``minItems``) as a list length: 0 unless a number, at most MAX_ITEMS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return 0
    return int(min(max(value, 0), MAX_ITEMS))


def _named_object(name: str, i: int) -> dict:
    if "address" in name or "location" in name:
        a = _address(i)
        return {"street": a.street, "city": a.city, "state": a.state, "zip": a.zip}
    return {}


def _number(name: str, typ: str, i: int) -> float:
    if any(w in name for w in MONEY):
        if any(w in name for w in ("paid", "refunded", "discount", "spent", "used")):
            return [0.0, 45.5, 0.0, 15.75, 0.0, 72.4][i % 6]  # most records still owe / have nothing refunded
        if "balance" in name or "budget" in name or "credit" in name or "salary" in name:
            return [1500.0, 250.0, 4200.5, 80.0, 960.0, 12.5][i % 6]
        return [120.0, 45.5, 980.25, 15.75, 310.0, 72.4][i % 6]
    if "rating" in name or "score" in name:
        return [4.5, 3.8, 4.9, 2.7][i % 4] if typ == "number" else [5, 4, 3, 4][i % 4]
    if any(w in name for w in COUNTS):
        if any(w in name for w in ("stock", "available", "seats", "inventory", "remaining", "points", "capacity")):
            return [12, 3, 25, 0, 7, 40][i % 6] if "points" not in name else [1200, 300, 50, 4000][i % 4]
        return [2, 1, 4, 3][i % 4]
    if "year" in name:
        return 2018 + i
    return [10, 25, 3, 42][i % 4] if typ == "integer" else [10.5, 25.0, 3.25, 42.0][i % 4]


def _string(name: str, fmt: str | None, i: int, entity: str, prefix: str, coll_name: str) -> str:
    first, last = _person(i)
    person = entity in PEOPLE_ENTITIES
    if fmt == "email" or "email" in name:
        return fakes.people()[i % len(fakes.people())].email if person or "user" in name \
            else f"contact{i + 1}@{entity.replace('_', '')}.example.com"
    if fmt == "date-time" or name.endswith("_at") or name.endswith("_time") or "timestamp" in name:
        future = any(w in name for w in ("due", "end", "expire", "deadline", "depart", "arriv", "start", "scheduled", "check"))
        return f"{_date(i, future)}T{9 + i % 8:02d}:{(i * 15) % 60:02d}:00"
    if fmt == "date" or "date" in name or name in ("birthday", "dob", "deadline", "due", "check_in", "check_out"):
        if "birth" in name or name == "dob":
            return f"19{80 + i * 3}-0{1 + i % 9}-1{i % 9}"
        future = not any(w in name for w in ("created", "joined", "hired", "opened", "registered", "placed", "issued", "signup"))
        day = _date(i, future)
        return day if name != "check_out" else day[:-2] + f"{int(day[-2:]) + 3:02d}"
    if name in ("first_name", "firstname", "given_name"):
        return first
    if name in ("last_name", "lastname", "surname", "family_name"):
        return last
    if name in ("name", "full_name", "display_name", "username", "user_name", "contact_name", "customer_name", "patient_name",
                "holder_name", "guest_name", "passenger_name"):
        if person or any(w in name for w in ("user", "customer", "contact", "patient", "holder", "guest", "passenger")):
            return f"{first.lower()}{last.lower()}" if "user" in name and "name" in name and name != "name" else f"{first} {last}"
        if entity in ("company", "vendor", "supplier", "organization", "organisation", "restaurant", "store", "merchant"):
            return fakes.nth("company", i)
        return f"{ADJ[i % len(ADJ)]} {entity.replace('_', ' ').title()}"
    if name.endswith("_name") or name in ("title", "subject"):
        if name.endswith("_name"):
            return f"{ADJ[i % len(ADJ)]} {name[:-5].replace('_', ' ').title()}"
        return f"{ADJ[i % len(ADJ)]} {entity.replace('_', ' ')} #{i + 1}"
    if "phone" in name or "mobile" in name:
        return fakes.people()[i % len(fakes.people())].phone
    if name in ("origin", "destination", "location"):
        return _address(i + (1 if "dest" in name else 0)).city
    if "country" in name:
        return fakes.countries()[i % len(fakes.countries())][0]
    if name in ("state", "state_code", "province", "billing_state", "home_state") or name.endswith("_state_code"):
        return _address(i).state  # a US state: the state of record i's address
    if "address" in name or name == "street":
        return f"{_address(i).street}, {_address(i).city}"
    if "currency" in name:
        return "USD"
    if name in ("period", "billing_period", "month", "billing_month"):
        return f"2025-{1 + i % 12:02d}"
    if name in ("company", "company_name", "employer", "organization", "vendor", "supplier"):
        return fakes.nth("company", i)
    if name == "last4" or name.endswith("_last4"):
        return f"{4242 + i * 1111}"[-4:]
    if "code" in name or name in ("sku", "isbn", "serial_number", "reference", "confirmation") or name.endswith("_number"):
        return f"{prefix}{name[:2].upper()}-{1000 + i * 37}"
    if any(w in name for w in ("description", "note", "comment", "message", "reason", "body", "summary")):
        return f"{ADJ[i % len(ADJ)]} {entity.replace('_', ' ')} {name.replace('_', ' ')}"
    if "url" in name or "link" in name or "website" in name:
        return f"https://example.com/{coll_name}/{i + 1}"
    if "category" in name or "type" in name or "kind" in name or "class" in name:
        return ["standard", "premium", "basic", "special"][i % 4]
    if "color" in name or "colour" in name:
        return ["red", "blue", "green", "black"][i % 4]
    if "role" in name:
        return ["admin", "member", "viewer", "editor"][i % 4]
    if "department" in name or "team" in name:
        return ["Sales", "Engineering", "Support", "Finance"][i % 4]
    if name.endswith("_id"):
        return f"{name[:3].upper()}-{100 + i}"
    return f"{name.replace('_', ' ')} {i + 1}".strip()


# --------------------------------------------------------------------------- patterns


def fit_pattern(pattern: str, text: str, i: int = 0) -> str:
    """``text`` if it matches ``pattern``, else a close variant ("Seattle" -> "SEA" for ``^[A-Z]{3}$``),
    else a value generated from the pattern itself.

    The pattern runs through :mod:`autoforge.patterns` (linear time on RE2); one that cannot be used
    (:func:`~autoforge.tooldocs.schema.documented_pattern`: syntax, size) or that runs out of
    :data:`PATTERN_BUDGET_S` is ignored and ``text`` comes back."""
    rx = documented_pattern(pattern)
    if rx is None:
        return text
    shape = id_shape(pattern)
    if shape:
        return f"{shape[0]}{str(i + 1).zfill(shape[1])}"
    deadline = time.monotonic() + PATTERN_BUDGET_S
    alnum = re.sub(r"[^0-9A-Za-z]", "", text)
    cands = [text, text.upper(), text.lower(), alnum, alnum.upper()] + [alnum.upper()[:k] for k in range(1, min(len(alnum), 12) + 1)]
    anchored = pattern.startswith("^")
    try:
        for cand in cands:
            if (cand and rx.fullmatch(cand, timeout_s=remaining(deadline))) if anchored \
                    else rx.search(cand or "x", timeout_s=remaining(deadline)):
                return cand
        gen = example_for_pattern(pattern, text, i, deadline=deadline)
    except PatternError:  # PatternTimeout: a backtracking pattern ran out of its budget
        return text
    return gen if gen is not None else text


MAX_EXAMPLE_STEPS = 5_000  # tokens visited while building one example from a pattern


def example_for_pattern(pattern: str, hint: str = "", i: int = 0, *, deadline: float | None = None) -> str | None:
    """A string matching a (simple) regular expression, letters taken from ``hint`` where they fit;
    None when the pattern cannot be used or no example is found within the bounds."""
    rx = documented_pattern(pattern)  # also bounds the pattern's length before Python parses it
    if rx is None:
        return None
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # noqa: BLE001 - an unparsable pattern: no example
        return None
    letters = [c for c in hint.upper() if c.isalpha()] or list("SAMPLE")
    digits = f"2025{i + 1:02d}15"
    pos = {"l": 0, "d": 0}
    out: list[str] = []
    steps = [0]

    def allowed(av) -> list[str]:
        chars: set[str] = set()
        negate = False
        for op, val in av:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                chars.add(chr(val))
            elif op is C.RANGE:
                chars.update(chr(c) for c in range(val[0], min(val[1], 126) + 1))
            elif op is C.CATEGORY:
                chars.update(_CATEGORY.get(val, ""))
        if negate:
            chars = set(string.ascii_letters + string.digits) - chars
        return sorted(chars)

    def pick(chars: list[str]) -> str:
        for kind, pool in (("l", letters), ("d", digits)):
            c = pool[pos[kind] % len(pool)]
            if c in chars or c.lower() in chars:
                pos[kind] += 1
                return c if c in chars else c.lower()
        return chars[0] if chars else "x"

    def emit(tokens, depth=0) -> None:
        if depth > 20 or len(out) > 200:
            return
        for op, av in tokens:
            steps[0] += 1  # nested repeats of empty groups ((?:(?:){50}){50}...) emit nothing: count visits
            if steps[0] > MAX_EXAMPLE_STEPS:
                return
            if op is C.LITERAL:
                out.append(chr(av))
            elif op is C.NOT_LITERAL:
                out.append("x" if chr(av) != "x" else "y")
            elif op is C.ANY:
                out.append("x")
            elif op is C.IN:
                out.append(pick(allowed(av)))
            elif op is C.CATEGORY:
                out.append(pick(list(_CATEGORY.get(av, "x"))))
            elif op in _REPEATS:
                lo, hi, sub = av
                n = lo if lo > 0 else (1 if hi != 0 else 0)
                for _ in range(min(n, 50)):
                    emit(sub, depth + 1)
            elif op is C.SUBPATTERN:
                emit(av[-1], depth + 1)
            elif op is C.BRANCH:
                emit(av[1][0], depth + 1)

    emit(parsed)
    text = "".join(out)
    try:
        return text if rx.search(text, timeout_s=remaining(deadline) if deadline is not None else None) else None
    except PatternError:
        return None


def sample_state(schema: StateSchema, n: int | None = None) -> dict[str, dict[str, dict]]:
    """``n`` records per collection (default: 4, or more so every status of the longest status
    enum appears once, at most 8), deterministic, one coherent world (:func:`~autoforge.domain.coherence.cohere`)."""
    if n is None:
        longest = max((len(f.enum or []) for c in schema.collections for f in c.fields if f.name == "status"), default=0)
        n = max(N_RECORDS, min(8, longest))
    keys = {c.name: [make_id(c, k + 1) for k in range(1 if c.session else n)] for c in schema.collections}
    ids = {c.name: [id_value(c, k) for k in keys[c.name]] for c in schema.collections}  # integer ids: 1, 2 ...
    state: dict[str, dict[str, dict]] = {}
    people = person_name_fields(schema)
    for c in schema.collections:
        table: dict[str, dict] = {}
        for i, rid in enumerate(keys[c.name]):
            record: dict[str, Any] = {}
            for f in c.fields:
                record[f.name] = ids[c.name][i] if f.name == c.primary_key else field_value(f, c, i, ids, record, people)
            table[rid] = record
        state[c.name] = table
    return cohere(state, schema)  # links both ways, derived numbers, dates in order


# --------------------------------------------------------------------------- smoke arguments


def collection_for(param: str, schema: StateSchema, main: str | None) -> CollectionSpec | None:
    """The collection an id parameter points at (by name, or via a referencing field of that name)."""
    e = id_param_entity(param)
    if e is None and nm.snake(param) == "id" and main:
        return next((c for c in schema.collections if c.name == main), None)
    if e is None:
        return None
    found = next((c for c in schema.collections if c.entity == e), None)
    if found is None:
        sp = nm.snake(param)
        ordered = sorted(schema.collections, key=lambda c: c.name != main)
        ref = next((f.ref for c in ordered for f in c.fields if f.name == sp and f.ref), None)
        found = next((c for c in schema.collections if c.name == ref), None)
    return found


def sample_arguments(parameters: dict, state: dict, schema: StateSchema, main: str | None = None,
                     record_index: int = 0, fresh: bool = False) -> dict[str, Any]:
    """Arguments for a smoke call, built from the tool's JSON Schema.

    Values that exist in ``state`` are preferred (real ids, emails, statuses of record
    ``record_index`` of the main collection), so the smoke call exercises the success path;
    optional parameters are only filled when such a value exists. ``fresh`` (tools that create
    records): only ids come from the state; other values are new (an unused email ...)."""
    props = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or [])
    main_coll = next((c for c in schema.collections if c.name == main), None)
    main_rec = _nth(state.get(main, {}), record_index) if main else None
    args: dict[str, Any] = {}
    used_ids: dict[str, int] = {}
    by_name = {c.name: c for c in schema.collections}
    ids = {name: [id_value(by_name.get(name), k) for k in sorted(table)] for name, table in state.items()
           if isinstance(table, dict)}
    for p, ps in props.items():
        ps = ps if isinstance(ps, dict) else {}
        if fresh and main_coll is not None and nm.snake(p) in ("id", main_coll.primary_key):
            if p in required:  # the caller names the new record (``notes_add(key)``): a key not taken yet
                args[p] = free_key(main_coll, state.get(main_coll.name) or {}, record_index)
            continue  # a create's own optional id: leave it to next_id (a taken one is refused)
        value, found = _from_state(p, ps, state, schema, main_coll, None if fresh else main_rec, used_ids, record_index)
        if found or p in required:
            args[p] = value if found else schema_value(ps, p, i=len(state.get(main) or {}) + record_index, ids=ids)
    return args


def _nth(table: dict, i: int) -> dict | None:
    keys = sorted(table)
    return table[keys[i % len(keys)]] if keys else None


def _from_state(p, ps, state, schema, main_coll, main_rec, used_ids, idx) -> tuple[Any, bool]:
    typ = ps.get("type")
    if "enum" in ps and ps["enum"]:
        if main_rec is not None and nm.snake(p) in main_rec and main_rec[nm.snake(p)] in ps["enum"]:
            return main_rec[nm.snake(p)], True
        return ps["enum"][0], True
    coll = collection_for(p, schema, main_coll.name if main_coll else None)
    if coll is not None and state.get(coll.name):
        keys = [id_value(coll, k) for k in sorted(state[coll.name])]
        if typ == "array":
            return [keys[idx % len(keys)]], True
        if typ not in (None, "string") and not (typ in ("integer", "number") and is_integer_ids(coll)):
            return None, False
        k = used_ids.get(coll.name, idx)
        used_ids[coll.name] = k + 1  # transfer(from_id, to_id): two different records
        if main_rec is not None and main_coll is not None and coll.name != main_coll.name and nm.snake(p) in main_rec \
                and main_rec[nm.snake(p)] is not None and str(main_rec[nm.snake(p)]) in state[coll.name]:
            return main_rec[nm.snake(p)], True
        return keys[k % len(keys)], True
    if main_rec is not None and main_coll is not None:
        sp = nm.snake(p)
        how = list_filter_field(sp, main_rec)
        fname = how[0] if how else sp
        for cand in (sp, sp[4:] if sp.startswith("new_") else None, fname):
            if cand and cand in main_rec and main_rec[cand] is not None and _fits(main_rec[cand], ps):
                if how and how[1] in ("min", "max", "in", "text"):
                    break
                return main_rec[cand], True
        if how and how[1] == "contains" and isinstance(main_rec.get(how[0]), str) and main_rec[how[0]]:
            return main_rec[how[0]].split()[0].lower(), True
    return None, False


def _fits(value: Any, ps: dict) -> bool:
    pattern = ps.get("pattern")
    if isinstance(value, str) and isinstance(pattern, str):
        rx = documented_pattern(pattern)
        try:
            if rx is not None and rx.search(value, timeout_s=PATTERN_BUDGET_S) is None:
                return False  # a record value the parameter's documented pattern rejects
        except PatternError:
            pass  # a pattern that runs out of time is ignored like one that cannot be used
    t = ps.get("type")
    if t in (None, "string"):
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    if t == "array":
        return isinstance(value, list)
    if t == "object":
        return isinstance(value, dict)
    return False


def schema_value(ps: dict, name: str = "", i: int = N_RECORDS, ids: dict[str, list[str]] | None = None) -> Any:
    """A realistic value of the right JSON type for parameter ``name`` (``i``: which sample
    person/date/amount; the default is one past the sample records, i.e. a *new* value)."""
    ps = ps if isinstance(ps, dict) else {}
    if "default" in ps and ps["default"] is not None and placeholder_reason(ps["default"]) is None:
        return ps["default"]  # a documented default, unless it is a hint such as "YYYY-MM-DD"
    return value_for(ps, name, i, ids or {}, None)
