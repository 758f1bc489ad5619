"""World checks (autoforge/domain/world_checks.py): each kind fails on a bad world and passes a good one."""

from __future__ import annotations

import copy

import pytest

from autoforge.domain.world_checks import (FINDING_KINDS, Finding, argument_findings, counts, rejecting, rejects,
                                           state_findings, task_findings, used_records, value_mismatch,
                                           write_findings)
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, Task, ToolCall, ToolCode

SCHEMA = StateSchema(collections=[
    CollectionSpec(name="users", entity="user", primary_key="user_id", id_prefix="U", fields=[
        FieldSpec(name="user_id"), FieldSpec(name="name"), FieldSpec(name="email", format="email"),
        FieldSpec(name="order_ids", type="array", items={"type": "string", "ref": "orders"}),
        FieldSpec(name="address", type="object", properties={"city": {"type": "string"}, "zip": {"type": "string"}})]),
    CollectionSpec(name="orders", entity="order", primary_key="order_id", id_prefix="O", fields=[
        FieldSpec(name="order_id"), FieldSpec(name="user_id", ref="users"),
        FieldSpec(name="status", enum=["pending", "shipped", "cancelled"]),
        FieldSpec(name="placed_on", format="date"),
        FieldSpec(name="delivery_day", description="the delivery day, MM/DD/YYYY"),
        FieldSpec(name="quantity", type="integer", minimum=1),
        FieldSpec(name="items", type="array", items={"type": "object", "required": ["product_id"],
                                                     "properties": {"product_id": {"type": "string"}}}),
        FieldSpec(name="payment_method"), FieldSpec(name="total", type="number"),
        FieldSpec(name="updated_at", format="date-time")]),
    CollectionSpec(name="products", entity="product", primary_key="product_id", id_prefix="P", fields=[
        FieldSpec(name="product_id"), FieldSpec(name="title"), FieldSpec(name="price", type="number")]),
])

GOOD = {
    "users": {"U0001": {"user_id": "U0001", "name": "Ava Patel", "email": "ava@example.com", "order_ids": ["O0001"],
                        "address": {"city": "Portland", "zip": "97201"}}},
    "orders": {"O0001": {"order_id": "O0001", "user_id": "U0001", "status": "pending", "placed_on": "2025-01-10",
                         "delivery_day": "01/20/2025", "quantity": 2, "items": [{"product_id": "P0001"}],
                         "payment_method": "card", "total": 40.0, "updated_at": "2025-01-10T09:00:00"}},
    "products": {"P0001": {"product_id": "P0001", "title": "Desk lamp", "price": 20.0}},
}


def _bad(path: tuple, value) -> dict:
    state = copy.deepcopy(GOOD)
    *head, last = path
    cur = state
    for p in head:
        cur = cur[p]
    cur[last] = value
    return state


def kinds(findings: list[Finding]) -> set[str]:
    return {f.kind for f in findings}


def test_a_good_world_has_no_findings():
    assert state_findings(SCHEMA, GOOD) == []


@pytest.mark.parametrize("path, value, kind, where", [
    (("orders", "O0001", "user_id"), "U0404", "dangling_reference", "orders.O0001.user_id"),  # a reference field
    (("users", "U0001", "order_ids"), ["O0001", "O0009"], "dangling_reference", "users.U0001.order_ids"),  # id list
    (("orders", "O0001", "items"), [{"product_id": "P0777"}], "nested_reference", "orders.O0001.items[0].product_id"),
])
def test_dangling_references(path, value, kind, where):
    found = state_findings(SCHEMA, _bad(path, value))
    assert [(f.kind, f.path) for f in found] == [(kind, where)]


@pytest.mark.parametrize("value", ["YYYY-MM-DD", "string", "<order status>", "e.g. card", "TBD"])
def test_placeholders_in_the_state(value):
    found = state_findings(SCHEMA, _bad(("orders", "O0001", "payment_method"), value))
    assert [(f.kind, f.path, f.value) for f in found] == [("placeholder", "orders.O0001.payment_method", value)]


def test_a_documented_enum_value_is_not_a_placeholder():
    schema = SCHEMA.model_copy(deep=True)
    schema.collections[1].fields[8] = FieldSpec(name="payment_method", enum=["card", "string"])
    assert state_findings(schema, _bad(("orders", "O0001", "payment_method"), "string")) == []


@pytest.mark.parametrize("path, value", [
    (("users", "U0001", "address"), {}),  # an object whose schema lists its properties
    (("orders", "O0001", "items"), [{}]),  # an item missing its required key
])
def test_empty_required_containers_in_the_state(path, value):
    assert "empty_container" in kinds(state_findings(SCHEMA, _bad(path, value)))


