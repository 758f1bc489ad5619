"""No silent zero: the factory says, per environment, what each stage yielded, and exits non-zero
(with why) when an environment it was asked for yields no verified task."""

from __future__ import annotations

from pathlib import Path

from autoforge.cli import main
from autoforge.pipeline import EMPTY_EXIT_CODE, environment_yield

FIXTURES = Path(__file__).parent / "fixtures" / "realstyle"


def test_a_tool_set_that_cannot_yield_tasks_exits_non_zero_and_says_why(tmp_path, capsys):
    # yes/no checks: nothing changes state, and a boolean is no answer a final message can be checked for
    wh = str(tmp_path / "w.duckdb")
    rc = main(["factory", "--no-prefect", "--warehouse", wh, "--tasks-per-env", "10",
               str(FIXTURES / "effects_checker.json")])
    out = capsys.readouterr()
    assert rc == EMPTY_EXIT_CODE == 3
    assert "no verified task for environment 'effects_checker'" in out.err
    assert "v_environment_funnel" in out.out
    (row,) = environment_yield(wh, ["effects_checker"])
    assert row["n_verified"] == 0 and row["why_empty"], row
    assert "no_answer" in row["why_empty"] or "no read-only walk" in row["why_empty"], row["why_empty"]


def test_a_calculator_yields_answer_tasks_the_oracle_solves_and_random_does_not(tmp_path, capsys):
    from autoforge.types import Task
    from autoforge.warehouse import query, read_records

    wh = str(tmp_path / "w.duckdb")
    rc = main(["factory", "--no-prefect", "--warehouse", wh, "--tasks-per-env", "20",
               str(FIXTURES / "effects_calculator.json")])
    assert rc == 0, capsys.readouterr().err
    tasks = [t for t in read_records(wh, Task) if t.status == "verified"]
    assert len(tasks) >= 10 and {t.kind for t in tasks} == {"answer"}
    assert all(t.gold_answer is not None and t.gold_state_hash == t.gold_state_hash for t in tasks)
    assert any(len(t.gold_calls) >= 2 for t in tasks)  # computations chain (a sum, then a division)
    for t in tasks:
        assert t.initial_state == t.gold_state and "tell me" in t.request or "know the" in t.request or "need the" in t.request
    kinds = {r["kind"] for r in query(wh, "SELECT DISTINCT kind FROM v_curated_tasks")}
    assert kinds == {"answer"}
    capsys.readouterr()
    assert main(["eval", "--warehouse", wh, "--agent", "oracle", "--json"]) == 0
    oracle = capsys.readouterr().out
    assert main(["eval", "--warehouse", wh, "--agent", "random", "--json"]) == 0
    rand = capsys.readouterr().out
    import json

    def overall(text):
        data = json.loads(text)
        rows = data["results"] if isinstance(data, dict) and "results" in data else data
        return [r for r in rows if r.get("env_id") in (None, "(overall)") and r.get("k") == 1][0]["pass_hat_k"]

    assert overall(oracle) == 1.0 and overall(rand) == 0.0


def test_a_batch_whose_environments_all_yield_exits_zero(tmp_path, capsys):
    wh = str(tmp_path / "w.duckdb")
    rc = main(["factory", "--no-prefect", "--warehouse", wh, "--tasks-per-env", "8", "--env", "retail"])
    out = capsys.readouterr()
    assert rc == 0, out.err
    rows = environment_yield(wh, ["retail"])
    assert rows[0]["n_verified"] > 0 and rows[0]["why_empty"] is None
    assert rows[0]["n_edges"] > 0 and rows[0]["n_dags"] > 0


def test_why_empty_names_the_first_stage_that_came_up_empty(tmp_path):
    from autoforge.pipeline import run_factory

    wh = str(tmp_path / "w.duckdb")
    # a CRUD set in a real-doc style; whatever it yields, an empty environment always says why
    run_factory(paths=[str(FIXTURES / "effects_crud.json")], bundled=False, tasks_per_env=8, warehouse=wh)
    for row in environment_yield(wh):
        assert (row["n_verified"] > 0) == (row["why_empty"] is None)
        if row["why_empty"]:
            assert row["why_empty"].split(":")[0] in ("synthesize", "sample", "generate", "verify", "stateless tool set")


def test_a_file_system_links_its_listing_to_the_writes(tmp_path):
    """``ls`` / ``cat`` take no id; the files are keyed by ``file_name`` (a natural key) and the
    listing shows what ``rm`` / ``touch`` change: the graph connects reads to every write."""
    from autoforge.pipeline import run_factory
    from autoforge.types import EnvironmentRecord, ToolGraph
    from autoforge.warehouse import read_records

    wh = str(tmp_path / "w.duckdb")
    run_factory(paths=[str(FIXTURES / "effects_filesystem.json")], bundled=False, tasks_per_env=10, warehouse=wh)
    (row,) = environment_yield(wh)
    assert row["n_edges"] > 0 and row["n_verified"] > 0
    (env,) = read_records(wh, EnvironmentRecord)
    assert env.n_write_tools > 0 and env.writes_unreachable == []
    (graph,) = read_records(wh, ToolGraph)
    assert {e.kind for e in graph.edges} <= {"data", "state"}


def test_a_tool_graph_without_edges_still_yields_single_write_tasks(tmp_path):
    """Writes only (no read to start from or link): single-write tasks, start rule ``entry``."""
    import json

    from autoforge.pipeline import run_factory
    from autoforge.types import Task
    from autoforge.warehouse import read_records

    def tool(name: str, desc: str, params: dict) -> dict:
        return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
            "type": "object", "properties": params, "required": list(params)}}}

    doc = tmp_path / "notes_writer.json"
    doc.write_text(json.dumps([
        tool("store_note", "Store a note under a title.", {"title": {"type": "string"}, "text": {"type": "string"}}),
        tool("set_reminder", "Set a reminder for a date.", {"date": {"type": "string", "format": "date"},
                                                            "message": {"type": "string"}}),
    ]))
    wh = str(tmp_path / "w.duckdb")
    run_factory(paths=[str(doc)], bundled=False, tasks_per_env=10, warehouse=wh)
    (row,) = environment_yield(wh)
    assert row["n_edges"] == 0 and row["start_rules"] == "entry" and row["n_verified"] > 0
    tasks = [t for t in read_records(wh, Task) if t.status == "verified"]
    assert all(t.initial_state != t.gold_state for t in tasks)  # each changes the state it is verified on
