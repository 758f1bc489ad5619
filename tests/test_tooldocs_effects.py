"""Read/write effects from all signals, and the tool-set kind (autoforge/tooldocs/effects.py).

Fixtures in tests/fixtures/realstyle/effects_*.json imitate styles of real documentation (a shell-like
file system, a calculator, web search, a CRUD set with camelCase/dotted names, descriptions that say
nothing changes, MCP annotations). The real documents in ../shared/realdocs are read when present.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from autoforge.tooldocs import ingest_bundled, ingest_paths, parse_document
from autoforge.tooldocs.effects import (
    READ_VERBS,
    SHELL_READ,
    SHELL_WRITE,
    WRITE_VERBS,
    classify_toolset,
    states_no_change,
    tool_effect,
    toolset_kind,
    verb_effect,
)

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"
REALDOCS = Path(__file__).resolve().parent.parent.parent / "shared" / "realdocs"


def ingest(stem: str):
    result = ingest_paths([FIXTURES / f"{stem}.json"])
    assert result.errors == [], result.errors
    return result


def effects_of(stem: str) -> dict[str, str]:
    return {s.name: s.effect for s in ingest(stem).specs}


# --------------------------------------------------------------------------- fixtures, tool by tool


EXPECTED = {
    "effects_filesystem": {
        "read": "ls cat pwd head tail grep find du wc diff",
        "write": "cd mkdir touch rm mv cp echo",
    },
    "effects_calculator": {
        "read": "add subtract multiply divide mean median logarithm si_unit_conversion celsius_to_fahrenheit "
                "round_number power hypot",
    },
    "effects_websearch": {"read": "web_search fetch_page translate_text wiki_summary"},
    "effects_crud": {
        "read": "getNote listNotes note_search word_count notebook_stats",
        "write": "createNote updateNote deleteNote add_tag add_to_favorites notes.share pin_note unpin_note",
        "unknown": "renumber_notebook",  # a verb we do not know stays unknown in a stateful set
    },
    "effects_nochange": {
        "read": "update_preview dry_run_import sync_now",
        "write": "purge_trash reset_counter audit_log delete_simulation",
        "unknown": "process_batch",
    },
    "effects_mcp": {
        "read": "create_snapshot issue_read list_labels",
        "write": "get_and_reset_counter issue_write",
        "unknown": "label_triage",
    },
}


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_fixture_effects(stem):
    got = effects_of(stem)
    want = {name: effect for effect, names in EXPECTED[stem].items() for name in names.split()}
    assert got == want


@pytest.mark.parametrize(
    "stem,kind",
    [("effects_calculator", "stateless"), ("effects_websearch", "stateless"), ("effects_filesystem", "stateful"),
     ("effects_crud", "stateful"), ("effects_nochange", "stateful"), ("effects_mcp", "stateful")],
)
def test_toolset_kind(stem, kind):
    specs = ingest(stem).specs
    assert toolset_kind(specs) == kind
    effects, k = classify_toolset(specs)
    assert k == kind and effects == {s.name: s.effect for s in specs}  # ingest already applied the set-level pass


def test_stateless_set_turns_unknown_tools_into_reads_only_there():
    calc = parse_document((FIXTURES / "effects_calculator.json").read_text(), "calc.json")
    per_tool = {t.name: t.effect for t in calc.tools}
    assert per_tool["hypot"] == "unknown"  # nothing in its name or description names a verb
    assert effects_of("effects_calculator")["hypot"] == "read"  # ... but all its siblings are pure functions
    # the same tool next to a tool that writes stays unknown
    hypot = next(t for t in calc.tools if t.name == "hypot")
    store = {"name": "store_result", "description": "Save a result.", "parameters": {"type": "object", "properties": {}},
             "effect": "write"}
    effects, kind = classify_toolset([hypot, store])
    assert kind == "stateful" and effects["hypot"] == "unknown"


def test_stateless_needs_no_reference_to_stored_things():
    def spec(name, props, effect="read"):
        return {"name": name, "description": "", "effect": effect,
                "parameters": {"type": "object", "properties": {p: {"type": "string"} for p in props}}}

    assert toolset_kind([spec("get_weather", ["city"]), spec("get_time", ["timezone"])]) == "stateless"
    assert toolset_kind([spec("get_order", ["order_id"]), spec("get_time", [])]) == "stateful"  # an id
    assert toolset_kind([spec("list_orders", []), spec("get_time", [])]) == "stateful"  # a collection
    assert toolset_kind([spec("read_file", ["path"])]) == "stateful"  # a file
    assert toolset_kind([spec("a", []), spec("b", [], "unknown"), spec("c", [], "unknown")]) == "stateful"
    assert toolset_kind([]) == "stateful"


# --------------------------------------------------------------------------- rules


@pytest.mark.parametrize(
    "name,description,effect",
    [
        # shell commands: only a whole name is a command
        ("ls", "", "read"), ("rm", "", "write"), ("cat_facts", "Fun facts about cats.", "unknown"),
        # arithmetic verbs read on quantities, are verbs otherwise
        ("add", "Add two numbers.", "read"), ("add_numbers", "", "read"), ("add_contact", "", "write"),
        ("add", "Add a key-value pair to the memory.", "write"), ("add_funds", "Add funds.", "write"),
        ("convert_currency", "", "read"), ("convert_lead", "Converts a lead into a customer.", "unknown"),
        ("power", "Raises a number to a power.", "read"), ("raise_ticket", "", "write"),
        # the description's action sentence, after context, labels and subjects
        ("x", "This tool belongs to the Y suite. It is a system that allows creating things. "
              "Tool description: Display the balance.", "read"),
        ("x", "This function queries the index.", "read"),
        ("x", "Use this tool to permanently delete a record.", "write"),
        ("x", "Tool to create a new issue.", "write"),
        ("x", "Return the current working directory path.", "read"),
        ("x", "This will replace the existing content.", "write"),
        ("x", "Log in a user.", "write"), ("x", "Checks a guest in.", "write"),
        ("x", "Process a payment. Returns the receipt.", "unknown"),  # a later "returns" says nothing
        # verb at the end of a name, dotted names
        ("issue_read", "", "read"), ("trading_login", "Handle user login.", "write"),
        ("pets.update_weight", "", "write"), ("owners.get", "", "read"), ("daily_report", "", "read"),
        ("event_log", "", "unknown"),
        # computation / report nouns
        ("standard_deviation", "", "read"), ("account_info", "", "read"),
        # prefixes
        ("reassign_trainer", "", "write"), ("unfollow_user", "", "write"), ("recount_votes", "", "read"),
        # statements about change
        ("update_preview", "Preview only; does not modify the database.", "read"),
        ("purge", "This operation is irreversible.", "write"),
        ("cancel_order", "Cancel an order. Does not change the status of shipped orders.", "write"),
    ],
)
def test_tool_effect(name, description, effect):
    assert tool_effect(name, description) == effect


def test_arguments_decide_a_bare_arithmetic_verb():
    numbers = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    money = {"type": "object", "properties": {"amount": {"type": "number"}}}
    ids = {"type": "object", "properties": {"item_id": {"type": "string"}, "qty": {"type": "integer"}}}
    assert tool_effect("add", "", numbers) == "read"
    assert tool_effect("add", "", money) == "write"
    assert tool_effect("add", "", ids) == "write"
    assert tool_effect("gallon_to_liter", "", {"type": "object", "properties": {"gallon": {"type": "number"}}}) == "read"
    assert verb_effect("add") == "write"  # no arguments: the verb list


def test_states_no_change():
    for text in ("This tool will not change the database.", "Never modifies state.", "Has no side effects.",
                 "This endpoint is read-only.", "Read-only.", "Runs without modifying any data."):
        assert states_no_change(text), text
    for text in ("Does not change the status if locked.", "Updates a read-only flag? no", "Deletes data.", ""):
        assert not states_no_change(text), text


def test_verb_lists_are_disjoint():
    assert not READ_VERBS & WRITE_VERBS
    assert not SHELL_READ & SHELL_WRITE


# --------------------------------------------------------------------------- explicit hints win


def test_explicit_hints_win_over_every_heuristic():
    doc = (
        '[{"name": "get_and_clear", "description": "Does not modify the database.", "x-effect": "write",'
        ' "parameters": {"type": "object", "properties": {}}},'
        ' {"name": "delete_preview", "readOnly": true, "parameters": {"type": "object", "properties": {}}}]'
    )
    effects = {t.name: t.effect for t in parse_document(doc, "hints.json").tools}
    assert effects == {"get_and_clear": "write", "delete_preview": "read"}
    mcp = effects_of("effects_mcp")
    assert mcp["create_snapshot"] == "read" and mcp["get_and_reset_counter"] == "write"  # annotations beat verbs


OPENAPI = """
openapi: 3.0.3
info: {title: t, version: '1'}
paths:
  /search:
    post:
      operationId: searchItems
      summary: Search items. Does not modify any data.
      responses: {'200': {description: ok}}
  /items:
    post:
      operationId: findOrCreateItem
      summary: Find an item.
      responses: {'200': {description: ok}}
    get:
      operationId: deleteStaleCache
      responses: {'200': {description: ok}}
  /things:
    post:
      operationId: getThing
      x-effect: read
      summary: Irreversible.
      responses: {'200': {description: ok}}
