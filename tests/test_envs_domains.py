"""Value domains inferred from the docs: sampled state and arguments stay in their domain."""

from __future__ import annotations

import random
from datetime import date

import pycountry
from faker import Faker

from autoforge.domain import fakes
from autoforge.domain.values import domain_for, example_value, order_pairs, pair_of, quoted_vocabulary
from autoforge.tasks.instantiate import WorldFiller
from autoforge.types import CollectionSpec, EnvironmentRecord, FieldSpec, StateSchema

RNG = random.Random(0)
US_STATES = {s.code.split("-")[1] for s in pycountry.subdivisions.get(country_code="US")}
AIRPORTS = {a.code for a in fakes.airports()}
COUNTRY_CODES = {c.alpha_2 for c in pycountry.countries}


def test_a_state_beside_an_address_is_a_us_state_and_a_status_state_is_not():
    d = domain_for("state", {"type": "string"}, siblings=["street", "city", "zip"])
    assert d is not None and {d.draw(RNG) for _ in range(30)} <= US_STATES
    assert domain_for("state", {"type": "string"}, siblings=["status", "title"]) is None


def test_documented_vocabulary_and_examples():
    desc = "Class of travel. One of 'economy', 'business' or 'first'."
    assert quoted_vocabulary(desc) == ["economy", "business", "first"]
    assert quoted_vocabulary("Seat class (economy, business, first)") == ["economy", "business", "first"]
    assert quoted_vocabulary("The 'name' of the user.") == []  # one quoted word is not a vocabulary
    assert quoted_vocabulary('The mode to set. [Enum]: ["engage", "release"]') == ["engage", "release"]
    assert quoted_vocabulary("The class of the travel. Options are: economy, business, first.") == [
        "economy", "business", "first"]
    assert quoted_vocabulary("Here are the options: read_write, read, write") == ["read_write", "read", "write"]
    d = domain_for("travel_class", {"type": "string", "description": desc})
    assert {d.draw(RNG) for _ in range(40)} == {"economy", "business", "first"}
    assert example_value("The invoice id, such as 'INV-00042'.") == "INV-00042"
    ids = {domain_for("invoice_id", {"type": "string", "description": "e.g. 'INV-00042'"}).draw(RNG) for _ in range(20)}
    assert all(i.startswith("INV-") and len(i) == 9 and i[4:].isdigit() for i in ids) and len(ids) > 1


def test_countries_airports_and_birth_dates():
    assert domain_for("country_code", {"type": "string"}).draw(RNG) in COUNTRY_CODES
    assert domain_for("origin", {"type": "string", "description": "IATA code of the departure airport"}).draw(RNG) in AIRPORTS
    births = [domain_for("date_of_birth", {"type": "string", "format": "date"}).draw(RNG) for _ in range(50)]
    assert all(date.fromisoformat(b) < date(2006, 1, 1) for b in births)
    assert domain_for("note", {"type": "string"}) is None  # nothing specific: the caller's default


def test_pairs_are_ordered_in_records_and_nested_objects():
    assert pair_of("check_in_date") == ("start", "#_date") and pair_of("check_out_date") == ("end", "#_date")
    assert pair_of("start_time")[0] == "start" and pair_of("title") is None
    rec = order_pairs({"check_in_date": "2025-05-03", "check_out_date": "2025-05-01",
                       "trip": {"start_date": "2025-06-10T09:00:00", "end_date": "2025-06-01T09:00:00"},
                       "min_price": 50, "max_price": 20, "to": "a@b.c", "from": "c@d.e"})
    assert rec["check_out_date"] > rec["check_in_date"]
    assert rec["trip"]["end_date"] > rec["trip"]["start_date"] and rec["trip"]["end_date"].endswith("T09:00:00")
    assert rec["max_price"] > rec["min_price"]
    assert rec["to"] == "a@b.c"  # strings that are not dates are left alone


