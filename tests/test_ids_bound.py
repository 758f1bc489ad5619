"""The ``ids_bound`` check: every id a gold call passes was told to the user or returned earlier."""

from __future__ import annotations

from autoforge.tasks.checks import CHECKS
from autoforge.tasks.quality import check_ids_bound
from autoforge.types import ToolCall, ToolCode

KEYS = {"user_id", "reservation_id", "flight_id"}


def _tool(name: str, effect: str, **arg_map: str) -> ToolCode:
    return ToolCode(code_id=f"code_{name}", env_id="env_t", tool_id=f"tool_{name}", name=name, source="", status="accepted",
                    effect=effect, arg_map=arg_map)


TOOLS = {t.name: t for t in (_tool("get_user", "read"), _tool("cancel_reservation", "write"), _tool("book", "write"),
                              _tool("publish", "write", slug="reservation_id"))}


def test_an_id_from_nowhere_is_rejected_with_the_argument_and_value():
    calls = [ToolCall(name="cancel_reservation", arguments={"reservation_id": "R0042"}, id="n0")]
    why = check_ids_bound(calls, {"n0": {"ok": True}}, {"email": "ava@example.com"}, "Cancel my trip, please.", TOOLS, KEYS)
    assert why is not None and "cancel_reservation" in why and "reservation_id='R0042'" in why
    assert "ids_bound" in CHECKS


def test_a_told_id_passes_in_the_facts_or_the_request():
    calls = [ToolCall(name="cancel_reservation", arguments={"reservation_id": "R0042"}, id="n0")]
    assert check_ids_bound(calls, {}, {"reservation_id": "R0042"}, "Cancel my trip.", TOOLS, KEYS) is None
    assert check_ids_bound(calls, {}, {}, "Cancel reservation R0042.", TOOLS, KEYS) is None
    assert check_ids_bound(calls, {}, {}, "Cancel reservation R00421.", TOOLS, KEYS) is not None  # a whole token only


def test_a_returned_id_passes_only_when_an_earlier_call_returned_it():
    calls = [ToolCall(name="get_user", arguments={"user_id": "U1"}, id="n0"),
             ToolCall(name="cancel_reservation", arguments={"reservation_id": "R0042"}, id="n1")]
    outputs = {"n0": {"user_id": "U1", "reservations": [{"reservation_id": "R0042"}]}, "n1": {"ok": True}}
    assert check_ids_bound(calls, outputs, {"user_id": "U1"}, "Cancel my trip.", TOOLS, KEYS) is None
    # the same value returned only by the call itself (or a later one) does not bind it
    late = [calls[1], calls[0]]
    why = check_ids_bound(late, outputs, {"user_id": "U1"}, "Cancel my trip.", TOOLS, KEYS)
    assert why is not None and "gold call 1" in why
    # records keyed by their id count as returned; numbers and strings are one id
    keyed = {"n0": {"reservations": {"R0042": {"status": "booked"}}}}
    assert check_ids_bound(calls, keyed, {"user_id": "U1"}, "", TOOLS, KEYS) is None
    assert check_ids_bound([ToolCall(name="cancel_reservation", arguments={"reservation_id": 7}, id="n0")], {},
                           {"booking": "7"}, "", TOOLS, KEYS) is None


def test_ids_inside_objects_and_lists_and_the_code_names_are_checked():
    nested = [ToolCall(name="book", arguments={"legs": [{"flight_id": "F9", "seat": "12A"}], "note": "window"}, id="n0")]
    why = check_ids_bound(nested, {}, {}, "", TOOLS, KEYS)
    assert why is not None and "legs.0.flight_id='F9'" in why
    assert check_ids_bound(nested, {}, {"legs": [{"flight_id": "F9", "seat": "12A"}]}, "", TOOLS, KEYS) is None
    listed = [ToolCall(name="book", arguments={"flight_ids": ["F1", "F2"]}, id="n0")]
    why = check_ids_bound(listed, {}, {"first": "F1"}, "", TOOLS, KEYS)
    assert why is not None and "flight_ids.1='F2'" in why
    # a parameter the code knows as a key (ToolCode.arg_map) is one, whatever the docs call it
    slug = [ToolCall(name="publish", arguments={"slug": "how-to-fly"}, id="n0")]
    assert check_ids_bound(slug, {}, {}, "", TOOLS, KEYS) is not None
    assert check_ids_bound(slug, {}, {"article": "how-to-fly"}, "", TOOLS, KEYS) is None
    # data that is not an identifier is never checked
    assert check_ids_bound([ToolCall(name="book", arguments={"seat": "12A"}, id="n0")], {}, {}, "", TOOLS, KEYS) is None
