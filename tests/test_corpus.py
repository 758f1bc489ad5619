"""The read side of the pipeline (``pipeline.corpus``, ``pipeline.export``, ``pipeline.admin``) on
the mock shop: what the CLI, the integrations and the benchmarks read and write through."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from test_rollout_support import ENV_ID, make_env, make_tools, tasks_and_dags  # noqa: E402

from autoforge.errors import ReadOnlyQueryError, WarehouseError  # noqa: E402
from autoforge.pipeline import admin, corpus, export  # noqa: E402
from autoforge.types import EnvironmentRecord, ToolCode, ToolSpec  # noqa: E402


@pytest.fixture()
def wh(tmp_path) -> str:
    path = str(tmp_path / "w.duckdb")
    assert admin.init_warehouse(path)["applied"]
    tasks, dags = tasks_and_dags()
    other = make_env().model_copy(update={"env_id": "env_other", "name": "other", "status": "failed"})
    rejected = make_tools("env_other")[0].model_copy(update={"status": "rejected", "code_id": "code_rejected"})
    specs = [ToolSpec(tool_id=t.tool_id, toolset="mock_shop", doc_id="doc_mock", name=t.name,
                      description=f"does {t.name}", parameters=t.parameters) for t in make_tools()]
    counts = admin.store_records(path, [make_env(), other, *make_tools(), rejected, *specs, *dags.values(), *tasks])
    assert counts["tasks"] == len(tasks)
    return path


def test_accepted_tools_of_environments(wh):
    mine = corpus.accepted_tools(wh, [ENV_ID])
    assert [t.code_id for t in mine] == sorted(t.code_id for t in make_tools())  # code_id order
    assert corpus.accepted_tools(wh, []) == []  # no environments: no tools (not every tool)
    assert {t.env_id for t in corpus.accepted_tools(wh)} == {ENV_ID}  # None: every environment; never a rejected one
    by_name = corpus.accepted_tools(wh, [ENV_ID, ENV_ID], order_by="name, code_id")
    assert [t.name for t in by_name] == sorted(t.name for t in make_tools())
    assert corpus.accepted_tools_by_env(wh, [ENV_ID, "env_other"]) == {ENV_ID: mine, "env_other": []}


def test_environments_names_specs_and_tasks(wh):
    assert [e.name for e in corpus.environments(wh)] == ["mock_shop", "other"]
    assert corpus.env_names(wh) == {ENV_ID: "mock_shop", "env_other": "other"}
    assert {s.name for s in corpus.env_tool_specs(wh, ENV_ID)} == {t.name for t in make_tools()}
    tasks, _ = tasks_and_dags()
    got = corpus.tasks_by_id(wh, [tasks[0].task_id, "task_missing"])
    assert list(got) == [tasks[0].task_id] and got[tasks[0].task_id] == tasks[0]
    assert corpus.tasks_by_id(wh, []) == {}
    assert corpus.verified_task_ids(wh, ENV_ID, 2) == sorted(t.task_id for t in tasks)[:2]
    assert [type(r) for r in corpus.records(wh, EnvironmentRecord)] == [EnvironmentRecord] * 2
    assert corpus.has_relation(wh, "v_curated_tasks") and not corpus.has_relation(wh, "no_such_view")


def test_summaries_and_counts(wh):
    (summary,) = corpus.curated_summary(wh)
    assert summary["verified_tasks"] == len(tasks_and_dags()[0]) and summary["environments"] == 1
    assert {r["stage"] for r in corpus.funnel_rows(wh)} >= {"ingest", "verify"}
    assert corpus.row_counts(wh, ["tool_code", "tasks"]) == {"tool_code": len(make_tools()) + 1, "tasks": 3}
    with pytest.raises(ValueError, match="not a warehouse table"):
        corpus.row_counts(wh, ["tasks; DROP TABLE tasks"])
    assert corpus.schema_version(wh) == int(admin.migration_files()[-1].name[:3])


def test_relations_user_sql_and_file_export(wh, tmp_path):
    assert "tasks" in export.relations(wh) and "v_curated_tasks" in export.relations(wh)
    assert {"task_id", "env_id", "request"} <= set(export.relation_columns(wh, "v_curated_tasks"))
    assert export.column_types(wh, "tool_code")["parameters"] == "JSON"
    with pytest.raises(WarehouseError, match="no table or view named"):
        export.relation_columns(wh, "nope")
    rows = export.relation_rows(wh, "tasks", order_by="task_id")
    assert [r["task_id"] for r in rows] == sorted(r["task_id"] for r in rows)
    assert set(export.tasks_in(wh, "v_curated_tasks")) == {r["task_id"] for r in rows}
    assert export.user_sql(wh, "SELECT count(*) AS n FROM tasks") == [{"n": 3}]
    with pytest.raises(ReadOnlyQueryError):
        export.user_sql(wh, "DELETE FROM tasks")
    assert export.export_file(wh, "tasks", "jsonl", tmp_path / "t.jsonl") == 3
    assert export.quoted('a"b') == '"a""b"'


def test_admin_where_the_warehouse_is_and_bulk_statements(wh, tmp_path):
    assert admin.warehouse_file(wh) == Path(wh)
    assert admin.warehouse_url(wh).startswith("duckdb:///") and admin.shown_warehouse(wh) == admin.warehouse_url(wh)
    assert admin.warehouse_file("postgresql://u:secret@h/db") is None
    assert "secret" not in admin.shown_warehouse("postgresql://u:secret@h/db")
    assert admin.init_warehouse(wh)["applied"] == []  # twice changes nothing
    times = admin.bulk_load(wh, ["UPDATE tool_code SET attempts = 2 WHERE status = 'rejected'"])
    assert len(times) == 1 and times[0] >= 0
    assert [t.attempts for t in corpus.records(wh, ToolCode) if t.status == "rejected"] == [2]