def _env() -> EnvironmentRecord:
    addr = {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"},
                                             "state": {"type": "string"}, "zip": {"type": "string"}}}
    guests = CollectionSpec(name="guests", entity="guest", primary_key="guest_id", id_prefix="G", fields=[
        FieldSpec(name="guest_id"), FieldSpec(name="name"), FieldSpec(name="date_of_birth", format="date"),
        FieldSpec(name="address", type="object"), FieldSpec(name="check_in_date", format="date"),
        FieldSpec(name="check_out_date", format="date")])
    state = {"guests": {"G0001": {"guest_id": "G0001", "name": "Ava Chen", "date_of_birth": "1990-01-01",
                                  "address": {"street": "1 Main St", "city": "Austin", "state": "TX", "zip": "78701"},
                                  "check_in_date": "2025-03-01", "check_out_date": "2025-03-04"}}}
    env = EnvironmentRecord(env_id="env_x", name="x", toolset_id="ts_x", backend="offline",
                            state_schema=StateSchema(collections=[guests]), sample_state=state, status="ready",
                            n_tools=0, n_tools_accepted=0)
    env._addr = addr  # noqa: SLF001 - handed to the filler below
    return env


def test_instantiated_records_stay_in_their_domains():
    from autoforge.tasks.instantiate import make_world

    env = _env()
    for seed in range(5):
        world = make_world(env, random.Random(seed))
        for rec in world["guests"].values():
            assert rec["address"]["state"] in US_STATES, rec
            assert date.fromisoformat(rec["date_of_birth"]) < date(2006, 1, 1)
            assert rec["check_out_date"] > rec["check_in_date"], rec
    filler = WorldFiller(env, random.Random(1), {})
    v = filler.fill("address", None, env._addr, env.state_schema.collections[0])  # noqa: SLF001
    assert v["state"] in US_STATES


# --------------------------------------------------------------------------- the pools (Faker, airportsdata, pycountry)

def _zip_states() -> dict[str, tuple[int, int]]:
    """Faker's own table: the ZIP range of each state (what ``zipcode_in_state`` draws from)."""
    from faker.providers.address.en_US import Provider

    return Provider.states_postcode


def test_an_address_city_state_and_zip_agree():
    ranges = _zip_states()
    for a in fakes.addresses():
        lo, hi = ranges[a.state]
        assert lo <= int(a.zip) <= hi, a
        assert a.state in US_STATES and a.country == "US"
        # the city is a real city of that state: a US airport's city in that state
        assert any(x["city"] == a.city and x["subd"] == a.state_name for x in fakes._airport_table().values()), a  # noqa: SLF001
    assert len({a.city for a in fakes.addresses()}) > 50  # many real cities, not ten


def test_an_airport_is_a_real_iata_code_with_its_own_city_country_and_zone():
    import airportsdata

    table = airportsdata.load("IATA")
    for a in fakes.airports():
        row = table[a.code]
        assert (row["city"], row["country"], row["tz"]) == (a.city, a.country, a.tz)
    d_code = domain_for("origin", {"type": "string", "description": "IATA code of the departure airport"})
    d_city = domain_for("origin_city", {"type": "string"}, siblings=["origin", "origin_airport"])
    for key in range(20):  # one record (one key): the city beside the airport is that airport's city
        code, city = d_code.value(RNG, key), d_city.value(RNG, key)
        assert table[code]["city"] == city
    flight = domain_for("origin", {"type": "string"}, siblings=["flight_number", "destination"])
    assert flight.draw(RNG) in AIRPORTS  # a flight's origin is an airport, said or not
    assert domain_for("origin", {"type": "string"}, siblings=["weight", "destination"]) is None  # a parcel's: no
    dest = domain_for("destination_airport", {"type": "string"})
    assert {dest.value(RNG, k) for k in range(30)} != {d_code.value(RNG, k) for k in range(30)}


def test_the_parts_of_one_record_come_from_one_address():
    sib = ["street", "city", "state", "zip"]
    parts = {n: domain_for(n, {"type": "string"}, siblings=sib) for n in sib}
    by_state = {(a.street, a.city, a.state, a.zip) for a in fakes.addresses()}
    for key in [("Ava", "Chen"), ("Liam", "Kim"), 3, 17]:
        rec = tuple(parts[n].value(RNG, key) for n in sib)
        assert rec in by_state, rec
        assert rec == tuple(parts[n].value(random.Random(9), key) for n in sib)  # the key decides, not the rng
    billing = domain_for("billing_city", {"type": "string"}, siblings=["billing_zip", "shipping_city"])
    shipping = domain_for("shipping_city", {"type": "string"}, siblings=["billing_zip", "shipping_city"])
    assert [billing.value(RNG, k) for k in range(20)] != [shipping.value(RNG, k) for k in range(20)]


