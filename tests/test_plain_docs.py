"""Plain tool docs: no output schemas, outputs said in prose or in a ``returns`` field.

The fixtures (tests/fixtures/plain/<name>/, one folder = one tool set) are our own documents in
the styles service developers write: OpenAI function lists, MCP tools/list results and OpenAPI 3
YAML; integer, UUID and code ids (``BK-1042``, ``CS-101``); camelCase and snake_case; preconditions
in prose. The unit tests pin the sentence forms :mod:`autoforge.domain.outputs` reads; the factory
tests check every fixture yields >= 20 verified tasks using >= 70% of its write tools (two sets
in the default run, all eight under ``-m slow``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoforge.domain.canonical import canonical_specs
from autoforge.domain.outputs import prose_output
from autoforge.domain.state import offline_state_schema
from autoforge.tooldocs import ingest_paths

PLAIN = Path(__file__).parent / "fixtures" / "plain"
SETS = sorted(p.name for p in PLAIN.iterdir() if p.is_dir())


def _fields(text, entity=None):
    out = prose_output(text, entity)
    return {f.name: f.schema.get("type") for f in out.fields} if out else {}


@pytest.mark.parametrize("text, want", [
    ("Returns the class with its start time and remaining spots.", {"start_time": "string", "remaining_spots": "integer"}),
    ("Search books. Returns a list of matching books, each with its book_id, title, price and the number of copies in stock.",
     {"book_id": "string", "title": "string", "price": "number", "copies_in_stock": "integer"}),
    ("Returns the customer's id, name and loyalty points.", {"customer_id": "string", "name": "string", "loyalty_points": "integer"}),
    ("Lists teachers. Each teacher comes with their teacher_id, name, instruments and hourly rate.",
     {"teacher_id": "string", "name": "string", "instruments": "array", "hourly_rate": "number"}),
    ("Returns the slots with their start and end times and room.", {"start_time": "string", "end_time": "string", "room": "string"}),
    ("Returns ownerId, name, email and the dogs registered to them", {"owner_id": "string", "name": "string", "email": "string", "dogs": "string"}),
    ("Returns the desks with their deskId, label and whether they have a monitor.", {"desk_id": "string", "label": "string", "has_monitor": "boolean"}),
    ("Returns recipes, each with recipe_id, prep time in minutes and opening hours.",
     {"recipe_id": "string", "prep_time": "integer", "opening_hours": "string"}),
    ("It returns the parcel's status, the locker it is assigned to and the pickup deadline.",
     {"status": "string", "locker": "string", "pickup_deadline": "string"}),
])
def test_returns_sentences_name_fields(text, want):
    assert _fields(text, "x") == want


def test_a_record_without_fields_and_no_returns_sentence_read_nothing():
    assert prose_output("Returns the updated enrollment.") is None
    assert prose_output("Cancel an order that has not shipped.") is None
    out = prose_output("Returns every station with its name and free docks.")
    assert out.many and out.noun == "station"
    assert prose_output("Returns the order's id and total.", "order").fields[0].name == "order_id"


def _schema(name):
    res = ingest_paths([PLAIN / name])
    cspecs, _ = canonical_specs(res.specs)
    return res, {c.name: {f.name: f for f in c.fields} for c in offline_state_schema(name, cspecs).collections}


def test_a_returns_field_and_an_openapi_response_description_are_read():
    """OpenAI ``returns`` (course_registration) and an OpenAPI 2xx description with no schema
    (bike_share) become "Returns ..." sentences, and their fields reach the state."""
    res, colls = _schema("course_registration")
    desc = next(s.description for s in res.specs if s.name == "search_courses")
    assert "Returns a list of courses with course_code" in desc
    assert {"seats_left", "credits", "instructor"} <= set(colls["courses"])
    assert colls["courses"]["seats_left"].type == "integer"
    res, colls = _schema("bike_share")
    assert "Returns the rider's rider_id" in next(s.description for s in res.specs if s.name == "find_rider_by_phone")
    assert colls["riders"]["balance"].type == "number"
    assert colls["rides"]["start_station_id"].ref == "stations" and colls["rides"]["bike_id"].ref == "bikes"


def test_prose_links_become_references():
    """"the dogs registered to them" is a list of dogs, "the owner" one owner, "its desk" a desk
    (MCP camelCase); "the books it contains" on an order that holds one ``book_id`` stays that one."""
    _, colls = _schema("dog_grooming")
    assert colls["owners"]["dog_ids"].ref == "dogs" and colls["owners"]["dog_ids"].type == "array"
    assert colls["dogs"]["owner_id"].ref == "owners"
    _, colls = _schema("desk_booking")
    assert colls["reservations"]["desk_id"].ref == "desks"
    assert colls["desks"]["has_monitor"].type == "boolean"
    _, colls = _schema("bookshop")
    assert "book_ids" not in colls["orders"] and colls["orders"]["book_id"].ref == "books"
    assert colls["books"]["copies_in_stock"].type == "integer"
    _, colls = _schema("parcel_locker")
    assert colls["lockers"]["opening_hours"].type == "string"  # hours of a day, not a count
    assert colls["recipients"]["preferred_locker_id"].ref == "lockers"


def test_a_search_looks_for_words_a_record_holds():
    """A free-text ``query`` of a list tool is instantiated from a record's title or name, so the
    search a task makes finds something (an argmax over its results has items)."""
    from autoforge.tasks.instantiate import _searchable
    from autoforge.types import CollectionSpec, FieldSpec

    books = CollectionSpec(name="books", entity="book", primary_key="book_id", id_prefix="B", id_width=4, fields=[
        FieldSpec(name="book_id", type="string"), FieldSpec(name="title", type="string"),
        FieldSpec(name="genre", type="string", enum=["fiction", "poetry"]), FieldSpec(name="author", type="string")])
    records = [{"book_id": "B0001", "title": "Night Trains", "genre": "fiction", "author": "A. Moss"},
               {"book_id": "B0002", "title": "Salt Roads", "genre": "poetry", "author": "J. Penn"}]
    assert _searchable(books, records) == ["Night Trains", "Salt Roads"]
    untitled = books.model_copy(update={"fields": [f for f in books.fields if f.name != "title"]})
    assert _searchable(untitled, records) == ["A. Moss", "J. Penn"]


def _factory(tmp_path, name):
    from autoforge.pipeline import FactoryParams, run_factory
    from autoforge.types import Task, ToolCode
    from autoforge.warehouse import apply_migrations, read_records

    wh = str(tmp_path / f"{name}.duckdb")
    apply_migrations(wh)
    run_factory(FactoryParams(paths=[str(PLAIN / name)], bundled=False, seed=0, tasks_per_env=110, warehouse=wh))
    verified = [t for t in read_records(wh, Task) if t.status == "verified"]
    writes = {t.name for t in read_records(wh, ToolCode) if t.effect == "write"}
    used = {c.name for t in verified for c in t.gold_calls} & writes
    return verified, writes, used


def _check_yield(tmp_path, name):
    verified, writes, used = _factory(tmp_path, name)
    assert len(verified) >= 20, f"{name}: {len(verified)} verified tasks"
    assert writes and len(used) >= 0.7 * len(writes), f"{name}: writes used {sorted(used)} of {sorted(writes)}"


@pytest.mark.parametrize("name", ["bike_share", "course_registration"])
def test_plain_sets_yield_fast(tmp_path, name):
    _check_yield(tmp_path, name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SETS)
def test_every_plain_set_yields(tmp_path, name):
    _check_yield(tmp_path, name)


def test_a_create_starts_its_record_in_the_status_its_prose_says():
    from autoforge.domain.outputs import said_status
    assert said_status("Book it. Returns the booked lesson with its lesson_id.", ["open", "booked"]) == "booked"
    assert said_status("Returns the new reservation with status confirmed.", ["pending", "confirmed"]) == "confirmed"
    assert said_status("Returns the enrollment with status 'waitlisted'.", ["enrolled", "waitlisted"]) == "waitlisted"
    assert said_status("Returns the reservation id and its status.", ["pending", "confirmed"]) is None
