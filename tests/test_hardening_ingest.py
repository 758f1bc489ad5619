"""Hostile tool documents: each is rejected on its own (file, location, reason) while the good documents
of the same batch land in the warehouse, and nothing hangs, crashes the batch or eats memory.

One test (or a few) per class found by the attack battery: backtracking patterns in offline synthesis,
YAML alias bombs, symlink loops, deep nesting, huge integer literals, huge files, non-UTF-8 text,
missing paths; plus NaN/Infinity, duplicate keys, scalar documents, pipes, and a fuzz over them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoforge.errors import ConfigError, ToolDocError
from autoforge.pipeline.ingest import run_ingest
from autoforge.tooldocs import parse_document
from autoforge.tooldocs.source import MAX_ALIASES, MAX_DEPTH, MAX_DOC_BYTES, MAX_INT_DIGITS, MAX_YAML_BYTES
from autoforge.warehouse import query

GOOD = {"name": "get_order", "description": "Get an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}


def tables(wh: str) -> dict[str, int]:
    return {t: query(wh, f"SELECT count(*) AS n FROM {t}")[0]["n"] for t in ("tool_docs", "tool_specs", "toolsets", "rejections")}


def batch(tmp_path: Path, bad: dict[str, str | bytes]) -> Path:
    """A folder ``shop`` with one good document and the given bad ones (name -> text or bytes)."""
    folder = tmp_path / "shop"
    folder.mkdir(exist_ok=True)
    (folder / "good.json").write_text(json.dumps(GOOD))
    for name, body in bad.items():
        (folder / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    return folder


def ingest_twice(wh: str, paths: list[Path]) -> dict:
    """run_ingest the batch twice: the second run adds no rows (content-hash ids)."""
    summary = run_ingest(wh, paths)
    first = tables(wh)
    assert run_ingest(wh, paths)["errors"] == summary["errors"]
    assert tables(wh) == first
    return summary


def assert_good_landed(wh: str) -> None:
    assert [r["name"] for r in query(wh, "SELECT name FROM tool_specs")] == ["get_order"]
    assert [r["name"] for r in query(wh, "SELECT name FROM toolsets")] == ["shop"]
    assert query(wh, "SELECT status FROM tool_docs WHERE path LIKE '%good.json'") == [{"status": "accepted"}]


def rejection(summary: dict, wh: str, name: str) -> tuple[str, str]:
    """(error message, stored reason category) of the rejected entry ``name``."""
    [error] = [e for e in summary["errors"] if f"{os.sep}{name}" in e.split(": ")[0]]
    [row] = query(wh, "SELECT d.error, r.reason FROM tool_docs d JOIN rejections r ON r.item_id = d.doc_id "
                      f"WHERE d.status = 'rejected' AND d.path LIKE '%{name}'")
    assert row["error"] == error
    return error, row["reason"]


# --------------------------------------------------------------------------- 1. backtracking patterns

REDOS_DOC = [
    {"name": "get_order", "description": "Get an order by id.",
     "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
     "output_schema": {"type": "object", "properties": {
         "order_id": {"type": "string"},
         "delivery_instructions_description": {"type": "string", "pattern": "^(.|.|.)*Z$"},
         "shipping_note_comment": {"type": "string", "pattern": "^(a+)+$"},
         "gift_message_body": {"type": "string", "pattern": "^(?=(a+)+b)(\\w)\\2*$"},  # backtracking engine only
         "broken_pattern_note": {"type": "string", "pattern": "^([a-z]+$"},
         "huge_pattern_note": {"type": "string", "pattern": "(a|b)" * 800},
         "tracking_code": {"type": "string", "pattern": "^TR\\d{999999999}$"}}}},
    {"name": "update_order", "description": "Update an order's delivery instructions.",
     "parameters": {"type": "object", "properties": {
         "order_id": {"type": "string"},
         "delivery_instructions_description": {"type": "string", "pattern": "^(.|.|.)*Z$"},
         "shipping_note_comment": {"type": "string", "pattern": "^(a+)+$"},
         "customer_reference": {"type": "string", "description": "such as " + "A" * 50_000}},
         "required": ["order_id", "delivery_instructions_description"]}},
]

REDOS_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from autoforge.tooldocs import ingest_paths
    from autoforge.pipeline.synthesize import synthesize_one
    from autoforge.envs.sample import fit_pattern, example_for_pattern, value_for
    from autoforge.tasks.quality import out_of_domain
    from autoforge.domain.ids import id_pattern
    t0 = time.monotonic()
    r = ingest_paths([sys.argv[1]])
    res = synthesize_one(r.toolsets[0], r.specs)
    state = res.environment.sample_state
    long = "Classic delivery instructions description " * 20
    direct = {
        "fit": [fit_pattern(p, long) for p in ("^(.|.|.)*Z$", "^(a+)+$", "^(a|aa)+$", "^(?=(a+)+b)(\\\\w)\\\\2*$",
                                              "^([a-z]+$", "(a|b)" * 800)],
        "example": example_for_pattern("(?:(?:(?:(?:){50}){50}){50}){50}x"),
        "value": value_for({"type": "string", "pattern": "^(.|.|.)*Z$"}, "description", 0, {}),
        "items": len(value_for({"type": "array", "minItems": 10**9, "items": {"type": "string"}}, "tags", 0, {})),
        "domain": [out_of_domain("x", "a" * 40 + "!", {"type": "string", "pattern": p}, "2025-01-15")
                   for p in ("^(a+)+$", "^(?=(a+)+b)(\\\\w)\\\\2*$", "^([a-z]+$")],
        "id_width": id_pattern({"pattern": "^TR\\\\d{999999999}$"}),
    }
    print(json.dumps({"status": res.environment.status, "tools": {t.name: [t.status, t.reason] for t in res.tools},
                      "state": state, "direct": direct, "seconds": time.monotonic() - t0}))
""")


