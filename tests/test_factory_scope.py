"""Scoped runs: `autoforge factory PATH` and `autoforge synthesize PATH` work on the tool sets PATH
defines and leave the warehouse's other tool sets untouched; `--all` works on every tool set."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoforge.errors import ConfigError
from autoforge.tooldocs.ingest import bundled_corpus_path

BOOKSHOP = Path(__file__).parent / "fixtures" / "user_docs" / "bookshop"
BUNDLED = [str(bundled_corpus_path() / name) for name in ("hotel", "library")]  # two bundled tool sets, to stay fast
TABLES = ("environments", "tool_graphs", "tool_sequences", "task_dags", "tasks")


def per_environment(wh: str) -> dict[str, dict[str, tuple[int, tuple[str, ...]]]]:
    """Tool-set name -> table -> (rows, the runs that wrote them), for every table that holds an env_id,
    and the verification results of each environment's tasks."""
    from autoforge.warehouse import query

    out: dict[str, dict[str, tuple[int, tuple[str, ...]]]] = {}
    envs = query(wh, "SELECT env_id, name FROM environments", read_only_check=False)
    for e in envs:
        row = out.setdefault(e["name"], {})
        for table in TABLES:
            rows = query(wh, f"SELECT run_id FROM {table} WHERE env_id = :e", {"e": e["env_id"]}, read_only_check=False)
            n, runs = row.get(table, (0, ()))
            row[table] = (n + len(rows), tuple(sorted(set(runs) | {r["run_id"] for r in rows})))
        checked = query(wh, "SELECT v.run_id FROM verification_results v JOIN tasks t ON t.task_id = v.task_id "
                            "WHERE t.env_id = :e", {"e": e["env_id"]}, read_only_check=False)
        row["verification_results"] = (len(checked), tuple(sorted({r["run_id"] for r in checked})))
    return out


def run_rows(wh: str) -> list[dict]:
    from autoforge.warehouse import query

    return query(wh, "SELECT run_id, stage, counts FROM runs", read_only_check=False)


@pytest.fixture
def bundled_wh(warehouse):
    """A warehouse holding two bundled tool sets, through the whole factory."""
    from autoforge.pipeline import run_factory

    run_factory(paths=BUNDLED, bundled=False, tasks_per_env=8, warehouse=warehouse)
    before = per_environment(warehouse)
    assert set(before) == {"hotel", "library"} and all(before[n]["tasks"][0] for n in before)
    return warehouse


def test_factory_path_touches_only_the_tool_sets_of_path(bundled_wh):
    from autoforge.pipeline import run_factory

    before, runs_before = per_environment(bundled_wh), run_rows(bundled_wh)
    result = run_factory(paths=[str(BOOKSHOP)], bundled=False, tasks_per_env=8, warehouse=bundled_wh)
    after = per_environment(bundled_wh)
    assert result["environments"] == ["bookshop"]
    assert {n: after[n] for n in before} == before  # no new row, no row rewritten by a new run
    assert after["bookshop"]["environments"][0] == 1
    new_runs = [r for r in run_rows(bundled_wh) if r["run_id"] not in {x["run_id"] for x in runs_before}]
    assert {r["stage"] for r in new_runs} == {"ingest", "synthesize", "sample", "generate", "verify"}
    assert all(r["counts"].get("environments", 1) <= 1 for r in new_runs), new_runs  # bookshop alone, or none


def test_factory_all_touches_every_tool_set(bundled_wh):
    from autoforge.pipeline import run_factory

    before = per_environment(bundled_wh)
    result = run_factory(paths=[str(BOOKSHOP)], bundled=False, tasks_per_env=8, all_toolsets=True, warehouse=bundled_wh)
    after = per_environment(bundled_wh)
    assert sorted(result["environments"]) == ["bookshop", "hotel", "library"]
    for name in before:  # every stage of the batch read the bundled environments again and rewrote their rows
        assert after[name]["tool_sequences"][1] != before[name]["tool_sequences"][1], name


def test_synthesize_path_ingests_and_synthesizes_only_path(bundled_wh):
    from autoforge.pipeline import run_synthesis

    before = per_environment(bundled_wh)
    out = run_synthesis(bundled_wh, paths=[str(BOOKSHOP)])
    assert [e["env"] for e in out["environments"]] == ["bookshop"]
    assert [t["toolset"] for t in out["ingest"]["toolsets"]] == ["bookshop"]
    after = per_environment(bundled_wh)
    assert {n: after[n] for n in before} == before
    out = run_synthesis(bundled_wh, paths=[str(BOOKSHOP)], all_toolsets=True)
    assert sorted(e["env"] for e in out["environments"]) == ["bookshop", "hotel", "library"]


def test_an_environment_outside_the_scope_is_refused_with_what_to_do(bundled_wh):
    from autoforge.pipeline import FactoryParams

    with pytest.raises(ConfigError, match=r"unknown environment 'hotel'.*--all"):
        FactoryParams(paths=[str(BOOKSHOP)], bundled=False, env="hotel", warehouse=bundled_wh).validate_for_run()
    FactoryParams(paths=[str(BOOKSHOP)], bundled=False, env="hotel", all_toolsets=True,
                  warehouse=bundled_wh).validate_for_run()


def test_docs_that_define_no_tool_set_stop_the_batch(tmp_path, warehouse):
    from autoforge.pipeline import FactoryParams

    bad = tmp_path / "broken.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="define no tool set"):
        FactoryParams(paths=[str(bad)], bundled=False, warehouse=warehouse).validate_for_run()


def test_the_default_batch_id_is_the_one_it_had_before_scoping():
    """The demo's batch (the bundled corpus, defaults) keeps its id, so its rows stay the same; --all is another batch."""
    from autoforge.pipeline import FactoryParams
    from autoforge.types import content_id

    p = FactoryParams()
    assert p.batch_id() == content_id("batch", p.model_dump(exclude={"warehouse", "all_dags", "all_toolsets", "policy"}))
    assert FactoryParams(all_toolsets=True).batch_id() != p.batch_id()
    assert FactoryParams(policy=["rules.md"]).batch_id() != p.batch_id()  # issue 33: a policy file is another batch
    assert p.stage_params()["sample"].toolset_ids == p.scope() and len(p.scope()) == len(p.docs().toolsets)
    assert FactoryParams(all_toolsets=True).stage_params()["verify"].toolset_ids is None
