"""Real values from well-kept libraries: people, addresses, airports, countries, currencies, languages.

Faker (names, e-mail domains, phone numbers, ZIP codes by state, companies, IBANs, VINs, licence
plates), ``airportsdata`` (IATA codes with their city, country and time zone) and ``pycountry``
(ISO 3166 countries and subdivisions, ISO 4217 currencies, ISO 639 languages) fill *pools* once
per process, each from a fixed seed (:data:`SEED`), so the same pool comes back in every process;
values then index the pools with the caller's ``random.Random`` or record number. A Faker call
costs tens of microseconds and a world holds thousands of values: drawing from a pool costs one
``rng.randrange``.

Coherence is built into the pool entries: a :class:`Person`'s e-mail and user name are made from
their name; an :class:`Address` has a real US city (one with an international airport) with its
own state and a ZIP code of that state (``Faker.zipcode_in_state``); an :class:`Airport` carries
its own city, country and time zone. :func:`keyed` picks one entry for a key (a person, a record
number), so the city, state and ZIP fields of one record come from one address.
"""

from __future__ import annotations

import functools
import random
import threading
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypeVar

SEED = 20250115  # the pools' seed: fixed, so every process builds the same pools
_BUILDING = threading.RLock()  # one thread builds the pools; the others (the thread runner's workers) wait for them
T = TypeVar("T")


def cache(build: Callable[..., T]) -> Callable[..., T]:
    """``build(*args)`` once per process, also when several threads ask at once (``functools.cache``
    alone would let each of them build it); a built pool is read without the lock."""
    done: dict[tuple, T] = {}

    @functools.wraps(build)
    def get(*args: Any) -> T:
        if args in done:
            return done[args]
        with _BUILDING:
            if args not in done:
                done[args] = build(*args)
            return done[args]

    return get
N_PEOPLE, N_ADDRESSES, N_OTHER = 512, 256, 256


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    email: str
    phone: str
    username: str


@dataclass(frozen=True)
class Address:
    street: str
    city: str
    state: str  # the ISO 3166-2 code without the country: "WA"
    state_name: str  # "Washington"
    zip: str  # a ZIP code of ``state``
    country: str  # "US"
    country_name: str  # "United States"


@dataclass(frozen=True)
class Airport:
    code: str  # IATA: "SEA"
    name: str
    city: str
    country: str  # ISO 3166-1 alpha-2
    tz: str  # IANA time zone: "America/Los_Angeles"


@cache
def _faker(pool: str, locale: str = "en_US"):
    """A Faker of its own for ``pool``, seeded from :data:`SEED` and the pool's name: a pool's values do not
    depend on which pools this process built before it (one shared instance made them depend on the order
    in which environments first asked, so two processes built different pools)."""
    from faker import Faker  # imported on first use: the pools are built once per process

    fake = Faker(locale)
    fake.seed_instance(SEED ^ zlib.crc32(pool.encode()))
    return fake


def _ascii(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isascii() and ch.isalnum())


@cache
def people() -> tuple[Person, ...]:
    """:data:`N_PEOPLE` people with distinct full names; e-mail and user name made from the name."""
    fake, out, seen = _faker("people"), [], set()
    domains = ("example.com", "example.org", "example.net")
    while len(out) < N_PEOPLE:
        first, last = fake.first_name(), fake.last_name()
        if (first, last) in seen or not _ascii(first) or not _ascii(last):
            continue
        seen.add((first, last))
        n = len(out)
        digits = "".join(ch for ch in fake.basic_phone_number() if ch.isdigit())[-10:]  # one format: 555-010-1234
        out.append(Person(first, last, f"{_ascii(first)}.{_ascii(last)}@{domains[n % 3]}",
                          f"{digits[:3]}-{digits[3:6]}-{digits[6:]}",
                          f"{_ascii(first)}{_ascii(last)}{n % 90 + 10}"))
    return tuple(out)


@cache
def first_names() -> tuple[str, ...]:
    return tuple(sorted({p.first for p in people()}))


@cache
def last_names() -> tuple[str, ...]:
    return tuple(sorted({p.last for p in people()}))


@cache
def _airport_table() -> dict[str, dict]:
    import airportsdata

    return airportsdata.load("IATA")


@cache
def _us_states() -> dict[str, str]:
    """US state name -> code ("Washington" -> "WA"): pycountry's ISO 3166-2 subdivisions of US."""
    import pycountry

    return {s.name: s.code.split("-", 1)[1] for s in pycountry.subdivisions.get(country_code="US")}


