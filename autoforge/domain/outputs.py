"""Outputs said in prose: the fields a "Returns ..." sentence names, for docs without an output schema.

Most real tool docs give no output schema; they say what comes back in a sentence ("Returns the
class with its start time and remaining spots", "Each teacher comes with their teacher_id, name
and hourly rate") or in a ``returns`` field that the parsers fold into the description as a
"Returns ..." sentence. :func:`prose_output` reads that sentence into :class:`ProseOutput`: the
field names it lists (snake_case, ``<entity>_id`` for "its id") with a JSON type guessed from the
words ("price" a number, "seats left" an integer, "whether they have a monitor" a boolean), and
the phrases that name other records ("the books it contains", "its desk"), which state inference
(:mod:`autoforge.domain.state`) turns into references when the tool set has such an entity.

An output object may also be a mapping of records rather than one record: "A dictionary keyed by
booking_id where each value contains the booking details", "a map from order ID to order", or an
object whose ``additionalProperties`` give the values' schema. :func:`keyed_by` reads the key
such an object is keyed by and :func:`keyed_values` the schema of its values.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from autoforge.domain import words as nm

# The sentence that says what a tool returns, and what follows its verb.
_RETURNS = re.compile(
    r"(?:^|(?<=[.;!?]\s)|(?<=\n))\s*(?:it\s+|this\s+(?:call|endpoint|tool)\s+)?"
    r"(?:returns?|responds\s+with|gives\s+back|yields|outputs?)\s*:?\s+(?P<what>[^.;\n]+)",
    re.I)
# "Each teacher comes with their teacher_id, name ...": the fields of every listed record.
_EACH = re.compile(r"\beach\s+(?P<noun>[a-z ]+?)\s+(?:comes|is\s+returned|is\s+listed)\s+with\s+(?P<what>[^.;\n]+)", re.I)
_MANY = re.compile(r"^(?:a\s+list\s+of|the\s+list\s+of|lists?\s+of|all(?:\s+the)?|every|matching|the\s+matching|"
                   r"any|zero\s+or\s+more)\b", re.I)
# Where the record's noun ends and its fields begin.
_WITH = re.compile(r",?\s*(?:each|every\s+one)?\s*(?:together\s+)?(?:with|including|containing|showing|listing)\s+"
                   r"(?:all\s+of\s+)?(?:its|their|his|her|the)?\s*", re.I)
_POSSESSIVE = re.compile(r"^(?:the\s+)?(?:new\s+|updated\s+|matching\s+)?(?P<owner>[a-z]+(?:\s[a-z]+)?)'s\s+(?P<rest>.+)$", re.I)
_DETERMINERS = ("all of its ", "all of their ", "all its ", "all their ", "the ", "its ", "their ", "his ", "her ",
                "a ", "an ", "each ", "any ", "every ", "the new ", "new ")
# Words after which a phrase is a clause about the thing, not part of its name.
_CLAUSE = {"it", "they", "them", "that", "which", "who", "there", "where", "when", "if", "for", "on", "at", "to",
           "from", "by", "in", "is", "are", "was", "were", "as", "so", "(", "e.g", "docked", "registered",
           "assigned", "attached", "belonging", "linked", "booked", "held", "made", "placed", "left"}
_KEEP_LEFT = {"seats", "spots", "places", "credits", "days", "minutes", "hours", "copies", "items", "slots", "tickets"}
COUNT_WORDS = {"count", "number", "quantity", "qty", "credits", "points", "seats", "spots", "places", "capacity",
               "servings", "copies", "docks", "compartments", "minutes", "days", "age", "year", "stock",
               "stars", "votes", "views", "attempts", "rating", "rank", "level", "floor", "pages", "size_count",
               "nights", "guests", "remaining", "available", "left", "duration"}
MONEY_WORDS = {"price", "total", "fare", "balance", "amount", "cost", "fee", "fees", "rate", "subtotal", "tax",
               "discount", "salary", "refund", "deposit", "charge", "revenue", "budget", "weight", "distance",
               "score", "percent", "percentage", "latitude", "longitude"}
DATE_WORDS = {"date", "deadline", "birthday", "dob", "due"}
LIST_WORDS = {"items", "ingredients", "tags", "lines", "entries", "instruments", "prerequisites", "attendees",
              "participants", "passengers", "steps", "skills", "labels", "amenities", "features", "languages"}


# "keyed by booking_id", "indexed by the order ID", "a dictionary/map/mapping from user_id to ...".
_KEY_NAME = r"[`'\"]?(?P<key>[A-Za-z][A-Za-z0-9_]*(?:\s+(?:id|ID|Id|key|name|code))?)[`'\"]?"
_KEYED_BY = re.compile(rf"\b(?:keyed|indexed)\s+by\s+(?:the\s+|their\s+|its\s+|each\s+)?{_KEY_NAME}")
_MAP_FROM = re.compile(rf"\b(?:dictionary|dict|map|mapping|object)\s+(?:from|of)\s+(?:the\s+|each\s+)?{_KEY_NAME}\s+to\b",
                       re.I)


def keyed_by(schema: object) -> str | None:
    """The key (snake_case) an output object of records is keyed by, from its description ("keyed
    by booking_id", "indexed by the order ID" -> ``order_id``, "a map from user_id to ..."); ``""``
    for an object whose values share one object schema (``additionalProperties``) but whose
    description names no key; None for a plain object (one record, its fields as properties)."""
    if not isinstance(schema, dict) or schema.get("type") not in ("object", None):
        return None
    desc = schema.get("description") if isinstance(schema.get("description"), str) else ""
    m = _KEYED_BY.search(desc) or _MAP_FROM.search(desc)
    if m:
        return nm.snake(m.group("key"))
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and (extra.get("properties") or extra.get("type") == "object") and not schema.get("properties"):
        return ""
    return None


def keyed_values(schema: dict) -> dict:
    """The schema of one value of a :func:`keyed_by` mapping: its ``additionalProperties`` object
    when given, else the properties it lists (the docs describe one value's fields)."""
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and (extra.get("properties") or extra.get("type") == "object"):
        return extra
    return {"type": "object", "properties": schema.get("properties") or {}}


@dataclass
class ProseField:
    """One field a returns sentence names: its snake_case name and a JSON Schema guessed from the words."""

    name: str
    schema: dict
    noun: str | None = None  # the head noun when the phrase may name another record ("books", "desk")


@dataclass
class ProseOutput:
    """What a tool's prose says it returns: one record or a list of them, and the fields named."""

    many: bool = False
    noun: str | None = None  # the record's noun ("station", "teacher"), when the sentence names it
    fields: list[ProseField] = field(default_factory=list)


def returns_sentences(text: str) -> list[tuple[str, str | None]]:
    """The parts of ``text`` that say what comes back (after "Returns", "Each X comes with"), each
    with the noun of an "each X comes with" sentence (else None)."""
    found = [(m.group("what").strip(), m.group("noun").strip()) for m in _EACH.finditer(text or "")]
    return found + [(m.group("what").strip(), None) for m in _RETURNS.finditer(text or "")]


def _strip_det(phrase: str) -> str:
    p = phrase.strip().strip(",").strip()
    changed = True
    while changed:
        changed = False
        for d in _DETERMINERS:
            if p.lower().startswith(d):
                p, changed = p[len(d):].strip(), True
    return p


def _items(text: str) -> list[str]:
    # "start and end times" -> "start time, end time"; "the date and time" stays two items
    text = re.sub(r"\b(\w+) and (\w+) (times|dates|stations|addresses|locations|prices|names)\b",
                  lambda m: f"{m.group(1)} {nm.singular(m.group(3))}, {m.group(2)} {nm.singular(m.group(3))}", text)
    parts = re.split(r",\s*(?:and\s+|or\s+)?|\s+and\s+|\s+as\s+well\s+as\s+|\s*&\s*", text)
    return [p for p in (x.strip() for x in parts) if p]


def _field(phrase: str, entity: str | None) -> ProseField | None:
    """One listed phrase -> a field: "the number of copies in stock" -> copies_in_stock (integer)."""
    raw = phrase.strip()
    m = re.match(r"whether\s+(?:it|they|the\s+\w+)\s+(has|have|is|are|can)\s+(?:a\s+|an\s+)?(.+)$", raw, re.I)
    if m:
        verb = {"have": "has", "are": "is"}.get(m.group(1).lower(), m.group(1).lower())
        name = nm.snake(f"{verb} {' '.join(m.group(2).split()[:2])}")
        return ProseField(name, {"type": "boolean"}) if nm.is_identifier(name) else None
    if re.match(r"whether\b", raw, re.I):
        return None  # "whether each is checked off": about the items, not this record
    unit = re.search(r"\bin\s+(?:seconds|minutes|hours|days|weeks|months|years)\b", raw, re.I)  # "prep time in minutes"
    p = _strip_det(raw)
    p = re.sub(r"^(?:the\s+)?(?:number|count|amount)\s+of\s+", "# ", p, flags=re.I)
    counted = p.startswith("# ")
    p = p.lstrip("# ").strip()
    if re.match(r"status\b", p, re.I):
        return ProseField("status", {"type": "string"})
    toks = [t for t in re.split(r"\s+", p) if t]
    kept: list[str] = []
    for t in toks:
        low = t.lower().strip("'\"")
        if kept and low in _CLAUSE and not (low == "left" and kept[-1].lower() in _KEEP_LEFT):
            if low == "in" and kept and kept[-1].lower() in ("copies", "items", "units"):
                kept.append(t)  # "copies in stock": one name
                continue
            break
        kept.append(t)
    if not kept or len(kept) > 4:
        return None
    name = nm.snake("_".join(kept))
    if not name or not nm.is_identifier(name) or name[0].isdigit():
        return None
    if name == "id" or name == "ids":
        name = f"{entity}_id" if entity else "id"
    ws = name.split("_")
    noun = ws[-1] if len(ws) <= 3 and not counted else None
    if counted or unit or ws[-1] in COUNT_WORDS or ws[0] in ("remaining", "available", "free", "total_number"):
        schema = {"type": "integer"} if not (set(ws) & MONEY_WORDS) else {"type": "number"}
    elif set(ws) & MONEY_WORDS:
        schema = {"type": "number"}
    elif ws[0] in ("is", "has", "can"):
        schema = {"type": "boolean"}
    elif ws[-1] in DATE_WORDS or name.endswith("_on"):
        schema = {"type": "string", "format": "date"}
    elif ws[-1] == "at" or ws[-1] == "timestamp":
        schema = {"type": "string", "format": "date-time"}
    elif ws[-1] in LIST_WORDS:
        schema = {"type": "array", "items": {"type": "string"}}
    else:
        schema = {"type": "string"}
    return ProseField(name, schema, noun)


def prose_output(text: str, entity: str | None = None) -> ProseOutput | None:
    """The fields a tool's description says it returns, or None when it says nothing readable.

    ``entity`` is the tool's main entity (``order`` for get_order): "its id" becomes ``order_id``,
    "the order's id" too. The sentence forms read: "Returns X with its A, B and C", "Returns a
    list of Xs, each with A and B", "Returns the X's A, B and C", "Returns A, B and C" (a
    ``returns`` field), "Each X comes with A and B".
    """
    best = None
    for what, each_noun in returns_sentences(text):
        out = _read(what, each_noun, entity)
        if out and out.fields and (best is None or len(out.fields) > len(best.fields)):
            best = out
    return best


def _read(what: str, each_noun: str | None, entity: str | None) -> ProseOutput | None:
    out = ProseOutput(noun=nm.singular(nm.snake(each_noun)) if each_noun else None, many=bool(each_noun))
    what = re.sub(r"\s*\((?:[^()]*)\)", "", what).strip()
    if _MANY.match(what):
        out.many = True
        what = _MANY.sub("", what, count=1).strip()
    parts = _WITH.split(what, maxsplit=1)
    if len(parts) == 2:
        head, listed = parts
        head = _strip_det(head)
        if head and len(head.split()) <= 3:
            hw = nm.snake(head).split("_")
            out.noun = out.noun or nm.singular(hw[-1])
            if nm.is_plural(hw[-1]) and hw[-1] not in ("status",):
                out.many = True
    else:
        m = _POSSESSIVE.match(what)
        if m:
            out.noun = nm.singular(nm.snake(m.group("owner")).split("_")[-1])
            listed = m.group("rest")
        elif len(_items(what)) >= 2 or "_" in what or re.search(r"[a-z][A-Z]", what):
            listed = what  # a bare list: "ownerId, name, email and the dogs registered to them"
        else:
            return None  # "the updated order": a record, no fields named
    ent = out.noun or entity  # "the customer's id": the record the sentence names
    for item in _items(listed):
        f = _field(item, ent)
        if f and all(f.name != g.name for g in out.fields):
            out.fields.append(f)
    return out if out.fields else None


# "Get the owner of the environment", "Fetches the manager of an employee": one field of one record.
_OF_READ = re.compile(r"^\s*(?:gets?|fetch(?:es)?|retrieves?|looks?\s+up|finds?|shows?|returns?)\s+the\s+(?P<x>[a-z]+(?:\s[a-z]+)?)\s+of\s+"
                      r"(?:the|an?|this|that|a\s+given)\s+(?P<e>[a-z]+(?:\s[a-z]+)?)\s*(?:[.;]|$)", re.I)


def field_of_read(text: str) -> tuple[str, str] | None:
    """What a read that names one field of one record returns: "Get the owner of the environment" ->
    ``("owner", "environment")``; None for anything else (and for words that name no field: "the
    details of", "the status of" is read by the status vocabulary)."""
    m = _OF_READ.match(text or "")
    if not m:
        return None
    x, e = nm.snake(m.group("x")), nm.singular(nm.snake(m.group("e")))
    if not x or not e or x.split("_")[-1] in nm.NAME_SUFFIXES or x.split("_")[0] in ("number", "count", "list"):
        return None
    return x, e


def said_status(text: str, statuses: list[str]) -> str | None:
    """The status a returns sentence gives the record, among ``statuses``: "Returns the booked
    lesson", "the new reservation with status confirmed", "the enrollment with status 'dropped'"."""
    for what, _ in returns_sentences(text):
        low = what.lower()
        for s in statuses:
            word = re.escape(str(s).replace("_", " "))
            if re.search(rf"^(?:the\s+|a\s+|an\s+)?(?:new\s+|newly\s+)?{word}\s+[a-z]", low) or \
                    re.search(rf"\bstatus\s+(?:of\s+|set\s+to\s+|is\s+)?['\"`]?{word}\b", low):
                return s
    return None