def test_pools_are_the_same_in_every_process_and_values_differ_by_record():
    import subprocess
    import sys

    code = "from autoforge.domain import fakes; print(fakes.people()[5], fakes.addresses()[7], fakes.airports()[3])"
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2)}
    assert len(outs) == 1 and "Person(" in outs.pop()
    people = fakes.people()
    assert len({(p.first, p.last) for p in people}) == len(people)
    for p in people[:50]:  # an e-mail and a user name made from the person's name
        def letters(x: str) -> str:
            return "".join(ch for ch in x.lower() if ch.isalnum())

        assert p.email.split("@")[0] == f"{letters(p.first)}.{letters(p.last)}"
        assert p.username.startswith(letters(p.first) + letters(p.last))
        assert len(p.phone) == 12 and p.phone[3] == p.phone[7] == "-" and p.phone.replace("-", "").isdigit()
    city = domain_for("city", {"type": "string"}, siblings=["zip"])
    assert len({city.value(RNG, i) for i in range(40)}) > 10  # different records, different cities


def test_real_codes_for_currencies_countries_languages_vins_plates_and_ibans():
    cur = domain_for("currency", {"type": "string"})
    assert all(pycountry.currencies.get(alpha_3=cur.draw(RNG)) for _ in range(30))
    assert all(pycountry.countries.get(alpha_2=domain_for("country_code", {"type": "string"}).draw(RNG)) for _ in range(30))
    names = {c.name for c in pycountry.countries} | {getattr(c, "common_name", c.name) for c in pycountry.countries}
    assert domain_for("country", {"type": "string"}).draw(RNG) in names
    assert all(pycountry.languages.get(alpha_2=domain_for("language", {"type": "string"}).draw(RNG)) for _ in range(30))
    vin = domain_for("vin", {"type": "string", "description": "Vehicle identification number"}).draw(RNG)
    assert len(vin) == 17 and vin.isalnum() and not set("IOQ") & set(vin)
    plate = domain_for("license_plate", {"type": "string"}).draw(RNG)
    assert 4 <= len(plate) <= 10 and plate != "Quiet Chair"
    iban = domain_for("iban", {"type": "string"}).draw(RNG)
    n = int("".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4]))
    assert n % 97 == 1  # the IBAN check digits hold (ISO 13616)
    assert domain_for("timezone", {"type": "string"}).draw(RNG) in {a.tz for a in fakes.airports()}
    assert domain_for("email_address", {"type": "string"}) is None  # an e-mail address is no postal address
    lic = domain_for("license_number", {"type": "string", "description": "Driver's license number"}).draw(RNG)
    assert len(lic) == 8 and lic[0].isupper() and lic[1:].isdigit()
    assert all(len(v) == 4 and v.isdigit() for v in (domain_for(n, {"type": "string"}).draw(RNG) for n in ("last4", "card_last_4")))


def test_a_format_hint_in_a_description_gives_dates_of_that_format():
    d = domain_for("travel_date", {"type": "string", "description": "The date of travel (MM/DD/YYYY)."})
    v = d.draw(RNG)
    assert len(v) == 10 and v[2] == v[5] == "/" and v[6:].startswith("2025")
    t = domain_for("slot", {"type": "string"}, description="Start time in HH:MM")
    assert len(t.draw(RNG)) == 5 and t.draw(RNG)[2] == ":"
    b = domain_for("dob", {"type": "string", "description": "Date of birth, DD.MM.YYYY"}).draw(RNG)
    assert b[2] == b[5] == "." and int(b[6:]) < 2006
    # a task world takes the format too (WorldFiller goes through domain_for)
    coll = CollectionSpec(name="trips", entity="trip", primary_key="trip_id", id_prefix="T",
                          fields=[FieldSpec(name="trip_id"), FieldSpec(name="travel_date", description="MM/DD/YYYY")])
    env = EnvironmentRecord(env_id="e", name="x", toolset_id="t", backend="offline",
                            state_schema=StateSchema(collections=[coll]), sample_state={}, status="ready",
                            n_tools=0, n_tools_accepted=0)
    from autoforge.tasks.instantiate import make_world

    world = make_world(env, random.Random(3))
    assert all(r["travel_date"][2] == "/" for r in world["trips"].values())


