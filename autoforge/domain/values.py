"""Value domains: what values a field or an argument can take, inferred from the documentation.

Synthesized state and task arguments draw from these domains instead of from generic words, so
a US state is a US state ("WA", not "archived"), a country a real one (ISO 3166), an airport field
a real IATA code, a currency an ISO 4217 code, a VIN a VIN, a birth date lies in the past, and a
documented vocabulary ("one of 'economy', 'business' or 'first'") is kept. The real values come
from pools built once per process from Faker, airportsdata and pycountry (:mod:`autoforge.domain.fakes`).
The parts of one record agree: :meth:`Domain.value` with a record key (a person, a record number)
takes the city, state and ZIP of one address, and the city beside an airport code is that
airport's city. The signals, in order: an explicit ``enum``; the vocabulary or
example a description quotes; the field's name and its neighbours (``state`` beside ``city`` and
``zip`` is a region, ``state`` beside ``status`` words is not); a date or time format the
description states ("MM/DD/YYYY"); the JSON Schema ``format`` and ``pattern``. :func:`domain_for` returns None where nothing is known, and callers keep their own
defaults. :func:`order_pairs` puts paired dates in order (start before end, check-in before
check-out). Pure functions; deterministic given the caller's ``random.Random``.
"""

from __future__ import annotations

import random
import re
import uuid
from dataclasses import dataclass
from functools import lru_cache
from datetime import date, timedelta
from typing import Any, Callable, Iterable

from autoforge.domain import fakes

BIRTH_FIRST, BIRTH_LAST = date(1950, 1, 1), date(2004, 12, 31)  # adults, born well before the tools' 2025 clock

# ``start`` -> ``end`` name pairs whose values must be ordered (dates, times, or numbers of the same kind)
PAIR_WORDS = [("start", "end"), ("check_in", "check_out"), ("checkin", "checkout"), ("departure", "return"),
              ("depart", "return"), ("from", "to"), ("begin", "finish"), ("pickup", "dropoff"), ("pick_up", "drop_off"),
              ("min", "max"), ("valid_from", "valid_to"), ("open", "close"),
              ("departure", "arrival"), ("depart", "arrive")]

_QUOTED = re.compile(r"""['"`‘’“”]([^'"`‘’“”\n]{1,40})['"`‘’“”]""")
_VOCAB_CUE = re.compile(r"\b(?:one of|options?|either|allowed|valid values?|possible values?|can be|must be|accepted|"
                        r"choices?|values?:|enum|such as|for example|like)\b|\be\.g\.", re.IGNORECASE)
# "Options are: economy, business, first." / "Here are the options: read_write, read, write"
_COLON_LIST = re.compile(r"\b(?:options?|values?|choices?|one of|either)\b[^:.]{0,20}:\s*([\w-]+(?:\s*(?:,|\bor\b|\band\b|/)\s*[\w-]+){1,9})",
                         re.IGNORECASE)
# "Claim can be in Open or Closed state." / "The order can be pending, shipped or delivered status"
_STATE_LIST = re.compile(r"\bcan be(?:\s+in|\s+either|\s+one of)?\s+((?:[A-Za-z][\w-]*\s*,\s*)*[A-Za-z][\w-]*,?\s+or\s+"
                         r"[A-Za-z][\w-]*)\s+(?:state|states|status|statuses)\b", re.IGNORECASE)
_EXAMPLE_CUE = re.compile(r"\b(?:such as|for example|like|format)\b|\be\.g\.", re.IGNORECASE)
_PAREN_LIST = re.compile(r"\(([A-Za-z][\w ]{0,20}(?:\s*[,/|]\s*[A-Za-z][\w ]{0,20}){1,9})\)")


@dataclass(frozen=True)
class Domain:
    """A named value domain and how to draw from it."""

    name: str
    draw: Callable[[random.Random], Any]
    values: tuple = ()  # a finite vocabulary, when the domain is one
    pick: Callable[[Any], Any] | None = None  # the value for a record key: the parts of one record agree

    def value(self, rng: random.Random, key: Any = None) -> Any:
        """A value drawn with ``rng``; with a record ``key`` (a person, a record number) the value of
        that record, where the domain is one part of a whole (an address's city, an airport's city)."""
        return self.pick(key) if self.pick is not None and key is not None else self.draw(rng)


