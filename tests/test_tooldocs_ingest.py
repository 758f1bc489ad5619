"""Batch ingestion: grouping into tool sets, rejected docs recorded, good docs never lost, ids idempotent;
and the bundled corpus (>= 10 tool sets of 8-20 tools mixing reads and writes)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from autoforge.tooldocs import DOC_FORMATS, bundled_corpus_path, ingest_bundled, ingest_paths
from autoforge.tooldocs.ingest import error_category
from autoforge.types import ToolDoc, ToolSet, ToolSpec


def fn(name: str, **props) -> dict:
    return {"name": name, "description": name.replace("_", " "),
            "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in props.items()},
                           "required": list(props)}}


def write(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


@pytest.fixture
def batch(tmp_path) -> Path:
    """shop/: two good docs, one bad JSON, one duplicate name, a README and a note. bank/: one MCP doc."""
    shop = tmp_path / "docs" / "shop"
    write(shop / "a_orders.json", [fn("get_order", order_id="string"), fn("cancel_order", order_id="string")])
    write(shop / "b_users.json", {"type": "function", "function": fn("find_user_id_by_email", email="string")})
    write(shop / "c_broken.json", '{"name": "x", "parameters": ')
    write(shop / "d_dupe.json", [fn("get_order", order_id="string")])
    write(shop / "e_notes.txt", "not a tool doc")
    write(shop / "README.md", "# shop\n\nA small shop for tests.\n")
    write(tmp_path / "docs" / "bank" / "tools.json",
          {"tools": [{"name": "get_balance", "inputSchema": {"type": "object", "properties": {"account_id": {"type": "string"}}},
                      "annotations": {"readOnlyHint": True}}]})
    return tmp_path / "docs"


def test_batch_with_bad_files_keeps_every_good_one(batch):
    result = ingest_paths([batch], run_id="run_test")
    by_name = {t.name: t for t in result.toolsets}
    assert set(by_name) == {"shop", "bank"}
    assert sorted(s.name for s in result.specs if s.toolset == "shop") == ["cancel_order", "find_user_id_by_email", "get_order"]
    assert by_name["shop"].n_tools == 3 and by_name["shop"].description == "A small shop for tests."
    assert by_name["bank"].n_tools == 1
    status = {Path(d.path).name: d.status for d in result.docs}
    assert status == {"a_orders.json": "accepted", "b_users.json": "accepted", "c_broken.json": "rejected",
                      "d_dupe.json": "rejected", "e_notes.txt": "rejected", "tools.json": "accepted"}
    assert len(result.errors) == 3 and not result.ok
    broken = next(d for d in result.docs if d.path.endswith("c_broken.json"))
    assert re.match(r".*c_broken\.json at 1:\d+: invalid JSON", broken.error)
    assert broken.content.startswith('{"name"')  # the raw text is kept for inspection
    dupe = next(d for d in result.docs if d.path.endswith("d_dupe.json"))
    assert "duplicate tool name 'get_order'" in dupe.error and "a_orders.json" in dupe.error and "at /0" in dupe.error
    assert all(r.run_id == "run_test" for r in result.records())
    cats = Counter(r.reason for r in result.rejections())
    assert cats == {"invalid_json": 1, "duplicate_tool_name": 1, "unsupported_file_type": 1}
    # every record round-trips through its model (what the warehouse writes)
    for rec in result.records():
        type(rec).model_validate(rec.model_dump())


def test_ids_are_content_hashes_and_reingest_is_idempotent(batch):
    a, b = ingest_paths([batch]), ingest_paths([batch])
    assert [r.model_dump() for r in a.records()] == [r.model_dump() for r in b.records()]
    assert len({s.tool_id for s in a.specs}) == len(a.specs)
    assert len({d.doc_id for d in a.docs}) == len(a.docs)
    ts = a.toolsets[0]
    assert set(ts.tool_ids) == {s.tool_id for s in a.specs if s.toolset == ts.name}
    # changing one schema changes that tool's id (and its tool set's), nothing else
    doc = batch / "shop" / "a_orders.json"
    write(doc, [fn("get_order", order_id="integer"), fn("cancel_order", order_id="string")])
    c = ingest_paths([batch])
    changed = {s.name for s in c.specs} - {s.name for s in c.specs if s.tool_id in {x.tool_id for x in a.specs}}
    assert changed == {"get_order"}


def test_single_file_is_its_own_toolset_and_duplicates_are_skipped(batch):
    f = batch / "bank" / "tools.json"
    result = ingest_paths([f, str(f)])
    assert [t.name for t in result.toolsets] == ["tools"]
    assert len(result.docs) == 1


def test_missing_path_and_empty_folder_are_errors_not_crashes(tmp_path, batch):
    (tmp_path / "empty").mkdir()
    result = ingest_paths([tmp_path / "nope", tmp_path / "empty", batch / "bank"])
    assert [t.name for t in result.toolsets] == ["bank"]
    assert any("no such file" in e for e in result.errors)
    assert any("no tool documents" in e for e in result.errors)


def test_markdown_doc_is_stored_as_needs_llm(tmp_path):
    md = write(tmp_path / "events" / "tools.md", "# Tools\n\n## buy_tickets\nBuy tickets.\n")
    result = ingest_paths([md.parent])
    [doc] = result.docs
    assert doc.status == "needs_llm" and doc.format == "markdown" and DOC_FORMATS["markdown"].needs_llm in doc.error
    assert result.toolsets == [] and result.needs_llm == [str(md)] and result.ok


def test_same_folder_name_twice_gets_qualified(tmp_path):
    write(tmp_path / "a" / "v1" / "t.json", fn("get_a", a_id="string"))
    write(tmp_path / "b" / "v1" / "t.json", fn("get_b", b_id="string"))
    result = ingest_paths([tmp_path / "a", tmp_path / "b"])
    assert [t.name for t in result.toolsets] == ["v1", "b.v1"]


@pytest.mark.parametrize(
    "message,category",
    [("x at 1:2: invalid JSON: Expecting value", "invalid_json"), ("x at /a/$ref: cyclic $ref (#/a -> #/a)", "cyclic_ref"),
     ("x: something odd", "invalid_schema")],
)
def test_error_category(message, category):
    assert error_category(message) == category


# --------------------------------------------------------------------------- bundled corpus


@pytest.fixture(scope="module")
def bundled():
    return ingest_bundled(run_id="run_bundled")


def test_bundled_corpus_parses_offline_without_errors(bundled):
    assert bundled.errors == []
    assert len(bundled.toolsets) >= 10
    formats = Counter(d.format for d in bundled.docs if d.status == "accepted")
    assert formats["openapi"] >= 1 and formats["mcp"] >= 1 and formats["openai"] >= 1
    assert all(d.path.startswith("autoforge/data/tooldocs/") for d in bundled.docs)  # machine-independent ids
    assert (bundled_corpus_path() / "README.md").is_file()


def test_bundled_toolsets_have_8_to_20_tools_with_reads_and_writes(bundled):
    for ts in bundled.toolsets:
        specs = [s for s in bundled.specs if s.toolset == ts.name]
        effects = Counter(s.effect for s in specs)
        assert 8 <= ts.n_tools == len(specs) <= 20, ts.name
        assert effects["read"] >= 3 and effects["write"] >= 3 and effects["unknown"] == 0, (ts.name, effects)
        assert ts.description, ts.name


def test_bundled_specs_are_self_contained_and_consistently_named(bundled):
    for spec in bundled.specs:
        blob = json.dumps([spec.parameters, spec.output_schema])
        assert "$ref" not in blob and "$defs" not in blob, spec.name
        assert spec.parameters["type"] == "object"
        assert spec.output_schema and spec.output_schema.get("type") == "object", spec.name
        assert spec.description, spec.name
        for pname, pschema in spec.parameters["properties"].items():
            if pname.endswith("_id") and pschema.get("type") == "string":
                assert "pattern" in pschema, (spec.name, pname)  # ids document their format
    # each domain has a lookup by name/email/phone and a state-changing tool with a stated precondition
    for ts in bundled.toolsets:
        names = [s.name for s in bundled.specs if s.toolset == ts.name]
        assert any(n.startswith(("find_", "get_")) and "_by_" in n for n in names), ts.name
        writes = [s for s in bundled.specs if s.toolset == ts.name and s.effect == "write"]
        assert any(re.search(r"\b(only|must|cannot|at most)\b", s.description, re.I) for s in writes), ts.name


def test_bundled_records_are_valid_models(bundled):
    for model, recs in ((ToolDoc, bundled.docs), (ToolSpec, bundled.specs), (ToolSet, bundled.toolsets)):
        for r in recs:
            assert isinstance(r, model)
            assert r.run_id == "run_bundled"