def test_a_tasks_arguments_agree_call_by_call_and_differ_between_calls():
    """Arguments have no record: the n-th city and the n-th ZIP a task draws are one address's, and a
    second draw (another call, a retry for a fresh value) is another address, so no fact repeats."""
    env = _env()
    filler = WorldFiller(env, random.Random(5), {})
    sib = ("city", "zip")
    cities = [filler.fill("city", None, {"type": "string"}, None, siblings=sib) for _ in range(6)]
    zips = [filler.fill("zip", None, {"type": "string"}, None, siblings=sib) for _ in range(6)]
    pairs = {(a.city, a.zip) for a in fakes.addresses()}
    assert all(p in pairs for p in zip(cities, zips)), list(zip(cities, zips))
    assert len(set(cities)) > 3
    again = WorldFiller(env, random.Random(5), {})  # the same seed: the same arguments
    assert [again.fill("city", None, {"type": "string"}, None, siblings=sib) for _ in range(6)] == cities


def test_task_worlds_keep_documented_patterns_and_nested_enums():
    """A field's pattern ("Billing month, e.g. '2025-02'", ``^\\d{4}-\\d{2}$``; a promo code
    ``^[A-Z0-9]{4,12}$``) holds in every task world, and an object field's documented properties
    (a card's ``kind`` const and ``brand`` enum) shape its nested values instead of filler."""
    import re

    from autoforge.tasks.instantiate import make_world

    card = {"kind": {"const": "credit_card", "type": "string"},
            "brand": {"type": "string", "enum": ["visa", "mastercard", "amex"]},
            "last4": {"type": "string", "pattern": "^\\d{4}$"}}
    coll = CollectionSpec(name="bills", entity="bill", primary_key="bill_id", id_prefix="BL", fields=[
        FieldSpec(name="bill_id"), FieldSpec(name="period", description="Billing month, e.g. '2025-02'.", pattern="^\\d{4}-\\d{2}$"),
        FieldSpec(name="promo_code", description="Applied promo code.", pattern="^[A-Z0-9]{4,12}$"),
        FieldSpec(name="card", type="object", properties=card)])
    sample = {"bills": {"BL0001": {"bill_id": "BL0001", "period": "2025-01", "promo_code": "SAVE10",
                                   "card": {"kind": "credit_card", "brand": "visa", "last4": "1234"}}}}
    env = EnvironmentRecord(env_id="e", name="x", toolset_id="t", backend="offline",
                            state_schema=StateSchema(collections=[coll]), sample_state=sample, status="ready",
                            n_tools=0, n_tools_accepted=0)
    for seed in range(5):
        for rec in make_world(env, random.Random(seed))["bills"].values():
            assert re.fullmatch(r"\d{4}-\d{2}", rec["period"]), rec
            assert re.fullmatch(r"[A-Z0-9]{4,12}", rec["promo_code"]), rec
            assert rec["card"]["kind"] == "credit_card" and rec["card"]["brand"] in card["brand"]["enum"], rec
            assert re.fullmatch(r"\d{4}", rec["card"]["last4"]), rec


def test_departure_comes_before_arrival_in_dates_and_clock_times():
    from autoforge.domain.values import order_pairs

    assert order_pairs({"departure_time": "18:30", "arrival_time": "12:30"})["arrival_time"] == "20:30"
    assert order_pairs({"departure_time": "23:00", "arrival_time": "07:10"})["arrival_time"] == "23:59"
    assert order_pairs({"depart_date": "2025-03-02", "arrive_date": "2025-03-01"})["arrive_date"] > "2025-03-02"
    assert order_pairs({"start_time": "09:00", "end_time": "10:00"}) == {"start_time": "09:00", "end_time": "10:00"}
    assert order_pairs({"departure": "JFK", "arrival": "LAX"}) == {"departure": "JFK", "arrival": "LAX"}  # not times
    assert order_pairs({"start_time": "09:00", "end_time": "2025-01-01"})["end_time"] == "2025-01-01"  # two shapes