"""


def test_http_method_is_a_hint_unless_the_description_says_nothing_changes():
    effects = {t.name: t.effect for t in parse_document(OPENAPI, "api.yaml").tools}
    assert effects == {"searchItems": "read", "findOrCreateItem": "write", "deleteStaleCache": "read",
                       "getThing": "read"}


# --------------------------------------------------------------------------- corpora


def test_bundled_corpus_is_decided_by_names_alone():
    bundled = ingest_bundled()
    assert Counter(s.effect for s in bundled.specs)["unknown"] == 0
    for spec in bundled.specs:
        assert tool_effect(spec.name) == spec.effect, spec.name  # descriptions never flip a bundled tool
    for ts in bundled.toolsets:
        assert toolset_kind([s for s in bundled.specs if s.toolset == ts.name]) == "stateful", ts.name


def realdocs(folder: str):
    path = REALDOCS / folder
    if not path.is_dir():
        pytest.skip(f"{path} is absent (real documentation lives outside the repository)")
    result = ingest_paths([path])
    assert result.errors == [], result.errors
    return result.specs


@pytest.mark.parametrize("folder", ["bfcl_math_api", "bfcl_web_search"])
def test_realdocs_stateless_sets(folder):
    specs = realdocs(folder)
    assert toolset_kind(specs) == "stateless"
    assert {s.effect for s in specs} == {"read"}


def test_realdocs_file_system():
    effects = {s.name: s.effect for s in realdocs("bfcl_gorilla_file_system")}
    for name in ("ls", "cat", "pwd", "find", "grep", "du", "wc", "diff", "tail", "sort"):
        assert effects[name] == "read", name
    for name in ("cd", "mkdir", "rm", "rmdir", "mv", "cp", "touch", "echo"):
        assert effects[name] == "write", name


@pytest.mark.parametrize(
    "folder",
    ["bfcl_gorilla_file_system", "bfcl_memory_kv", "bfcl_memory_rec_sum", "bfcl_memory_vector", "bfcl_message_api",
     "bfcl_posting_api", "bfcl_ticket_api", "bfcl_trading_bot", "bfcl_travel_booking", "bfcl_vehicle_control",
     "mcp_github_issues", "openapi_petstore", "openapi_realworld_conduit"],
)
def test_realdocs_stateful_sets(folder):
    specs = realdocs(folder)
    counts = Counter(s.effect for s in specs)
    assert toolset_kind(specs) == "stateful"
    assert counts["read"] >= 1 and counts["write"] >= 1 and counts["unknown"] <= 1, counts
