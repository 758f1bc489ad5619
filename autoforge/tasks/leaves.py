"""Leaf values of task worlds: names, dates, cities, filler words, one value per field.

:class:`ValueGen` draws the value of one record field from its name, type and the environment's
sample records; the real-world pools (people, US addresses) come from :mod:`autoforge.domain.fakes`
and :func:`record_key` makes one record's values agree (its city, state and ZIP are one address's).
:mod:`autoforge.tasks.instantiate` builds whole worlds from them.
"""

from __future__ import annotations

import random
import re
import weakref
from collections import Counter
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any

from autoforge.domain import fakes
from autoforge.domain.keys import PERSON
from autoforge.tasks.envfacts import facts_for
from autoforge.types import CollectionSpec, EnvironmentRecord, FieldSpec


class _Pool(Sequence):
    """A pool of :mod:`autoforge.domain.fakes` as a sequence (``rng.choice(FIRST)``), built on first use."""

    def __init__(self, build):
        self._build = build

    def __len__(self) -> int:
        return len(self._build())

    def __getitem__(self, i):
        return self._build()[i]

    def __add__(self, other) -> list:  # FIRST + LAST: one list of both (rl.augment's name words)
        return list(self) + list(other)

    def __radd__(self, other) -> list:
        return list(other) + list(self)


FIRST = _Pool(fakes.first_names)  # Faker's first and last names (a world pairs one first name with two last names)
LAST = _Pool(fakes.last_names)
ADJ = ["Blue", "Red", "Quiet", "Rapid", "Golden", "Silver", "Northern", "Bright", "Little", "Grand", "Green", "Urban"]
NOUN = ["Lamp", "Chair", "Harbor", "Falcon", "Garden", "Summit", "River", "Atlas", "Beacon", "Meadow", "Orbit", "Canvas"]
CITY = _Pool(lambda: tuple(a.city for a in fakes.addresses()))  # real US cities (see fakes.addresses)
_DRAWS: "weakref.WeakKeyDictionary[random.Random, tuple[int, Counter]]" = weakref.WeakKeyDictionary()


def record_key(rng: random.Random, person: Any = None, part: str = "") -> Any:
    """The key that makes values agree (a city, its state and its ZIP from one address): the record's
    person where there is one; else, for a task's arguments, (a key drawn once per ``rng``, how many
    values of ``part`` were drawn before): the n-th city and the n-th ZIP of a task are one address's,
    and a second city (a retry, another call) is another address's."""
    if person is not None:
        return tuple(person)
    entry = _DRAWS.get(rng)
    if entry is None:
        entry = _DRAWS[rng] = (rng.getrandbits(32), Counter())
    token, counts = entry
    n = counts[part]
    counts[part] += 1
    return token, n
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DT_RE = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
BASE_DATE = date(2025, 1, 1)  # the synthesized tools' fixed clock is around here; values spread over 2025


def sample_value(env: EnvironmentRecord, coll: str, fname: str) -> Any:
    for rec in (env.sample_state.get(coll) or {}).values() if isinstance(env.sample_state.get(coll), dict) else []:
        if isinstance(rec, dict) and rec.get(fname) is not None:
            return rec[fname]
    return None


class ValueGen:
    """Field values by name, type and sample format (deterministic given the rng)."""

    def __init__(self, env: EnvironmentRecord, rng: random.Random):
        self.env, self.rng = env, rng
        self.facts = facts_for(env)

    def person(self) -> tuple[str, str]:
        p = self.rng.choice(fakes.people())
        return p.first, p.last

    def date(self, with_time: bool = False) -> str:
        d = BASE_DATE + timedelta(days=self.rng.randint(10, 330))
        return f"{d.isoformat()}T{self.rng.randint(8, 18):02d}:00:00" if with_time else d.isoformat()

    def value(self, coll: CollectionSpec, f: FieldSpec | None, name: str, schema: dict | None = None, person=None) -> Any:
        rng, n = self.rng, name.lower()
        enum = (f.enum if f else None) or (schema or {}).get("enum")
        if enum:
            return rng.choice(enum)
        ftype = (f.type if f else None) or (schema or {}).get("type") or "string"
        if isinstance(ftype, list):
            ftype = next((t for t in ftype if t != "null"), "string")
        sample = self.facts.sample_value(coll.name, name, sample_value) if coll else None
        if ftype == "string":
            dom = self.facts.domain(name, schema, self.facts.field_names(coll) if coll else (),
                                    f.description if f else "")
            if dom is not None:
                return dom.value(rng, record_key(rng, person, dom.name))
        if ftype == "boolean":
            return rng.random() < 0.5
        if ftype == "integer":
            hi = 20 if any(w in n for w in ("quantity", "qty", "count", "stock", "seat", "guest", "night", "level", "priority")) else 900
            return rng.randint(1, hi)
        if ftype == "number":
            return round(rng.uniform(5, 900), 2)
        if ftype == "array":
            return []
        if ftype == "object":
            return {}
        if isinstance(sample, str) and _DT_RE.match(sample) or n.endswith("_at") or "time" in n:
            return self.date(with_time=True)
        if isinstance(sample, str) and _DATE_RE.match(sample) or "date" in n or n in ("deadline", "due", "birthday", "dob"):
            return self.date()
        first, last = person or self.person()
        if "email" in n:
            return f"{first}.{last}{rng.randint(1, 99)}@example.com".lower()
        if name in self.facts.people:  # "owner", "manager": a person's name (ids.person_name_fields)
            return f"{first} {last}"
        if "phone" in n or "mobile" in n:
            return fakes.keyed(fakes.people(), record_key(rng, person, "phone"), n).phone
        address = fakes.keyed(fakes.addresses(), record_key(rng, person, n))
        if n in ("city", "location") or n.endswith("_city"):
            return address.city
        if "address" in n:
            return f"{address.street}, {address.city}, {address.state} {address.zip}"
        if n in ("zip", "zipcode", "postal_code", "zip_code"):
            return address.zip
        if n in ("username", "handle", "login"):
            return f"{first}{last}{rng.randint(1, 99)}".lower()
        if "name" in n or n == "title":
            if coll and coll.entity in PERSON and n in ("name", "full_name", "user_name", "customer_name"):
                return f"{first} {last}"
            if n in ("first_name", "given_name"):
                return first
            if n in ("last_name", "surname", "family_name"):
                return last
            return f"{rng.choice(ADJ)} {rng.choice(NOUN)}"
        if n in ("status", "state", "type", "category"):
            return rng.choice(["active", "inactive", "pending", "archived"])
        if any(w in n for w in ("description", "note", "comment", "message", "text", "content", "body", "reason")):
            return f"{rng.choice(ADJ).lower()} {rng.choice(NOUN).lower()} {rng.randint(1, 99)}"
        if isinstance(sample, str) and sample:
            return f"{rng.choice(ADJ)} {rng.choice(NOUN)}"
        return f"{name.replace('_', '-')}-{rng.randint(100, 999)}"
