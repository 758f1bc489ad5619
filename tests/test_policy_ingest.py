"""Policy documents as input (issue 33, first part): a policy beside the tool docs (policy.md, a file given
with --policy) and the policy text inside tool docs (OpenAPI info / tag descriptions, MCP instructions) are
stored in policy_docs, not as tool docs; re-ingesting the same text adds nothing; a changed policy file
replaces its row and changes the tool set's id, so the factory synthesizes the tool set anew."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoforge.cli import main
from autoforge.errors import ConfigError
from autoforge.pipeline import FactoryParams, run_factory, run_ingest
from autoforge.tooldocs.ingest import ingest_paths
from autoforge.warehouse import query

FIXTURE = Path(__file__).parent / "fixtures" / "policy" / "lending_library"
POLICYDOCS = Path(__file__).resolve().parents[2] / "shared" / "policydocs"


@pytest.fixture
def library(tmp_path) -> Path:
    """A copy of the fixture tool set (tools.json + policy.md) that a test may change."""
    return Path(shutil.copytree(FIXTURE, tmp_path / "lending_library"))


def rows(wh: str, sql: str) -> list[dict]:
    return query(wh, sql, read_only_check=False)


def test_policy_md_is_a_policy_doc_not_a_tool_doc(library):
    r = ingest_paths([library])
    assert [d.path for d in r.docs] == [str(library / "tools.json")]
    assert r.counts()["needs_llm"] == 0 and r.ok
    (p,) = r.policies
    assert p.source == str(library / "policy.md") and p.toolset == "lending_library"
    assert p.text == (library / "policy.md").read_text() and p.n_chars == len(p.text)
    assert p.toolset_id == r.toolsets[0].toolset_id
    assert r.toolsets[0].n_tools == 5


@pytest.mark.parametrize("name", ["POLICY.md", "Policy.txt", "policy.markdown"])
def test_any_case_and_text_suffix_is_a_policy(library, name):
    (library / "policy.md").rename(library / name)
    r = ingest_paths([library])
    assert [Path(p.source).name for p in r.policies] == [name] and r.ok


def test_reingest_is_a_no_op_and_a_changed_policy_replaces_its_row(library, tmp_path):
    wh = str(tmp_path / "w.duckdb")
    first = run_ingest(wh, paths=[library])
    assert first["n_policies"] == 1 and first["toolsets"][0]["policies"] == 1
    before = rows(wh, "SELECT policy_id, toolset_id, sha256, run_id, ingested_at FROM policy_docs")
    again = run_ingest(wh, paths=[library])
    assert rows(wh, "SELECT policy_id, toolset_id, sha256, run_id, ingested_at FROM policy_docs") == before
    assert again["toolsets"][0]["toolset_id"] == first["toolsets"][0]["toolset_id"]

    policy = library / "policy.md"
    policy.write_text(policy.read_text().replace("at most 8 items", "at most 6 items"))
    changed = run_ingest(wh, paths=[library])
    after = rows(wh, "SELECT policy_id, toolset_id, sha256, text FROM policy_docs")
    assert len(after) == 1 and after[0]["policy_id"] != before[0]["policy_id"] and "at most 6 items" in after[0]["text"]
    new_id = changed["toolsets"][0]["toolset_id"]
    assert new_id != first["toolsets"][0]["toolset_id"] and after[0]["toolset_id"] == new_id
    # the tools are the same: only the policy made the tool set a new one
    assert rows(wh, "SELECT count(DISTINCT tool_id) AS n FROM tool_specs")[0]["n"] == 5


def test_changed_policy_makes_the_factory_synthesize_the_tool_set_again(library, tmp_path):
    wh = str(tmp_path / "w.duckdb")
    kw = dict(paths=[str(library)], bundled=False, tasks_per_env=4, warehouse=wh)
    run_factory(FactoryParams(**kw))
    envs = rows(wh, "SELECT env_id, toolset_id FROM environments")
    run_factory(FactoryParams(**kw))  # unchanged: the same environment
    assert rows(wh, "SELECT env_id, toolset_id FROM environments") == envs
    policy = library / "policy.md"
    policy.write_text(policy.read_text() + "\n- Lost items are charged at their replacement cost.\n")
    params = FactoryParams(**kw)
    assert params.scope() != sorted(e["toolset_id"] for e in envs)
    run_factory(params)
    now = rows(wh, "SELECT env_id, toolset_id FROM environments ORDER BY env_id")
    assert len(now) == 2 and {e["toolset_id"] for e in now} - {e["toolset_id"] for e in envs} == set(params.scope())


def test_policy_file_given_from_elsewhere(library, tmp_path):
    (library / "policy.md").unlink()
    handbook = tmp_path / "handbooks" / "desk_rules.md"
    handbook.parent.mkdir()
    handbook.write_text("# Desk rules\n\nStaff check the card before every loan.\n")
    plain = ingest_paths([library])
    r = ingest_paths([library], policies=[handbook])
    assert [p.source for p in r.policies] == [str(handbook)]
    assert r.toolsets[0].toolset_id != plain.toolsets[0].toolset_id
    # a named file inside the folder belongs to that tool set and is no tool doc
    notes = library / "desk_notes.txt"
    notes.write_text("Reserved items are held for 7 days.\n")
    r = ingest_paths([library], policies=[notes])
    assert [p.source for p in r.policies] == [str(notes)] and r.ok and len(r.docs) == 1


def test_cli_policy_flag_and_summary(library, tmp_path, capsys):
    (library / "policy.md").rename(tmp_path / "rules.md")
    wh = str(tmp_path / "w.duckdb")
    assert main(["ingest", str(library), "--policy", str(tmp_path / "rules.md"), "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert "1 policy document(s)" in out
    assert rows(wh, "SELECT source FROM policy_docs") == [{"source": str(tmp_path / "rules.md")}]
    with pytest.raises(ConfigError, match="does not exist"):
        run_ingest(wh, paths=[library], policy=[tmp_path / "missing.md"])
    with pytest.raises(ConfigError, match="not Markdown or text"):
        run_ingest(wh, paths=[library], policy=[library / "tools.json"])


def test_openapi_info_and_tag_descriptions_are_policy_text(tmp_path):
    doc = {"openapi": "3.0.3", "info": {"title": "Desk API", "version": "1", "description":
                                        "Members must show their card before any loan."},
           "tags": [{"name": "loans", "description": "A loan can be renewed at most twice."}, {"name": "bare"}],
           "paths": {"/items/{item_id}": {"get": {"operationId": "get_item", "parameters": [
               {"name": "item_id", "in": "path", "required": True, "schema": {"type": "string"}}]}}}}
    path = tmp_path / "desk" / "openapi.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    r = ingest_paths([path.parent])
    assert {p.source: p.text for p in r.policies} == {
        f"{path}#info.description": "Members must show their card before any loan.",
        f"{path}#tags.loans.description": "A loan can be renewed at most twice."}
    assert r.docs[0].status == "accepted"


def test_mcp_instructions_are_policy_text(tmp_path):
    doc = {"instructions": "Confirm the member's card before any change.",
           "tools": [{"name": "get_item", "description": "Get an item.",
                      "inputSchema": {"type": "object", "properties": {"item_id": {"type": "string"}}}}]}
    path = tmp_path / "desk" / "tools.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    (p,) = ingest_paths([path.parent]).policies
    assert p.source == f"{path}#instructions" and p.text.startswith("Confirm")


@pytest.mark.skipif(not POLICYDOCS.is_dir(), reason="../shared/policydocs is not checked out beside the repository")
def test_every_policydocs_set_has_its_policy_md_stored():
    r = ingest_paths([POLICYDOCS])
    sets = sorted(p.name for p in POLICYDOCS.iterdir() if (p / "policy.md").is_file())
    files = sorted(p.toolset for p in r.policies if p.source.endswith("/policy.md"))
    assert files == sets and len(sets) == 7
    assert not any(d.path.endswith("policy.md") for d in r.docs)