def _choice(name: str, values: Iterable[Any]) -> Domain:
    vals = tuple(values)
    return Domain(name, lambda rng: rng.choice(vals), vals)


@lru_cache(maxsize=4096)
def _words(name: str) -> tuple[str, ...]:
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return tuple(w for w in re.split(r"[^a-zA-Z0-9]+", s.lower()) if w)


def quoted_vocabulary(description: str) -> list[str]:
    """The values a description lists as the choices of a field ("one of 'a', 'b' or 'c'",
    "(economy, business, first)"); [] when it lists fewer than two or gives no cue."""
    text = description or ""
    if not _VOCAB_CUE.search(text) and not _PAREN_LIST.search(text):
        return []
    vals = [v.strip() for v in _QUOTED.findall(text) if v.strip()]
    if len(vals) < 2:
        m = _PAREN_LIST.search(text)
        vals = [v.strip() for v in re.split(r"\s*[,/|]\s*", m.group(1))] if m else []
    if len(vals) < 2:
        m = _COLON_LIST.search(text) or _STATE_LIST.search(text)
        vals = [v.strip() for v in re.split(r"\s*(?:,|\bor\b|\band\b|/)\s*", m.group(1)) if v.strip()] if m else []
    vals = list(dict.fromkeys(v for v in vals if len(v.split()) <= 3 and not v.endswith((".", ":"))
                              and not _FORMAT_PARTS.fullmatch(v)))  # "(MM/DD/YYYY)" is a format, not choices
    return vals if len(vals) >= 2 else []


def example_value(description: str) -> str | None:
    """One example a description gives for an identifier-like value ("such as 'INV-00042'")."""
    if not _EXAMPLE_CUE.search(description or ""):
        return None
    for v in _QUOTED.findall(description or ""):
        if re.fullmatch(r"[A-Za-z]{0,6}[-_]?\d{2,10}|[A-Z0-9]{2,12}(-[A-Z0-9]{2,12})*", v) and any(ch.isdigit() for ch in v):
            return v
    return None


def like_example(example: str) -> Domain:
    """Values shaped like ``example``: letters and separators kept, every digit redrawn."""

    def draw(rng: random.Random) -> str:
        return "".join(str(rng.randint(0, 9)) if ch.isdigit() else ch for ch in example)

    return Domain(f"like:{example}", draw)


# A date or time format a description gives ("YYYY-MM-DD", "MM/DD/YYYY", "HH:MM", "YYYY-MM-DDTHH:MM:SSZ")
_FORMAT_HINT = re.compile(r"(?<![A-Za-z])(?:YYYY|DD|MM|HH|hh)(?:[-/:. T](?:YYYY|YY|MM|DD|HH|hh|mm|SS|ss)|Z)+(?![A-Za-z])")
_FORMAT_PARTS = re.compile(r"YYYY|YY|MM|DD|HH|hh|mm|SS|ss")
HINT_FIRST = date(2025, 1, 1)  # the tools' clock year: where a drawn date in a documented format starts


def format_hint(text: str) -> str | None:
    """The first date or time format template a description states ("in YYYY-MM-DD format"), or None."""
    m = _FORMAT_HINT.search(text or "")
    return m.group(0) if m else None


def render_format(template: str, day: date, hour: int = 10, minute: int = 30, second: int = 0) -> str:
    """``day`` and a time written in ``template`` (``MM`` after an ``HH`` is minutes, as people write it)."""
    out, pos, seen_hour = [], 0, False
    for m in _FORMAT_PARTS.finditer(template):
        out.append(template[pos:m.start()])
        tok = m.group(0)
        if tok in ("HH", "hh"):
            seen_hour = True
        out.append({"YYYY": f"{day.year:04d}", "YY": f"{day.year % 100:02d}", "DD": f"{day.day:02d}",
                    "HH": f"{hour:02d}", "hh": f"{(hour - 1) % 12 + 1:02d}", "mm": f"{minute:02d}",
                    "SS": f"{second:02d}", "ss": f"{second:02d}",
                    "MM": f"{minute:02d}" if seen_hour else f"{day.month:02d}"}[tok])
        pos = m.end()
    out.append(template[pos:])
    return "".join(out)