@cache
def addresses() -> tuple[Address, ...]:
    """:data:`N_ADDRESSES` US addresses: a Faker street, a city with an international airport and
    that city's state (airportsdata), a ZIP code of that state (``Faker.zipcode_in_state``)."""
    fake, states = _faker("addresses"), _us_states()
    cities = sorted({(a["city"], a["subd"]) for a in _airport_table().values()
                     if a["country"] == "US" and "International" in a["name"] and a["subd"] in states
                     and a["city"]})
    rng = random.Random(SEED)
    out = []
    for n in range(N_ADDRESSES):
        city, state_name = cities[rng.randrange(len(cities))]
        code = states[state_name]
        out.append(Address(fake.street_address(), city, code, state_name, fake.zipcode_in_state(code), "US",
                           "United States"))
    return tuple(out)


@cache
def airports() -> tuple[Airport, ...]:
    """The international airports (airportsdata, IATA) of cities with two or more airports: the larger
    cities (LAX, ORD, CDG, NRT, DXB, GRU ...; about 190), each with its own city, country and time zone."""
    table = _airport_table()
    per_city = Counter((a["city"], a["country"]) for a in table.values() if a["city"])
    codes = sorted(k for k, a in table.items() if "International" in a["name"] and a["city"] and a["tz"]
                   and per_city[(a["city"], a["country"])] >= 2)
    return tuple(Airport(c, table[c]["name"], table[c]["city"], table[c]["country"], table[c]["tz"]) for c in codes)


@cache
def countries() -> tuple[tuple[str, str], ...]:
    """(ISO 3166-1 alpha-2 code, common name) of every country pycountry lists."""
    import pycountry

    return tuple(sorted((c.alpha_2, getattr(c, "common_name", None) or c.name) for c in pycountry.countries))


@cache
def currencies() -> tuple[str, ...]:
    """ISO 4217 codes of the currencies countries use (pycountry), without the X-codes (gold, test funds)."""
    import pycountry

    return tuple(sorted(c.alpha_3 for c in pycountry.currencies if not c.alpha_3.startswith("X")))


@cache
def languages() -> tuple[str, ...]:
    """ISO 639-1 two-letter language codes (pycountry)."""
    import pycountry

    return tuple(sorted(lang.alpha_2 for lang in pycountry.languages if hasattr(lang, "alpha_2")))


@cache
def us_states() -> tuple[tuple[str, str], ...]:
    """(code, name) of the 50 states and DC (pycountry's US subdivisions, territories left out)."""
    import pycountry

    return tuple(sorted((s.code.split("-", 1)[1], s.name) for s in pycountry.subdivisions.get(country_code="US")
                        if s.type in ("State", "District")))


def _pool(kind: str) -> tuple[str, ...]:
    return _POOLS[kind]()


@cache
def _companies() -> tuple[str, ...]:
    fake = _faker("companies")
    return tuple(dict.fromkeys(fake.company() for _ in range(N_OTHER)))


@cache
def _ibans() -> tuple[str, ...]:
    fake = _faker("ibans")
    return tuple(fake.iban() for _ in range(N_OTHER))


@cache
def _vins() -> tuple[str, ...]:
    fake = _faker("vins")
    return tuple(fake.vin() for _ in range(N_OTHER))


@cache
def _plates() -> tuple[str, ...]:
    fake = _faker("plates")
    return tuple(fake.license_plate() for _ in range(N_OTHER))


_POOLS = {"company": _companies, "iban": _ibans, "vin": _vins, "plate": _plates}


def draw(kind: str, rng: random.Random) -> str:
    """One value of pool ``kind`` (company, iban, vin, plate) picked by ``rng``."""
    pool = _pool(kind)
    return pool[rng.randrange(len(pool))]


def nth(kind: str, i: int) -> str:
    """Value number ``i`` of pool ``kind`` (the sample state's records pick by number)."""
    pool = _pool(kind)
    return pool[i % len(pool)]


def keyed(pool: Sequence[Any], key: Any, role: str = "") -> Any:
    """The entry of ``pool`` for ``key`` and ``role``: an int key is a record number (entry ``key``,
    shifted per role), any other key is hashed with CRC-32 (stable across processes, unlike ``hash``).
    ``role`` separates two entries of one record ("origin" and "destination" airports)."""
    if isinstance(key, int) and not isinstance(key, bool):
        return pool[(key + (zlib.crc32(role.encode()) % 97 if role else 0)) % len(pool)]
    return pool[zlib.crc32(f"{key!r}|{role}".encode()) % len(pool)]