def test_backtracking_patterns_in_offline_synthesis_finish(tmp_path):
    """^(.|.|.)*Z$ spun for 90 s: now every documented pattern runs on RE2 (or the fallback with a
    timeout); an unusable one is ignored for generation and values are still produced."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "tools.json").write_text(json.dumps(REDOS_DOC))
    # a subprocess: a regression (a backtracking match in C) could not be interrupted in-process
    proc = subprocess.run([sys.executable, "-c", REDOS_SCRIPT, str(tmp_path / "shop")], capture_output=True,
                          text=True, timeout=240, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] in ("ready", "partial"), out
    assert set(out["tools"]) == {"get_order", "update_order"}
    for status, reason in out["tools"].values():  # an environment, or a rejection that says why
        assert status == "accepted" or reason, out["tools"]
    records = list(out["state"]["orders"].values())
    assert len(records) >= 4 and all(r["delivery_instructions_description"].endswith("Z") for r in records)
    assert all(set(r["shipping_note_comment"]) == {"a"} for r in records)  # generated to match ^(a+)+$
    assert all(isinstance(r["tracking_code"], str) and len(r["tracking_code"]) < 100 for r in records)
    d = out["direct"]
    assert all(isinstance(v, str) and v for v in d["fit"])
    assert d["fit"][0].endswith("Z") and d["fit"][4] == d["fit"][5] == "Classic delivery instructions description " * 20
    assert d["value"].endswith("Z") and d["items"] <= 8 and d["id_width"] is None
    assert d["domain"][0] == "does not match pattern ^(a+)+$" and d["domain"][2] is None  # unusable: no check


def test_id_shapes_read_from_patterns_are_bounded():
    from autoforge.domain.ids import id_pattern, id_shape
    from autoforge.envs.sample import fit_pattern

    assert id_shape("^AC\\d{4}$") == ("AC", 4) and id_shape("^AC\\d{21}$") is None
    assert id_pattern({"pattern": "^" + "A" * 5000 + "\\d{4}$"}) is None  # long: not an id shape, and not slow
    assert fit_pattern("^(unclosed$", "Seattle") == "Seattle"


# --------------------------------------------------------------------------- 2. YAML alias bomb


def billion_laughs(levels: int = 9) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, levels + 1)]
    lines.append(f"name: bomb\nparameters: {{type: object, properties: {{x: {{type: string, default: *a{levels}}}}}}}")
    return "\n".join(lines) + "\n"


def test_yaml_alias_bomb_is_rejected_and_the_batch_lands(tmp_path, warehouse):
    many = "base: &b {type: string}\nname: many\nparameters:\n  type: object\n  properties:\n" + "".join(
        f"    p{i}: *b\n" for i in range(MAX_ALIASES + 1))
    folder = batch(tmp_path, {"bomb.yaml": billion_laughs(), "many_aliases.yaml": many})
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    error, reason = rejection(summary, warehouse, "bomb.yaml")
    assert reason == "alias_bomb" and "bomb.yaml at /a" in error and "expands to more than" in error
    error, reason = rejection(summary, warehouse, "many_aliases.yaml")
    assert reason == "alias_bomb" and f"more than {MAX_ALIASES} YAML aliases" in error and "line " in error


def test_yaml_merge_keys_and_a_few_aliases_still_parse():
    text = "defs:\n  s: &s {type: string}\nname: f\nparameters:\n  type: object\n  properties:\n    a: *s\n    b: {<<: *s, description: B}\n"
    doc = parse_document(text, "ok.yaml")
    assert doc.tools[0].parameters["properties"]["b"] == {"type": "string", "description": "B"}


# --------------------------------------------------------------------------- 3. symlink loops


def test_symlink_loops_and_links_out_are_rejected_entries(tmp_path, warehouse):
    folder = batch(tmp_path, {})
    (folder / "sub").mkdir()
    os.symlink(".", folder / "loop")  # a folder loop: the walk used to recurse through both forever
    os.symlink("..", folder / "sub" / "up")
    os.symlink("b.json", folder / "a.json")  # a -> b -> a
    os.symlink("a.json", folder / "b.json")
    os.symlink("good.json", folder / "same.json")  # a second name for a good file: read once
    outside = tmp_path / "secret.json"
    outside.write_text(json.dumps({"name": "leak", "parameters": {}}))
    os.symlink(outside, folder / "leak.json")
    os.symlink(tmp_path / "nowhere", folder / "dangling.json")
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    for name, says, category in (("loop", "symlink loop", "symlink_loop"), ("up", "symlink loop", "symlink_loop"),
                                 ("a.json", "symlink loop", "symlink_loop"), ("b.json", "symlink loop", "symlink_loop"),
                                 ("leak.json", "points outside the folder", "symlink_outside"),
                                 ("dangling.json", "broken symlink", "broken_symlink")):
        error, reason = rejection(summary, warehouse, name)
        assert says in error and reason == category, error
    assert not query(warehouse, "SELECT 1 FROM tool_docs WHERE content LIKE '%leak%'")  # never read
    assert summary["n_rejected"] == 6


def test_a_path_given_explicitly_that_is_a_loop_is_rejected(tmp_path, warehouse):
    os.symlink(tmp_path / "x", tmp_path / "y")
    os.symlink(tmp_path / "y", tmp_path / "x")
    folder = batch(tmp_path, {})
    summary = run_ingest(warehouse, [tmp_path / "x", folder])
    assert any("symlink loop" in e and e.startswith(str(tmp_path / "x")) for e in summary["errors"])
    assert_good_landed(warehouse)


def test_a_pipe_in_the_folder_is_rejected_without_opening_it(tmp_path, warehouse):
    folder = batch(tmp_path, {})
    os.mkfifo(folder / "pipe.json")  # opening it would block forever
    summary = ingest_twice(warehouse, [folder])
    error, reason = rejection(summary, warehouse, "pipe.json")
    assert "not a regular file" in error and reason == "not_regular_file"
    assert_good_landed(warehouse)


# --------------------------------------------------------------------------- 4. deep nesting


def nested_schema(levels: int) -> dict:
    s: dict = {"type": "string"}
    for _ in range(levels):
        s = {"type": "object", "properties": {"x": s}}
    return s


@pytest.mark.parametrize("levels", [130, 300])
def test_deep_nesting_is_rejected_with_the_json_path(levels, tmp_path, warehouse):
    doc = {"name": "deep", "parameters": {"type": "object", "properties": {"a": nested_schema(levels)}}}
    folder = batch(tmp_path, {"deep.json": json.dumps(doc), "deep.yaml": json.dumps(doc),  # JSON is YAML flow style
                              "brackets.json": "[" * 100_000 + "]" * 100_000})
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    for name in ("deep.json", "deep.yaml"):
        error, reason = rejection(summary, warehouse, name)
        assert reason == "too_deep" and f"more than {MAX_DEPTH} levels" in error
        assert f"{name} at /parameters/properties/a/properties/x/properties/x/" in error, error
    error, reason = rejection(summary, warehouse, "brackets.json")
    assert reason == "too_deep" and "brackets.json at 1:" in error


def test_ref_inlining_deeper_than_the_bound_is_rejected():
    defs = {"L0": {"type": "string"}}
    for i in range(1, 80):
        defs[f"L{i}"] = {"type": "object", "properties": {"x": {"$ref": f"#/$defs/L{i - 1}"}}}
    doc = {"name": "f", "parameters": {"$defs": defs, "type": "object", "properties": {"a": {"$ref": "#/$defs/L79"}}}}
    with pytest.raises(ToolDocError, match="levels of objects/arrays once its \\$ref are inlined") as exc:
        parse_document(json.dumps(doc), "refs.json")
    assert exc.value.location.startswith("/parameters/properties/a")


# --------------------------------------------------------------------------- 5. integer literals


def test_integer_over_4300_digits_is_rejected_with_location(tmp_path, warehouse):
    digits = "9" * (MAX_INT_DIGITS + 1)
    folder = batch(tmp_path, {
        "bigint.json": '{"name": "bi", "parameters": {"type": "object", "properties": {"a": {"maximum": %s}}}}' % digits,
        "bigint.yaml": "name: bi\nparameters:\n  type: object\n  properties:\n    a: {maximum: %s}\n" % digits})
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    error, reason = rejection(summary, warehouse, "bigint.json")
    assert reason == "integer_too_long" and "bigint.json at /parameters/properties/a/maximum: integer literal of 4,301" in error
    error, reason = rejection(summary, warehouse, "bigint.yaml")
    assert reason == "integer_too_long" and "bigint.yaml at line 5, column " in error
    ok = parse_document('{"name": "f", "parameters": {"properties": {"a": {"maximum": %s}}}}' % ("9" * MAX_INT_DIGITS), "ok.json")
    assert ok.tools[0].parameters["properties"]["a"]["maximum"] == int("9" * MAX_INT_DIGITS)


# --------------------------------------------------------------------------- 6. huge files


def test_huge_file_is_refused_by_size_before_it_is_read(tmp_path, warehouse, monkeypatch):
    from autoforge.tooldocs import source

    monkeypatch.setattr(source, "MAX_YAML_NODES", 1_000)  # the bound on YAML values, without parsing 150,000
    folder = batch(tmp_path, {})
    with open(folder / "huge.json", "wb") as f:  # 200 MB, sparse: no disk used, and never read
        f.truncate(200 * 1024 * 1024)
    (folder / "big.yaml").write_text("- 1\n" * (MAX_YAML_BYTES // 4 + 1))
    (folder / "dense.yaml").write_text("- 1\n" * 1_010)  # under the size: bounded by values
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    error, reason = rejection(summary, warehouse, "huge.json")
    assert reason == "too_large" and "209,715,200 bytes" in error and f"{MAX_DOC_BYTES:,}" in error
    assert query(warehouse, "SELECT content FROM tool_docs WHERE path LIKE '%huge.json'") == [{"content": ""}]
    for name in ("big.yaml", "dense.yaml"):
        error, reason = rejection(summary, warehouse, name)
        assert reason == "too_large" and "convert it to JSON" in error


# --------------------------------------------------------------------------- 7. text that is not UTF-8 / Unicode


def test_non_utf8_and_lone_surrogates_are_rejected(tmp_path, warehouse):
    latin1 = '{"name": "caf\xe9"}'.encode("latin-1")
    folder = batch(tmp_path, {"latin1.json": latin1,
                              "utf16.json": json.dumps(GOOD).encode("utf-16"),
                              "surrogate.json": '{"name": "s", "description": "\\ud800", "parameters": {}}'})
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    error, reason = rejection(summary, warehouse, "latin1.json")
    assert reason == "not_utf8" and f"latin1.json at byte {latin1.index(0xE9)}: file is not UTF-8" in error
    assert rejection(summary, warehouse, "utf16.json")[1] == "not_utf8"
    error, reason = rejection(summary, warehouse, "surrogate.json")
    assert reason == "not_unicode" and "surrogate.json at /description" in error


# --------------------------------------------------------------------------- 8. paths that do not exist


def test_missing_path_among_good_ones_is_a_rejected_entry(tmp_path, warehouse):
    folder = batch(tmp_path, {})
    (tmp_path / "empty").mkdir()
    summary = ingest_twice(warehouse, [tmp_path / "nonexistent", folder, tmp_path / "empty"])
    assert_good_landed(warehouse)
    error, reason = rejection(summary, warehouse, "nonexistent")
    assert "no such file or folder" in error and reason == "missing_path"
    error, reason = rejection(summary, warehouse, "empty")
    assert "no tool documents in this folder" in error and reason == "empty_folder"
    assert summary["n_rejected"] == 2  # what `autoforge ingest` turns into exit code 1


def test_nothing_that_exists_is_a_config_error_before_anything_is_written(tmp_path):
    wh = tmp_path / "never.duckdb"
    with pytest.raises(ConfigError, match="no such file or folder: '/nonexistent"):
        run_ingest(str(wh), ["/nonexistent", "/nonexistent/either"])
    assert not wh.exists()


def test_cli_ingest_exit_codes(tmp_path, capsys):
    from autoforge.cli import main

    wh = str(tmp_path / "cli.duckdb")
    assert main(["ingest", "--warehouse", wh, "/nonexistent"]) != 0
    assert "no such file or folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["ingest", "--warehouse", wh, str(tmp_path / "empty")]) == 1
    assert main(["ingest", "--warehouse", wh, str(batch(tmp_path, {})), str(tmp_path / "nope")]) == 1
    assert main(["ingest", "--warehouse", wh, str(tmp_path / "shop")]) == 0


# --------------------------------------------------------------------------- other hostile values


def test_nan_infinity_duplicate_keys_and_scalar_documents(tmp_path, warehouse):
    folder = batch(tmp_path, {
        "nan.json": '{"name": "n", "parameters": {"properties": {"a": {"maximum": NaN}}}}',
        "inf.json": '{"name": "i", "parameters": {"properties": {"a": {"maximum": 1e999}}}}',
        "inf.yaml": "name: y\nparameters: {properties: {a: {maximum: .inf}}}\n",
        "dup.json": '{"name": "d", "name": "e", "parameters": {}}',
        "dup.yaml": "name: d\nparameters:\n  type: object\n  type: string\n",
        "number.json": "42", "string.json": '"get_order"', "null.yaml": "~\n"})
    summary = ingest_twice(warehouse, [folder])
    assert_good_landed(warehouse)
    expect = {"nan.json": ("at /parameters/properties/a/maximum", "not_finite"),
              "inf.json": ("at /parameters/properties/a/maximum", "not_finite"),
              "inf.yaml": ("at /parameters/properties/a/maximum", "not_finite"),
              "dup.json": ("at /name: duplicate key 'name'", "duplicate_key"),
              "dup.yaml": ("at /parameters/type (line 4, column 3): duplicate key 'type'", "duplicate_key"),
              "number.json": ("at /: unrecognised tool document: its top level is a number", "unrecognised_format"),
              "string.json": ("its top level is a string", "unrecognised_format")}
    for name, (says, category) in expect.items():
        error, reason = rejection(summary, warehouse, name)
        assert says in error and reason == category, error
    assert "its top level is null" in rejection(summary, warehouse, "null.yaml")[0]


# --------------------------------------------------------------------------- fuzz: hostile shapes


hostile = st.one_of(
    st.integers(1, 400).map(lambda n: json.dumps(nested_schema(n))),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),
    st.integers(MAX_INT_DIGITS - 2, MAX_INT_DIGITS + 50).map(lambda n: '{"name": "f", "x": %s}' % ("7" * n)),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", '{"a": 1, "a": 2}', '"\\udc00"', "0", "true", "null"]),
    st.integers(1, 9).map(billion_laughs),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hostile, st.sampled_from(["fuzz.json", "fuzz.yaml"]))
def test_hostile_shapes_only_ever_raise_tooldocerror(text, path):
    try:
        doc = parse_document(text, path)
    except ToolDocError as exc:
        assert exc.path == path and exc.reason
        return
    for tool in doc.tools:
        tool.model_dump(mode="json")  # whatever parses also serialises (pydantic stops at 255 levels)