def fits_format(value: str, template: str) -> bool:
    """Whether ``value`` is written in ``template`` (each token a run of that many digits)."""
    rx = re.escape(template)
    for tok in sorted(set(_FORMAT_PARTS.findall(template)), key=len, reverse=True):
        rx = rx.replace(tok, r"\d{%d}" % len(tok))
    return re.fullmatch(rx, value or "") is not None


def in_format(value: str, template: str, i: int = 0) -> str:
    """``value`` if it fits ``template``; else its ISO date (or a date picked by ``i``) written in it."""
    if fits_format(value, template):
        return value
    m = re.match(r"(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}))?", value or "")
    try:
        day = date(int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else HINT_FIRST + timedelta(days=(i * 37) % 365)
    except ValueError:
        day = HINT_FIRST + timedelta(days=(i * 37) % 365)
    hour, minute = (int(m.group(4)), int(m.group(5))) if m and m.group(4) else (9 + i % 8, (i * 15) % 60)
    return render_format(template, day, hour, minute)


def _random_date(rng: random.Random, first: date, last: date) -> str:
    return (first + timedelta(days=rng.randint(0, (last - first).days))).isoformat()


def domain_for(name: str, schema: dict | None = None, *, siblings: Iterable[str] = (), description: str = "") -> Domain | None:
    """The domain of a field or argument named ``name`` (JSON Schema ``schema``, neighbouring field
    names ``siblings``, extra ``description`` text), or None when the docs say nothing specific."""
    schema = schema if isinstance(schema, dict) else {}
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return _choice("enum", schema["enum"])
    typ = schema.get("type")
    typ = next((t for t in typ if t != "null"), None) if isinstance(typ, list) else typ
    text = " ".join(x for x in (schema.get("description") or "", description) if isinstance(x, str))
    fmt = schema.get("format") if isinstance(schema.get("format"), str) else None
    return _domain(name, typ if isinstance(typ, str) else None, text, schema.get("maxLength"), tuple(siblings), fmt)


# Words of a field name that say which part of an address or an airport it is; the other words are
# its role ("billing_city" and "billing_zip": one billing address; "origin" and "origin_city": one airport).
_PART_WORDS = {"address", "street", "line", "line1", "line2", "1", "2", "city", "town", "state", "province", "region",
               "zip", "zipcode", "postal", "postcode", "code", "country", "name", "airport", "iata", "iso", "full"}
_NOT_POSTAL = {"email", "ip", "mac", "wallet", "contract", "web", "url", "server", "network", "memory", "bitcoin",
               "eth", "ipv4", "ipv6", "hardware", "sender", "recipient", "from", "to", "reply"}
_AIRPORT_ROLES = ("origin", "destination", "from", "to", "departure", "arrival")


def _role(words: tuple[str, ...]) -> str:
    return "_".join(w for w in words if w not in _PART_WORDS)


def _address_domain(name: str, part: str, role: str) -> Domain:
    """One part of a US address (``street``, ``city``, ``state``, ``state_name``, ``zip``, ``line``:
    the whole address on one line); records with one key get the parts of one address."""
    def get(a: fakes.Address) -> str:
        if part == "line":
            return f"{a.street}, {a.city}, {a.state} {a.zip}"
        return getattr(a, part)

    return Domain(name, lambda rng: get(fakes.addresses()[rng.randrange(len(fakes.addresses()))]),
                  pick=lambda key: get(fakes.keyed(fakes.addresses(), key, role)))


def _airport_domain(name: str, part: str, role: str) -> Domain:
    """One attribute of a real airport (``code``, ``city``, ``country``, ``tz``); one key, one airport per role."""
    return Domain(name, lambda rng: getattr(fakes.airports()[rng.randrange(len(fakes.airports()))], part),
                  pick=lambda key: getattr(fakes.keyed(fakes.airports(), key, role), part))


def _pool_domain(name: str, pool: Callable[[], tuple]) -> Domain:
    return Domain(name, lambda rng: pool()[rng.randrange(len(pool()))], pick=lambda key: fakes.keyed(pool(), key, name))


def random_uuid(rng: random.Random) -> str:
    """A version-4 UUID from ``rng`` (reproducible from the seed, unlike :func:`uuid.uuid4`)."""
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _hinted_date(rng: random.Random, hint: str, first: date, days: int) -> str:
    return render_format(hint, first + timedelta(days=rng.randint(0, days)), rng.randint(8, 18), rng.choice((0, 15, 30, 45)))


@lru_cache(maxsize=8192)
def _domain(name: str, typ: str | None, text: str, max_length: Any, siblings: tuple[str, ...],
            fmt: str | None = None) -> Domain | None:
    """:func:`domain_for` on hashable inputs (drawing values is hot: every leaf of every task state)."""
    words = _words(name)
    sib = {w for s in siblings for w in _words(s)}
    low = text.lower()
    if typ in (None, "string"):
        vocab = quoted_vocabulary(text)
        if vocab and not any(w in words for w in ("id", "name", "email", "description")):
            return _choice("documented", vocab)
        ex = example_value(text)
        if ex and ("id" in words or "number" in words or "code" in words or "reference" in words):
            return like_example(ex)
        if fmt in ("uuid", "guid"):
            return Domain("uuid", random_uuid)
        birth = "birth" in words or "dob" in words or "birthday" in words or "born" in low
        hint = format_hint(text) if fmt in (None, "date", "date-time", "time") else None  # the prose template is the more exact
        if hint:  # "MM/DD/YYYY" in the prose: a date (or time) of that shape, never the hint itself
            first, days = (BIRTH_FIRST, (BIRTH_LAST - BIRTH_FIRST).days) if birth else (HINT_FIRST, 364)
            return Domain(f"format:{hint}", lambda rng: _hinted_date(rng, hint, first, days))
        if birth:
            return Domain("birth_date", lambda rng: _random_date(rng, BIRTH_FIRST, BIRTH_LAST))
        role = _role(words)
        airporty = "airport" in words or "iata" in words or "iata" in low or "airport" in low and any(
            w in words for w in _AIRPORT_ROLES) or words in (("origin",), ("destination",)) and (
            "flight" in sib or "flight" in low)  # a flight's origin is an airport
        if airporty and not words[-1:] in (("name",), ("city",), ("country",)):
            return _airport_domain("airport", "code", role)
        near_airport = "airport" in sib or "iata" in sib or "airport" in low
        if words[-1:] in (("city",), ("town",)) and near_airport:
            return _airport_domain("airport_city", "city", role)  # the city of the airport beside it
        if words[-1:] in (("timezone",), ("tz",)) or words[-2:] == ("time", "zone"):
            return _airport_domain("timezone", "tz", role)
        addressy = {"city", "zip", "zipcode", "postal", "postcode", "street", "address"} & (sib | set(words))
        if "country" in words:
            two = max_length == 2 or "code" in words or "iso" in low or "two-letter" in low or "alpha-2" in low
            if addressy:  # the country of the address beside it: the addresses are US addresses
                return _choice("country", ("US",) if two else ("United States",))
            return _choice("country", tuple(c[0] if two else c[1] for c in fakes.countries()))
        if words[-1:] in (("state",), ("province",), ("region",)) and (addressy or "us state" in low or "province" in low):
            full = "full" in low or "name of the state" in low or "name" in words
            if addressy:
                return _address_domain("us_state", "state_name" if full else "state", role)
            return _choice("us_state", tuple(s[1] if full else s[0] for s in fakes.us_states()))
        if words[-1:] in (("city",), ("town",)):
            return _address_domain("city", "city", role)
        if words[-1:] in (("zip",), ("zipcode",), ("postcode",)) or words[-2:] in (("postal", "code"), ("zip", "code")):
            return _address_domain("zip", "zip", role)
        if not _NOT_POSTAL & set(words) and (words[-1:] == ("street",) or words[-2:] in (("street", "address"),
                                             ("address", "line1"), ("address", "1"), ("street", "line"))):
            return _address_domain("street", "street", role)
        if words[-1:] == ("address",) and not _NOT_POSTAL & set(words) and "email" not in low[:60]:
            return _address_domain("address", "line", role)
        if "currency" in words:
            return _pool_domain("currency", fakes.currencies)
        if words[-1:] in (("language",), ("lang",), ("locale",)):
            return _pool_domain("language", fakes.languages)
        if "iban" in words:
            return Domain("iban", lambda rng: fakes.draw("iban", rng))
        if "vin" in words or "vehicle identification" in low:
            return Domain("vin", lambda rng: fakes.draw("vin", rng))
        if "plate" in words or words[-2:] in (("license", "number"), ("licence", "number"), ("registration", "number")) \
                and ("vehicle" in low or "car" in words or "plate" in low):
            return Domain("plate", lambda rng: fakes.draw("plate", rng))
        if ("license" in words or "licence" in words) and ("number" in words or "no" in words or "driver" in words):
            return Domain("driver_license", _driver_license)  # a driver's licence number, not two words
        if words[-1:] in (("last4",), ("lastfour",)) or words[-2:] in (("last", "4"), ("last", "four")):
            return Domain("last4", lambda rng: f"{rng.randint(0, 9999):04d}")
        if words in (("company",), ("company", "name"), ("employer",), ("employer", "name"), ("organization",),
                     ("organisation",), ("organization", "name"), ("business", "name"), ("manufacturer",)):
            return Domain("company", lambda rng: fakes.draw("company", rng))
        if words[-1:] in (("url",), ("uri",), ("href",), ("link",), ("website",), ("homepage",), ("endpoint",)):
            return Domain("url", _url)
    return None


def _driver_license(rng: random.Random) -> str:
    """A driver's licence number in the common US shape: a letter and seven digits (``D4830217``)."""
    return f"{chr(65 + rng.randrange(26))}{rng.randrange(10 ** 7):07d}"


def _url(rng: random.Random) -> str:
    """A web address (``https://``) on a reserved example domain: real docs require the scheme."""
    site = rng.choice(["news", "docs", "blog", "shop", "wiki", "travel", "science", "food"])
    page = rng.choice(["guide", "report", "review", "overview", "notes", "faq", "story", "update"])
    return f"https://{site}.example.com/{page}-{rng.randint(1, 999)}"


_PAIR_RES = [(re.compile(rf"(^|_){re.escape(word)}($|_)"), role) for a, b in PAIR_WORDS
             for word, role in ((a, "start"), (b, "end"))]


@lru_cache(maxsize=4096)
def pair_of(name: str) -> tuple[str, str] | None:
    """(role, stem) when ``name`` is one end of an ordered pair: ``check_in_date`` -> ("start", "#_date")."""
    n = "_".join(_words(name))
    for rx, role in _PAIR_RES:
        if rx.search(n):
            return role, rx.sub(r"\1#\2", n, count=1)
    return None


def _shift(value: Any, later_than: Any) -> Any:
    """``value`` moved just after ``later_than`` (same type: ISO date / date-time / number)."""
    if isinstance(value, (int, float)) and isinstance(later_than, (int, float)) and not isinstance(value, bool):
        return type(value)(later_than + max(1, abs(later_than) * 0.1 if isinstance(value, float) else 1))
    if isinstance(value, str) and isinstance(later_than, str):
        if _CLOCK.match(later_than):  # "18:30" -> "20:30" (the same day; a late start ends at 23:59)
            minutes = min(int(later_than[:2]) * 60 + int(later_than[3:5]) + 120, 23 * 60 + 59)
            return f"{minutes // 60:02d}:{minutes % 60:02d}" + later_than[5:]
        try:
            if len(later_than) == 10:
                return (date.fromisoformat(later_than) + timedelta(days=2)).isoformat()
            head = later_than[:10]
            return (date.fromisoformat(head) + timedelta(days=2)).isoformat() + later_than[10:]
        except ValueError:
            return value
    return value


def _comparable(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return True
    if not (isinstance(a, str) and isinstance(b, str)):
        return False
    return bool(re.match(r"^\d{4}-\d{2}-\d{2}", a) and re.match(r"^\d{4}-\d{2}-\d{2}", b)) \
        or bool(_CLOCK.match(a) and _CLOCK.match(b) and len(a) == len(b))


_CLOCK = re.compile(r"^(?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?$")  # HH:MM or HH:MM:SS, as documented


def order_pairs(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (a record or a call's arguments) with each ordered pair in order: an end that is
    not after its start is moved after it. Nested objects are ordered too. Returns a new dict."""
    out = {k: (order_pairs(v) if isinstance(v, dict) else v) for k, v in values.items()}
    starts: dict[str, str] = {}
    for k in out:
        p = pair_of(k)
        if p and p[0] == "start":
            starts[p[1]] = k
    for k in list(out):
        p = pair_of(k)
        if not p or p[0] != "end" or p[1] not in starts:
            continue
        s = out[starts[p[1]]]
        if _comparable(out[k], s) and not out[k] > s:
            out[k] = _shift(out[k], s)
    return out