def test_a_nested_bare_id_is_the_nested_objects_own_id_not_a_reference():
    schema = StateSchema(collections=[CollectionSpec(name="pets", entity="pet", primary_key="id", id_prefix="", fields=[
        FieldSpec(name="id"), FieldSpec(name="category", type="object", properties={"id": {"type": "integer"}})])])
    state = {"pets": {"1": {"id": "1", "category": {"id": 7}}}}
    assert [f for f in state_findings(schema, state) if f.kind == "nested_reference"] == []


def test_a_nested_reference_rejects_a_task():
    found = state_findings(SCHEMA, _bad(("orders", "O0001", "items"), [{"product_id": "P0777"}]))
    assert [f.kind for f in rejecting(found)] == ["nested_reference"]


@pytest.mark.parametrize("path, value, kind", [
    (("orders", "O0001", "quantity"), "2", "type_mismatch"),  # an integer field holding a string
    (("orders", "O0001", "quantity"), 2.5, "type_mismatch"),  # ... or a float
    (("orders", "O0001", "order_id"), "O0002", "type_mismatch"),  # a record stored under another id
    (("orders", "O0001", "quantity"), 0, "format_mismatch"),  # below its minimum
    (("orders", "O0001", "status"), "lost", "format_mismatch"),  # not in the enum
    (("orders", "O0001", "placed_on"), "Jan 10", "format_mismatch"),  # format date
    (("orders", "O0001", "delivery_day"), "2025-01-20", "format_mismatch"),  # the description's MM/DD/YYYY
    (("orders", "O0001", "updated_at"), "yesterday", "format_mismatch"),  # format date-time
    (("users", "U0001", "email"), "ava at example", "format_mismatch"),  # format email
])
def test_type_and_format_mismatches(path, value, kind):
    found = state_findings(SCHEMA, _bad(path, value))
    assert kinds(found) == {kind}, found


def test_a_format_template_in_a_description_is_the_format_of_temporal_fields_only():
    schema = {"type": "string", "description": "Value to set; for date fields use YYYY-MM-DD."}
    assert value_mismatch("blue", schema, "value") is None
    assert value_mismatch("blue", schema, "due_date") == "not in the documented format YYYY-MM-DD"


def test_a_kind_rejects_by_its_registry_flag(monkeypatch):
    assert {k for k in FINDING_KINDS if rejects(k)} == {"dangling_reference", "nested_reference", "placeholder",
                                                        "empty_container", "type_mismatch", "format_mismatch",
                                                        "write_outside_effect"}
    found = state_findings(SCHEMA, _bad(("orders", "O0001", "status"), "lost"))
    assert found and rejecting(found) == found and all(f.rejects for f in found)
    import dataclasses
    monkeypatch.setitem(FINDING_KINDS, "format_mismatch", dataclasses.replace(FINDING_KINDS["format_mismatch"], rejects=False))
    assert rejecting(found) == [] and not any(f.rejects for f in found)


