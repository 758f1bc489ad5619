"""domain.placeholders: documentation hints are told from values, and verify rejects tasks holding them."""

import pytest

from autoforge.domain.placeholders import find_placeholders, placeholder_reason
from autoforge.tasks.checks import CHECKS
from autoforge.tasks.verify import check_placeholders
from autoforge.types import Task, ToolCall, ToolCode


@pytest.mark.parametrize("value", [
    "YYYY-MM-DD", "HH:MM", "MM/DD/YYYY", "DD/MM/YYYY", "YYYY-MM-DDTHH:MM:SSZ", "YYYY-MM-DD HH:mm:ss", "hh:mm",
    "YYYY", "YYYY-MM-DDTHH:MM:SS+HH:MM", "string", "String", "integer", "boolean", "object", "e.g. Paris",
    "E.g. 2024-01-01", "for example, Seattle", "<user_id>", "<your email>", "{{name}}", "{order_id}", "[CUSTOMER_NAME]",
    "xxx", "XXXX-XXXX", "TBD", "example", "Sample", "foo", "placeholder", "***"])
def test_placeholders_are_found(value):
    assert placeholder_reason(value)


@pytest.mark.parametrize("value", [
    "2025-01-02", "14:30", "01/02/2025", "2025-01-02T10:00:00Z", "Seattle", "a@example.com",
    "https://shop.example.com/p-1", "a sample of soil", "MM", "DD", "Strings and things", "number", "date", "list", "double", "todo", "bar", "ID-0042", "x", "",
    "The example given was wrong", "<b>", "1 < 2 > 0", 12, 0, None, True, 3.5])
def test_values_are_not_placeholders(value):
    assert placeholder_reason(value) is None


def test_paths_and_required_empties():
    state = {"orders": {"O1": {"date": "YYYY-MM-DD", "items": [{"sku": "ok"}, {"sku": "<sku>"}]}}}
    assert [p for p, _ in find_placeholders(state)] == ["orders.O1.date", "orders.O1.items[1].sku"]
    args = {"name": "", "tags": [], "meta": {}, "note": ""}
    assert sorted(p for p, _ in find_placeholders(args, required=["name", "tags", "meta"])) == ["meta", "name", "tags"]
    assert list(find_placeholders(args)) == []
    assert list(find_placeholders({"kind": "string"}, allowed=["string", "int"])) == []
    assert [p for p, _ in find_placeholders({"kind": "string"})] == ["kind"]


def _task(args, state):
    return Task(task_id="t", env_id="e", dag_id="d", request="r", user_facts={}, initial_state=state, gold_state=state,
                gold_state_hash="h", gold_calls=[ToolCall(name="book", arguments=args)], n_tool_calls=1, dag_depth=1,
                n_reasoning_nodes=0, n_requirements=0)


def test_verify_check_names_value_and_place():
    assert "no_placeholders" in CHECKS
    tool = ToolCode(code_id="c", env_id="e", tool_id="t", name="book", source="", status="accepted",
                    parameters={"type": "object", "properties": {"date": {"type": "string"}, "who": {"type": "string"}},
                                "required": ["date", "who"]})
    tools = {"book": tool}
    why = check_placeholders(_task({"date": "YYYY-MM-DD", "who": "Ann"}, {}), tools)
    assert "date" in why and "YYYY-MM-DD" in why and "book" in why
    assert "who" in check_placeholders(_task({"date": "2025-03-01", "who": ""}, {}), tools)
    assert "flights.F1.day" in check_placeholders(_task({"date": "2025-03-01", "who": "Ann"},
                                                        {"flights": {"F1": {"day": "HH:MM"}}}), tools)
    assert check_placeholders(_task({"date": "2025-03-01", "who": "Ann"}, {"flights": {"F1": {"day": "Mon"}}}), tools) is None


@pytest.mark.parametrize("desc, name, shape", [
    ("The travel date, YYYY-MM-DD", "when", r"2025-\d\d-\d\d"), ("Day such as 'MM/DD/YYYY'", "day", r"\d\d/\d\d/2025"),
    ("Start time (HH:MM)", "start_time", r"\d\d:\d\d"), ("timestamp YYYY-MM-DDTHH:MM:SSZ", "ts", r"2025-\d\d-\d\dT\d\d:\d\d:00Z"),
    ("Date, e.g. \"DD.MM.YYYY\"", "x", r"\d\d\.\d\d\.2025")])
def test_a_format_hint_gives_a_value_of_that_format(desc, name, shape):
    import re
    from autoforge.domain.values import format_hint
    from autoforge.envs.sample import schema_value
    ps = {"type": "string", "description": desc}
    assert format_hint(desc) and placeholder_reason(format_hint(desc))
    for value in (schema_value(ps, name), schema_value(ps, name, 7)):
        assert re.fullmatch(shape, value) and placeholder_reason(value) is None, value
    assert schema_value({"type": "string", "default": "YYYY-MM-DD", "description": desc}, name) != "YYYY-MM-DD"
