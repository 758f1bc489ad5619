"""Value domains inferred from the docs: sampled state and arguments stay in their domain."""

from __future__ import annotations

import random
from datetime import date

from autoforge.domain.values import (AIRPORTS, COUNTRY_CODES, US_STATES, domain_for, example_value, order_pairs, pair_of,
                                     quoted_vocabulary)
from autoforge.tasks.instantiate import WorldFiller
from autoforge.types import CollectionSpec, EnvironmentRecord, FieldSpec, StateSchema

RNG = random.Random(0)


def test_a_state_beside_an_address_is_a_us_state_and_a_status_state_is_not():
    d = domain_for("state", {"type": "string"}, siblings=["street", "city", "zip"])
    assert d is not None and {d.draw(RNG) for _ in range(30)} <= set(US_STATES)
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