TOOLS = {t.name: t for t in [
    ToolCode(code_id="c1", env_id="e", tool_id="t1", name="update_order_address", source="", status="accepted",
             effect="write", kind="update", collection="orders",
             parameters={"type": "object", "required": ["order_id", "address"],
                         "properties": {"order_id": {"type": "string"},
                                        "address": {"type": "object", "required": ["city"],
                                                    "properties": {"city": {"type": "string"}}},
                                        "date": {"type": "string", "format": "date"},
                                        "count": {"type": "integer"}}}),
    ToolCode(code_id="c2", env_id="e", tool_id="t2", name="cancel_order", source="", status="accepted",
             effect="write", kind="status", collection="orders",
             parameters={"type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}),
]}


@pytest.mark.parametrize("args, kind", [
    ({"order_id": "O0001", "address": {}}, "empty_container"),  # a required argument left empty
    ({"order_id": "O0001", "address": {"zip": "97201"}}, "empty_container"),  # a required key missing
    ({"order_id": "", "address": {"city": "Portland"}}, "placeholder"),  # a required string left empty
    ({"order_id": "O0001", "address": {"city": "Portland"}, "date": "YYYY-MM-DD"}, "placeholder"),
    ({"order_id": "O0001", "address": {"city": "Portland"}, "date": "10 Jan"}, "type_mismatch"),
    ({"order_id": "O0001", "address": {"city": "Portland"}, "count": "3"}, "type_mismatch"),
])
def test_gold_argument_findings(args, kind):
    good = [ToolCall(name="update_order_address", arguments={"order_id": "O0001", "address": {"city": "Portland"},
                                                             "date": "2025-01-12", "count": 3})]
    assert argument_findings(good, TOOLS) == []
    found = argument_findings([ToolCall(name="update_order_address", arguments=args)], TOOLS)
    assert kind in kinds(found) and all(f.path.startswith("call 1 (update_order_address)") for f in found)


def _after(state: dict, **changes) -> dict:
    out = copy.deepcopy(state)
    for dotted, v in changes.items():
        coll, key, field = dotted.split("__")
        out[coll][key][field] = v
    return out


def test_a_write_that_changes_only_what_it_names_passes():
    call = ToolCall(name="cancel_order", arguments={"order_id": "O0001"})
    after = _after(GOOD, orders__O0001__status="cancelled", orders__O0001__updated_at="2025-01-15T10:00:00")
    assert write_findings([call], TOOLS, [(GOOD, after)], SCHEMA) == []
    # a number of a record whose named field changed follows it (a derived total)
    derived = _after(after, orders__O0001__total=0.0)
    assert write_findings([call], TOOLS, [(GOOD, derived)], SCHEMA) == []
    # ... but a number of a record the call neither names nor otherwise changes does not
    two = copy.deepcopy(GOOD)
    two["orders"]["O0002"] = {**two["orders"]["O0001"], "order_id": "O0002"}
    other = _after(two, orders__O0001__status="cancelled", orders__O0002__total=0.0)
    found = write_findings([call], TOOLS, [(two, other)], SCHEMA)
    assert [(f.kind, f.path) for f in found] == [("write_outside_effect", "call 1 (cancel_order): orders.O0002.total")]


@pytest.mark.parametrize("changes, where", [
    ({"orders__O0001__payment_method": "gift card"}, "orders.O0001.payment_method"),  # an unrelated field
    ({"products__P0001__price": 1.0}, "products.P0001"),  # a collection it does not name
])
def test_writes_outside_the_stated_effect(changes, where):
    call = ToolCall(name="cancel_order", arguments={"order_id": "O0001"})
    after = _after(GOOD, orders__O0001__status="cancelled", **changes)
    found = write_findings([call], TOOLS, [(GOOD, after)], SCHEMA)
    assert [f.kind for f in found] == ["write_outside_effect"] and where in found[0].path


def test_a_description_names_what_a_write_may_change():
    call = ToolCall(name="cancel_order", arguments={"order_id": "O0001"})
    after = _after(GOOD, orders__O0001__status="cancelled", orders__O0001__payment_method="refunded")
    assert write_findings([call], TOOLS, [(GOOD, after)], SCHEMA) != []
    said = {"cancel_order": "Cancel an order and refund its payment method."}
    assert write_findings([call], TOOLS, [(GOOD, after)], SCHEMA, said) == []


def test_task_findings_cover_state_arguments_and_writes():
    bad_state = _bad(("orders", "O0001", "user_id"), "U0404")
    call = ToolCall(name="cancel_order", arguments={"order_id": "O0001"})
    after = _after(bad_state, orders__O0001__status="cancelled", orders__O0001__payment_method="x")
    task = Task(task_id="t", env_id="e", dag_id="d", request="", user_facts={}, initial_state=bad_state,
                gold_state=after, gold_state_hash="h", gold_calls=[call], n_tool_calls=1, dag_depth=1,
                n_reasoning_nodes=0, n_requirements=1)
    found = task_findings(SCHEMA, task, TOOLS, [(bad_state, after)])
    assert kinds(found) == {"dangling_reference", "write_outside_effect"}
    assert found[0].path.startswith("initial state orders.O0001")
    assert counts(found) == {**dict.fromkeys(FINDING_KINDS, 0), "dangling_reference": 1, "write_outside_effect": 1}


def test_a_task_is_judged_on_the_records_its_gold_run_uses():
    state = _bad(("products", "P0001", "price"), "twenty")  # a product the task never sees
    call = ToolCall(name="cancel_order", arguments={"order_id": "O0001"})
    after = _after(state, orders__O0001__status="cancelled")
    task = Task(task_id="t", env_id="e", dag_id="d", request="", user_facts={}, initial_state=state,
                gold_state=after, gold_state_hash="h", gold_calls=[call], n_tool_calls=1, dag_depth=1,
                n_reasoning_nodes=0, n_requirements=1)
    assert used_records(state, [call], [(state, after)], [None]) == {("orders", "O0001")}
    assert task_findings(SCHEMA, task, TOOLS, [(state, after)], outputs=[None]) == []
    shown = task_findings(SCHEMA, task, TOOLS, [(state, after)], outputs=[{"product_id": "P0001"}])
    assert [(f.kind, f.path) for f in shown] == [("type_mismatch", "initial state products.P0001.price")]


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="valid"):
        Finding("odd", "p", 1, "m")


# --------------------------------------------------------------------------- stored and shown (warehouse)

def test_the_warehouse_holds_the_findings_after_synthesis_and_verification(warehouse):
    import dags_mock as m
    from autoforge.envs.synthesis import SynthesisResult
    from autoforge.pipeline import synthesize, verify
    from autoforge.tasks.execute import run_dag
    from autoforge.types import Run, WorldCheck, content_id, state_hash
    from autoforge.warehouse import query, read_records, write_records

    # synthesis: the sample state's findings are stored, and the environment is kept
    env, tools = m.make_env(), m.make_tools()
    sample = copy.deepcopy(m.STATE)
    sample["orders"]["O0004"]["user_id"] = "U0999"  # dangling
    sample["users"]["U0002"]["tier"] = "platinum"  # outside the enum
    env = env.model_copy(update={"sample_state": sample})
    run, _, _ = synthesize.persist_results(warehouse, [SynthesisResult(env, tools, [])], Run.make("synthesize"))
    assert run.counts["world_findings"] == 2
    rows = read_records(warehouse, WorldCheck)
    assert {(r.task_id, r.kind, r.path, r.value) for r in rows} == {
        (None, "dangling_reference", "orders.O0004.user_id", '"U0999"'),
        (None, "format_mismatch", "users.U0002.tier", '"platinum"')}
    view = synthesize.world_check_rows(warehouse, names=["mock_shop"])
    assert [(r["status"], r["sample_findings"], r["sample_kinds"]) for r in view] == [
        ("ready", 2, {"dangling_reference": 1, "format_mismatch": 1})]

    # verification: a task whose gold run uses a record naming a missing product is rejected, with its findings stored
    dag = m.gold_dag()

    def task(name: str, state: dict) -> Task:
        done = run_dag(m.LocalEnvironment(tools), dag, state, dict(m.GOLD_FACTS))
        return Task(task_id=content_id("task", name), env_id=m.ENV_ID, dag_id=dag.dag_id,
                    request="Please cancel my most expensive order.", user_facts=dict(m.GOLD_FACTS),
                    initial_state=copy.deepcopy(state), gold_state=done.final_state,
                    gold_state_hash=state_hash(done.final_state), gold_calls=done.calls, n_tool_calls=3, dag_depth=4,
                    n_reasoning_nodes=1, n_requirements=1)

    bad_state = copy.deepcopy(m.STATE)
    bad_state["orders"]["O0002"]["product_id"] = "P0404"  # the order the task cancels
    good, bad = task("good", m.STATE), task("bad", bad_state)
    write_records(warehouse, [dag, good, bad])
    verify.run(warehouse, verify.VerifyParams())
    status = {t.task_id: t.status for t in read_records(warehouse, Task)}
    assert status == {good.task_id: "verified", bad.task_id: "rejected"}
    reason = query(warehouse, "SELECT reason FROM verification_results WHERE task_id = :t AND \"check\" = 'world'",
                   {"t": bad.task_id}, read_only_check=False)[0]["reason"]
    assert "dangling_reference at initial state orders.O0002.product_id: 'P0404'" in reason
    stored = [r for r in read_records(warehouse, WorldCheck) if r.task_id is not None]
    assert {(r.task_id, r.kind, r.path) for r in stored} == {
        (bad.task_id, "dangling_reference", "initial state orders.O0002.product_id")}
    (row,) = synthesize.world_check_rows(warehouse)
    assert (row["tasks_with_findings"], row["rejected_with_findings"], row["verified_with_rejecting_findings"],
            row["task_kinds"]) == (1, 1, 0, {"dangling_reference": 1})


def test_a_sample_value_fills_a_required_list():
    """An option group's required ``choices`` (a list of strings) is never ``[]`` in a sample value;
    an optional list may stay empty."""
    from autoforge.envs.sample import value_for

    group = {"type": "object", "required": ["name", "choices"],
             "properties": {"name": {"type": "string"}, "choices": {"type": "array", "items": {"type": "string"}},
                            "notes": {"type": "array", "items": {"type": "string"}}}}
    for i in range(3):
        v = value_for(group, "option", i, {})
        assert v["choices"] and all(isinstance(c, str) and c for c in v["choices"]), v
        assert v["notes"] == []
