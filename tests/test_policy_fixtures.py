"""Policy material (issue 33): the bundled domains that ship a policy.md and the policy fixtures
(tests/fixtures/policies/<name>: tools.json + policy.md, in the forms real policies take). Ingest stores each
policy document with the tool set it governs and rejects no tool doc; every sentence of a fixture's answer
key (.expected_rules.json, see tests/fixtures/policies/README.md) occurs verbatim in its policy.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoforge.domain.rule_kinds import RULE_KINDS
from autoforge.tooldocs.ingest import bundled_corpus_path, ingest_paths

FIXTURES = Path(__file__).parent / "fixtures" / "policies"
FIXTURE_NAMES = sorted(p.name for p in FIXTURES.iterdir() if p.is_dir())
BUNDLED = bundled_corpus_path()
BUNDLED_WITH_POLICY = ["car_rental", "hotel", "library", "retail", "telecom"]
KINDS = {"status", "time_window", "cross_record", "quantity_limit", "count_limit", "money", "prohibition", "conversation"}


def answer_key(name: str) -> list[dict]:
    return json.loads((FIXTURES / name / ".expected_rules.json").read_text())


def tool_names(folder: Path) -> set[str]:
    return {s.name for s in ingest_paths([folder]).specs}


def test_the_fixture_and_bundled_lists_are_what_the_readmes_say():
    assert len(FIXTURE_NAMES) == 6
    readme = (FIXTURES / "README.md").read_text()
    assert all(f"## {name}" in readme for name in FIXTURE_NAMES)
    assert sorted(p.parent.name for p in BUNDLED.glob("*/policy.md")) == BUNDLED_WITH_POLICY
    table = (BUNDLED / "README.md").read_text().split("## Policies", 1)[1]
    assert all(f"| {name} |" in table for name in BUNDLED_WITH_POLICY)


@pytest.mark.parametrize("folder", [FIXTURES / n for n in FIXTURE_NAMES] + [BUNDLED / n for n in BUNDLED_WITH_POLICY],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_policy_md_is_stored_and_no_tool_doc_is_rejected(folder):
    r = ingest_paths([folder])
    assert r.ok and r.errors == [] and not r.rejected and r.counts()["needs_llm"] == 0
    assert not any(Path(d.path).name in ("policy.md", ".expected_rules.json") for d in r.docs)
    (ts,) = r.toolsets
    assert ts.name == folder.name and ts.n_tools >= 8
    (p,) = [p for p in r.policies if p.source.endswith("/policy.md")]
    assert p.text == (folder / "policy.md").read_text() and p.n_chars == len(p.text)
    assert p.toolset == folder.name and p.toolset_id == ts.toolset_id


def test_the_whole_fixture_folder_ingests_as_six_tool_sets_with_one_policy_each():
    r = ingest_paths([FIXTURES])
    assert r.ok and sorted(t.name for t in r.toolsets) == FIXTURE_NAMES
    assert r.policy_counts() == {name: 1 for name in FIXTURE_NAMES}


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_answer_key_sentence_is_verbatim_in_its_policy(name):
    text = (FIXTURES / name / "policy.md").read_text()
    key = answer_key(name)
    tools = tool_names(FIXTURES / name)
    assert len({r["sentence"] for r in key}) >= 8
    for rule in key:
        assert {"sentence", "kind", "tool", "field", "checkable"} <= set(rule) <= {
            "sentence", "kind", "tool", "field", "checkable", "note"}, rule
        assert rule["sentence"] in text, rule["sentence"]
        assert rule["kind"] in KINDS and isinstance(rule["checkable"], bool), rule
        assert rule["tool"] is None or rule["tool"] in tools, rule
    # one entry per (sentence, kind, tool, field): a rule is not listed twice
    entries = [(r["sentence"], r["kind"], r["tool"], r["field"]) for r in key]
    assert len(entries) == len(set(entries))
    # every kind the fixtures use is a rule kind the model knows (status rules are source_status there)
    assert {r["kind"] for r in key} - {"status"} <= set(RULE_KINDS)


def test_the_fixtures_cover_every_rule_kind_and_both_checkable_and_not():
    rules = [r for name in FIXTURE_NAMES for r in answer_key(name)]
    assert {r["kind"] for r in rules} == KINDS
    assert {r["checkable"] for r in rules} == {True, False}
