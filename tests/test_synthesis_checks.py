"""The acceptance checks: every failure mode is rejected with its reason, and stored as a Rejection."""

from __future__ import annotations

import pytest
from test_synthesis_mockdomain import S, mock_specs, mock_toolset, obj, spec

from autoforge.envs.checks import check_tool, output_fits, static_check
from autoforge.envs.synthesis import synthesize_environment
from autoforge.types import ToolCode

STATE = {"items": {"I0001": {"item_id": "I0001", "name": "Lamp", "qty": 2}}}


def tool(source: str, name: str = "get_item", output_schema=None) -> ToolCode:
    params = {"type": "object", "properties": {"item_id": {"type": "string"}}, "required": ["item_id"]}
    return ToolCode(code_id="c", env_id="e", tool_id="t", name=name, source=source, status="accepted",
                    parameters=params, output_schema=output_schema)


GOOD = '''
def get_item(state, item_id):
    record = state["items"].get(item_id)
    if record is None:
        return error("item " + item_id + " not found")
    return copy(record)
'''


@pytest.mark.parametrize("source,reason", [
    ("def get_item(state, item_id:\n    return 1\n", "syntax_error"),
    ("import os\ndef get_item(state, item_id):\n    return os.listdir('/')\n", "unsafe_code"),
    ("def get_item(state, item_id):\n    return open('/etc/passwd').read()\n", "unsafe_code"),
    ("def get_item(state, item_id):\n    return ().__class__.__base__.__subclasses__()\n", "unsafe_code"),
    ("def get_item(state, item_id):\n    return state['missing'][item_id]\n", "crashed"),
    ("def get_item(state, item_id):\n    return {'error': 404}\n", "malformed_error"),
    ("def get_item(state, item_id):\n    state['items'].clear()\n    return {'error': 'no'}\n", "error_changed_state"),
    ("def get_item(state, item_id):\n    while True:\n        pass\n", "timeout"),
    ("def get_item(state):\n    return {}\n", "invalid_arguments"),
])
def test_each_failure_is_rejected_with_its_reason(source, reason):
    res = check_tool(tool(source), STATE, {"item_id": "I0001"}, timeout_s=0.5)
    assert not res.ok and res.reason == reason, res.message()
    assert res.detail


def test_good_code_passes_and_output_schema_is_checked():
    assert check_tool(tool(GOOD), STATE, {"item_id": "I0001"}).ok
    assert check_tool(tool(GOOD), STATE, {"item_id": "nope"}).ok  # a well-formed error is fine
    promised = {"type": "object", "properties": {"item_id": {"type": "string"}, "price": {"type": "number"}},
                "required": ["item_id", "price"]}
    res = check_tool(tool(GOOD, output_schema=promised), STATE, {"item_id": "I0001"})
    assert res.reason == "output_mismatch" and "price" in res.detail
    assert output_fits({"item_id": "I1", "price": None}, promised) is None  # nulls are allowed
    assert static_check(GOOD, "get_item").ok


def test_a_tool_that_cannot_be_written_is_rejected_and_stored(monkeypatch):
    """A tool whose generated code breaks the sandbox rules is rejected, and the rejection stored.

    (Names that are not identifiers, such as ``orders.export``, are accepted since they get a
    Python name: tests/test_envs_names.py.)"""
    import autoforge.envs.synthesis as synthesis

    real = synthesis.offline_tool_code

    def broken(spec_, plan, schema, **kw):
        draft = real(spec_, plan, schema, **kw)
        if spec_.name == "orders.export":
            draft.source = "import os\n" + draft.source
        return draft

    monkeypatch.setattr(synthesis, "offline_tool_code", broken)
    specs = mock_specs() + [spec("orders.export", "Export orders.", {"user_id": S}, ["user_id"], obj({}), "read")]
    res = synthesize_environment(mock_toolset(specs), specs)
    bad = next(t for t in res.tools if t.name == "orders.export")
    assert bad.status == "rejected" and bad.reason.startswith("unsafe_code")
    assert bad.function_name == "orders_export"
    assert res.environment.status == "partial" and res.environment.n_tools_accepted == len(specs) - 1
    assert "orders.export" in res.environment.reason
    (rej,) = res.rejections
    assert rej.stage == "synthesize" and rej.item_id == bad.tool_id and rej.reason == "unsafe_code"
    assert "import of 'os' is not allowed" in rej.detail
    # env ids are content hashes: the same docs give the same environment
    assert synthesize_environment(mock_toolset(specs), specs).environment.env_id == res.environment.env_id


def test_odd_tool_sets_synthesize_without_raising():
    """Keyword parameter names, no parameters, union types, nested objects, top-level arrays."""
    N = {"type": "number"}
    specs = [
        spec("ping", "Health check.", {}, [], None, "read", toolset="odd"),
        spec("search_trips", "Search trips.", {"from": S, "to": S, "class": {"type": "string", "enum": ["eco", "biz"]},
                                               "max_price": {"anyOf": [N, {"type": "null"}]}}, ["from"],
             {"type": "array", "items": obj({"trip_id": S, "from": S, "to": S, "price": N})}, "read", toolset="odd"),
        spec("create_trip", "Create a trip.", {"from": S, "to": S, "meta": obj({"note": S}, ["note"])}, ["from", "to"],
             obj({"trip_id": S}), "write", toolset="odd"),
        spec("getTrip", "Get a trip.", {"trip_id": {"type": "string", "pattern": "^TR\\d{3}$"}}, ["trip_id"], None, "read",
             toolset="odd"),
    ]
    res = synthesize_environment(mock_toolset(specs), specs)
    by = {t.name: t for t in res.tools}
    assert by["search_trips"].status == "accepted", by["search_trips"].reason
    assert by["search_trips"].arg_map == {"from": "from_", "class": "class_"}  # keywords get Python names
    assert "def search_trips(state, from_, to=None, class_=None" in by["search_trips"].source
    assert by["create_trip"].status == "accepted" and by["getTrip"].status == "accepted"
    trips = next(c for c in res.environment.state_schema.collections if c.name == "trips")
    assert (trips.id_prefix, trips.id_width) == ("TR", 3)
    assert all(k.startswith("TR") and len(k) == 5 for k in res.environment.sample_state["trips"])
    assert res.environment.n_tools_accepted >= 3
