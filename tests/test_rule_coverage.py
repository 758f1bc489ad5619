"""What a user sees of a tool set's rules (issue 33): ``v_rule_coverage`` (one row per rule: its sentence,
source and offset, enforcement and why, probe, verified tasks exercising it, episodes that broke it) and
``v_rule_summary`` (per environment), sql/088-089; the rules table `autoforge synthesize` and `autoforge
factory` print. The policy's rules are injected by replacing the offline reader
(autoforge.domain.policy.read_policy), as tests/test_guards.py does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoforge.cli import main
from autoforge.domain.rule_kinds import OUTSIDE, ParsedRule
from autoforge.warehouse import query

HOTEL = Path(__file__).resolve().parents[1] / "autoforge" / "data" / "tooldocs" / "hotel"
SENTENCES = {
    "status": "Cancelled bookings cannot be modified.",
    "limit": "At most 4 guests per booking.",
    "identify": "Verify the guest's identity first.",
    "vague": "Be friendly.",
}
POLICY = "# Desk rules\n\n" + "\n".join(f"- {s}" for s in SENTENCES.values()) + "\n"


def fake_read(text, source, specs, plans, schema):
    """The rules of the hotel's policy.md (none for the OpenAPI info text, another policy document)."""
    if not source.endswith("policy.md"):
        return []
    at = {k: text.find(s) for k, s in SENTENCES.items()}
    return [ParsedRule("source_status", SENTENCES["status"], "status", [], "runtime", source=source, offset=at["status"],
                       tools=["modify_booking_dates"],
                       check={"op": "status", "collection": "bookings", "id_arg": "booking_id", "field": "status",
                              "forbidden": ["cancelled"]}),
            ParsedRule("quantity_limit", SENTENCES["limit"], "guests_count", [4], "runtime", source=source,
                       offset=at["limit"], tools=["create_booking"],
                       check={"op": "arg_limit", "arg": "guests_count", "max": 4}),
            ParsedRule("conversation", SENTENCES["identify"], None, [], "judged", source=source, offset=at["identify"],
                       tools=["cancel_booking"], check={"op": "identify_first", "tools": ["cancel_booking"], "via": []}),
            ParsedRule("unparsed", SENTENCES["vague"], None, [], source=source, offset=at["vague"],
                       why=OUTSIDE + "no sentence form matches")]


@pytest.fixture
def hotel(tmp_path, monkeypatch) -> Path:
    from autoforge.domain import policy

    monkeypatch.setattr(policy, "read_policy", fake_read)
    folder = Path(shutil.copytree(HOTEL, tmp_path / "hotel"))
    (folder / "policy.md").write_text(POLICY)
    return folder


def rows(wh: str, sql: str) -> list[dict]:
    return query(wh, sql, read_only_check=False)


def policy_rule_ids(wh: str) -> tuple[str, str]:
    """The rule ids of the policy's status rule and its limit."""
    cov = {r["text"]: r["rule_id"] for r in rows(wh, "SELECT rule_id, text FROM v_rule_coverage WHERE source <> 'tool'")}
    return cov[SENTENCES["status"]], cov[SENTENCES["limit"]]


def link(wh: str, task_ids: list[str], env_id: str, rid: str, other: str) -> None:
    """The links the task generator and the rollouts write (sql/088), set here by hand: the first task
    exercises both rules, the second (a boundary task) the first; three episodes of the first task broke
    [rid], [rid, other] and nothing."""
    import sqlalchemy as sa

    from autoforge.warehouse.engine import connect

    with connect(wh) as conn:
        conn.execute(sa.text("UPDATE tasks SET rules = CAST(:r AS JSON) WHERE task_id = :t"),
                     {"r": json.dumps([rid, other]), "t": task_ids[0]})
        conn.execute(sa.text("UPDATE tasks SET rules = CAST(:r AS JSON), kind = 'boundary' WHERE task_id = :t"),
                     {"r": json.dumps([rid]), "t": task_ids[1]})
        for i, broke in enumerate([[rid], [rid, other], []]):
            conn.execute(sa.text(
                "INSERT INTO episodes (episode_id, task_id, env_id, agent, user_sim, trial, messages, reward_info, "
                "termination, n_turns, rule_breaks) VALUES (:e, :t, :env, 'oracle', 'sim', :i, CAST('[]' AS JSON), "
                "CAST('{}' AS JSON), 'user_stop', 1, CAST(:b AS JSON))"),
                {"e": f"ep{i}", "t": task_ids[0], "env": env_id, "i": i, "b": json.dumps(broke)})


def n_not_enforced(wh: str) -> int:
    return rows(wh, "SELECT count(*) AS n FROM tool_rules WHERE enforcement = 'not enforced'")[0]["n"]


def test_synthesize_stores_every_rule_with_its_source_and_prints_the_table(hotel, tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    assert main(["synthesize", str(hotel), "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    assert "v_rule_summary" in out and "rules (policy / tools)" in out
    line = next(ln for ln in out.splitlines() if "hotel" in ln and "(4 /" in ln)  # 4 rules from the policy
    assert f"{n_not_enforced(wh)} rule(s) not enforced" in out, line

    cov = {r["text"]: r for r in rows(wh, "SELECT * FROM v_rule_coverage WHERE source <> 'tool'")}
    assert set(cov) == set(SENTENCES.values())
    source = str(hotel / "policy.md")
    (policy_id,) = [r["policy_id"] for r in rows(wh, f"SELECT policy_id FROM policy_docs WHERE source = '{source}'")]
    for text, r in cov.items():
        assert r["env_name"] == "hotel" and r["source"] == source and r["policy_id"] == policy_id
        assert r["source_offset"] == POLICY.find(text)
        assert r["tasks_exercising"] == 0 and r["boundary_tasks"] == 0 and r["episodes_broken"] == 0
    status, limit = cov[SENTENCES["status"]], cov[SENTENCES["limit"]]
    assert (status["enforcement"], status["probe"], status["kind"]) == ("runtime", "passed", "source_status"), status
    assert (limit["enforcement"], limit["probe"], limit["tool"]) == ("runtime", "passed", "create_booking"), limit
    assert limit["tools"] == ["create_booking"]
    assert cov[SENTENCES["identify"]]["enforcement"] == "judged"
    vague = cov[SENTENCES["vague"]]
    assert (vague["kind"], vague["enforcement"], vague["probe"]) == ("unparsed", "not enforced", "none")
    assert vague["why"] == OUTSIDE + "no sentence form matches"
    # mechanically checkable: every enforced rule; not the one that names nothing of the tool set (sql/094)
    assert [t for t, r in cov.items() if not r["checkable"]] == [SENTENCES["vague"]]

    (s,) = rows(wh, "SELECT * FROM v_rule_summary")
    n_tools = rows(wh, "SELECT count(*) AS n FROM tool_rules WHERE source = 'tool'")[0]["n"]
    assert s["name"] == "hotel" and s["policy_docs"] == 2  # policy.md and the OpenAPI info text
    assert (s["n_from_policy"], s["n_from_tools"], s["n_rules"]) == (4, n_tools, 4 + n_tools)
    by = {r["enforcement"]: r["n"] for r in rows(wh, "SELECT enforcement, count(*) AS n FROM tool_rules GROUP BY ALL")}
    assert (s["n_runtime"], s["n_judged"], s["n_code"], s["n_not_enforced"]) == tuple(
        by.get(k, 0) for k in ("runtime", "judged", "code", "not enforced"))
    assert s["n_runtime"] >= 2 and s["n_judged"] >= 1 and s["n_not_enforced"] >= 1  # the policy's, and the tools' own
    n_unparsed = rows(wh, "SELECT count(*) AS n FROM tool_rules WHERE kind = 'unparsed'")[0]["n"]
    assert s["n_unparsed"] == n_unparsed >= 1 and s["n_read"] == s["n_rules"] - n_unparsed
    probes = {r["probe"]: r["n"] for r in rows(wh, "SELECT probe, count(*) AS n FROM tool_rules GROUP BY ALL")}
    assert (s["n_probe_passed"], s["n_probe_failed"]) == (probes.get("passed", 0), probes.get("failed", 0))
    assert s["n_probe_passed"] >= 2 and s["tasks_with_rules"] == 0 and s["episodes_breaking"] == 0
    assert f"{s['n_rules']} (4 / {n_tools})" in line
    assert (s["n_checkable_policy"], s["n_checkable_policy_enforced"]) == (3, 3) and s["n_checkable"] >= 3


def test_tasks_and_episodes_are_counted_per_rule_and_factory_prints_the_table(hotel, tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    assert main(["factory", str(hotel), "--no-prefect", "--tasks-per-env", "6", "--warehouse", wh]) in (0, 3)
    out = capsys.readouterr().out
    assert "v_rule_summary" in out and "rules (policy / tools)" in out
    rid, other = policy_rule_ids(wh)
    tasks = rows(wh, "SELECT task_id, env_id, rules FROM tasks WHERE status = 'verified' ORDER BY task_id")
    assert len(tasks) >= 2 and all(isinstance(t["rules"], list) for t in tasks)  # JSON lists (the generator's, or the column default)
    link(wh, [t["task_id"] for t in tasks[:2]], tasks[0]["env_id"], rid, other)
    # the generator may have linked tasks to these rules already: count from the rows, as the views should
    now = rows(wh, "SELECT task_id, env_id, kind, rules FROM tasks WHERE status = 'verified'")
    cov = {r["rule_id"]: r for r in rows(wh, "SELECT * FROM v_rule_coverage")}
    for r, broken in ((rid, 2), (other, 1)):
        mine = [t for t in now if r in t["rules"]]
        assert cov[r]["tasks_exercising"] == len(mine) >= (2 if r == rid else 1)
        assert cov[r]["boundary_tasks"] == sum(t["kind"] == "boundary" for t in mine) >= (1 if r == rid else 0)
        assert cov[r]["episodes_broken"] == broken
    summary = {r["env_id"]: r for r in rows(wh, "SELECT * FROM v_rule_summary")}[tasks[0]["env_id"]]
    linked = [t for t in now if t["env_id"] == tasks[0]["env_id"] and t["rules"]]
    assert summary["tasks_with_rules"] == len(linked) >= 2
    assert summary["boundary_tasks"] == sum(t["kind"] == "boundary" for t in linked) >= 1
    assert summary["episodes_breaking"] == 2
    assert rows(wh, "SELECT count(*) AS n FROM v_rule_coverage")[0]["n"] == rows(wh, "SELECT count(*) AS n FROM tool_rules")[0]["n"]


def test_rules_table_only_with_policy_or_engine_rules(tmp_path, capsys):
    """The table is printed only when some environment has policy rules or rules enforced at runtime or judged
    (the tools' own template rules are in the acceptance-checks table already)."""
    from autoforge.pipeline.rule_coverage import rule_summary_rows, shows_rules

    row = {"n_from_policy": 0, "n_runtime": 0, "n_judged": 0, "n_code": 3}
    assert not shows_rules([row]) and not shows_rules([])
    assert all(shows_rules([{**row, k: 1}]) for k in ("n_from_policy", "n_runtime", "n_judged"))
    folder = Path(shutil.copytree(HOTEL, tmp_path / "hotel"))
    wh = str(tmp_path / "w.duckdb")
    assert main(["synthesize", str(folder), "--warehouse", wh]) == 0
    out = capsys.readouterr().out
    summary = rule_summary_rows(wh)
    assert summary and ("v_rule_summary" in out) == shows_rules(summary)


@pytest.mark.slow  # starts a PostgreSQL server (tests/pg_server.py)
def test_the_views_give_the_same_rows_on_postgres(hotel, tmp_path):
    """sql/postgresql/089 (json_array_elements_text for DuckDB's unnest of a JSON list) gives DuckDB's rows."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from pg_server import PgServer, unavailable

    from autoforge.pipeline import FactoryParams, run_factory

    if unavailable():
        pytest.skip(unavailable())
    with PgServer() as pg:
        built = [str(tmp_path / "w.duckdb"), pg.create_database("rules")]
        for wh in built:
            run_factory(FactoryParams(paths=[str(hotel)], bundled=False, tasks_per_env=4, seed=0, warehouse=wh))
            tasks = rows(wh, "SELECT task_id, env_id FROM tasks WHERE status = 'verified' ORDER BY task_id")
            link(wh, [t["task_id"] for t in tasks[:2]], tasks[0]["env_id"], *policy_rule_ids(wh))
        for view in ("v_rule_coverage", "v_rule_summary"):
            got = [sorted(json.dumps(r, sort_keys=True, default=str) for r in rows(wh, f"SELECT * FROM {view}"))
                   for wh in built]
            assert got[0] == got[1] and got[0], view
        assert any(r["episodes_broken"] == 2 for r in rows(built[1], "SELECT * FROM v_rule_coverage"))
