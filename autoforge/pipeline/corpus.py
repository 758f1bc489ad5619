"""The read side: what callers outside the stages read from the warehouse, as typed functions.

The CLI, ``autoforge.integrations`` and ``benchmarks/`` read the warehouse only through this
module, :mod:`autoforge.pipeline.export` (relations, user SQL, file exports) and
:mod:`autoforge.pipeline.admin` (migrations, the warehouse's URL and file, writes outside a
stage); no module outside ``autoforge/pipeline`` and ``autoforge/warehouse`` imports the
warehouse (``tests/test_layout.py`` checks it). Functions return the records of
:mod:`autoforge.types` where a table holds them, and plain rows for views and aggregates.
"""

from __future__ import annotations

from typing import ContextManager, Iterable, TypeVar

from autoforge.types import EnvironmentRecord, Record, Task, TaskDag, ToolCode, ToolRule, ToolSpec
from autoforge.warehouse import TABLES, column_exists, query, read_records, table_exists
from autoforge.warehouse import reading as _reading

M = TypeVar("M", bound=Record)
USABLE = ("ready", "partial")  # environment statuses with accepted tools to run


def ids_clause(column: str, ids: Iterable[str] | None, prefix: str = "i") -> tuple[str | None, dict]:
    """``column IN (:i0, :i1, ...)`` with its parameters; (None, {}) for no ids. ``prefix`` names the
    parameters, so two clauses can share one query."""
    ids = sorted(set(ids or []))
    if not ids:
        return None, {}
    names = [f"{prefix}{k}" for k in range(len(ids))]
    return f"{column} IN ({', '.join(':' + n for n in names)})", dict(zip(names, ids))


def reading(warehouse: str | None) -> ContextManager[None]:
    """The reads of this module inside the block share one read-only connection (the CLI's reports after a
    factory run ask a dozen questions): :func:`autoforge.warehouse.store.reading`; nothing inside may write."""
    return _reading(warehouse)


def has_relation(warehouse: str | None, name: str) -> bool:
    """Whether the warehouse holds a table or view called ``name`` (an older or empty one may not)."""
    return table_exists(warehouse, name)


def records(warehouse: str | None, model: type[M], *, order_by: str | None = None) -> list[M]:
    """Every row of ``model``'s table as typed records (primary-key order unless ``order_by``)."""
    return read_records(warehouse, model, order_by=order_by)


def read_sql(warehouse: str | None, sql: str, params: dict | None = None) -> list[dict]:
    """Rows of a fixed query the caller wrote itself, on a read-only connection (no user-SQL check:
    a user's text goes through :func:`autoforge.pipeline.export.user_sql`)."""
    return query(warehouse, sql, params, read_only_check=False)


# --------------------------------------------------------------------------- environments and their tools


def environments(warehouse: str | None) -> list[EnvironmentRecord]:
    """Every environment, in name order (ties by id)."""
    return read_records(warehouse, EnvironmentRecord, order_by="name, env_id")


def env_names(warehouse: str | None) -> dict[str, str]:
    """Environment id -> name, for people reading tables."""
    return {r["env_id"]: r["name"] for r in read_sql(warehouse, "SELECT env_id, name FROM environments")}


def accepted_tools(warehouse: str | None, env_ids: Iterable[str] | None = None, *,
                   order_by: str | None = None) -> list[ToolCode]:
    """The accepted tool code of the environments ``env_ids`` (None: of every environment; an empty
    list: none), in ``code_id`` order unless ``order_by``."""
    if env_ids is None:
        return read_records(warehouse, ToolCode, "status = 'accepted'", order_by=order_by)
    where, params = ids_clause("env_id", env_ids)
    if where is None:
        return []
    return read_records(warehouse, ToolCode, f"{where} AND status = 'accepted'", params, order_by=order_by)


def accepted_tools_by_env(warehouse: str | None, env_ids: Iterable[str]) -> dict[str, list[ToolCode]]:
    """Environment id -> its accepted tool code (``code_id`` order), for each of ``env_ids``."""
    ids = sorted(set(env_ids))
    out: dict[str, list[ToolCode]] = {e: [] for e in ids}
    for tool in accepted_tools(warehouse, ids):
        out[tool.env_id].append(tool)
    return out


def judged_rules(warehouse: str | None, env_ids: Iterable[str]) -> dict[str, list[dict]]:
    """Environment id -> its judged conversation rules (``tool_rules`` rows with enforcement ``judged``) as
    checks (:func:`autoforge.tasks.rules.judged_checks`), for each of ``env_ids`` (issue 33)."""
    from autoforge.tasks.rules import judged_checks

    ids = sorted(set(env_ids))
    out: dict[str, list[dict]] = {e: [] for e in ids}
    where, params = ids_clause("env_id", ids)
    if where is None or not column_exists(warehouse, "tool_rules", "enforcement"):  # before sql/086: no judged rules
        return out
    rows: dict[str, list[ToolRule]] = {}
    for r in read_records(warehouse, ToolRule, f"{where} AND enforcement = 'judged'", params, order_by="rule_id"):
        rows.setdefault(r.env_id, []).append(r)
    for e, rs in rows.items():
        out[e] = judged_checks(rs)
    return out


def tool_rules(warehouse: str | None, env_ids: Iterable[str]) -> dict[str, list[ToolRule]]:
    """Environment id -> every rule its tools' prose and policy documents state (``tool_rules`` rows, any
    enforcement), in ``rule_id`` order, for each of ``env_ids``."""
    ids = sorted(set(env_ids))
    out: dict[str, list[ToolRule]] = {e: [] for e in ids}
    where, params = ids_clause("env_id", ids)
    if where is None or not column_exists(warehouse, "tool_rules", "enforcement"):  # before sql/086: no rules to read
        return out
    for r in read_records(warehouse, ToolRule, where, params, order_by="rule_id"):
        out[r.env_id].append(r)
    return out


def env_tool_specs(warehouse: str | None, env_id: str) -> list[ToolSpec]:
    """The tool specs behind an environment's tool code (accepted or not), in ``tool_id`` order."""
    return read_records(warehouse, ToolSpec, "tool_id IN (SELECT tool_id FROM tool_code WHERE env_id = :e)",
                        {"e": env_id})


# --------------------------------------------------------------------------- tasks


def tasks_by_id(warehouse: str | None, task_ids: Iterable[str]) -> dict[str, Task]:
    """Task id -> task (any status) for those of ``task_ids`` the warehouse holds."""
    where, params = ids_clause("task_id", task_ids)
    if where is None:
        return {}
    return {t.task_id: t for t in read_records(warehouse, Task, where, params)}


def task_dags(warehouse: str | None, dag_ids: Iterable[str]) -> dict[str, TaskDag]:
    """DAG id -> task DAG for those of ``dag_ids`` the warehouse holds."""
    where, params = ids_clause("dag_id", dag_ids)
    if where is None:
        return {}
    return {d.dag_id: d for d in read_records(warehouse, TaskDag, where, params)}


def verified_task_ids(warehouse: str | None, env_id: str, limit: int) -> list[str]:
    """The first ``limit`` verified task ids of an environment, in id order."""
    return [r["task_id"] for r in read_sql(
        warehouse, f"SELECT task_id FROM tasks WHERE env_id = :e AND status = 'verified' ORDER BY task_id LIMIT {int(limit)}",
        {"e": env_id})]


def curated_summary(warehouse: str | None) -> list[dict]:
    """One row over ``v_curated_tasks``: verified tasks, environments, median tool calls, shares with
    reasoning and merged requirements, deepest DAG ([] before the view exists)."""
    if not has_relation(warehouse, "v_curated_tasks"):
        return []
    return read_sql(warehouse, """
        SELECT count(*) AS verified_tasks, count(DISTINCT env_id) AS environments,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY n_tool_calls) AS median_tool_calls,
               round(avg(CASE WHEN n_reasoning_nodes > 0 THEN 1 ELSE 0 END), 3) AS share_with_reasoning,
               round(avg(CASE WHEN n_requirements >= 2 THEN 1 ELSE 0 END), 3) AS share_merged,
               max(dag_depth) AS max_dag_depth
        FROM v_curated_tasks""")


def funnel_rows(warehouse: str | None) -> list[dict]:
    """The factory's yield per stage (``v_stage_funnel``), for summaries and artifacts."""
    if not has_relation(warehouse, "v_stage_funnel"):
        return []
    return read_sql(warehouse, "SELECT * FROM v_stage_funnel")


def row_counts(warehouse: str | None, tables: Iterable[str]) -> dict[str, int]:
    """Rows in each of ``tables`` (names of the warehouse's own tables)."""
    known = {name for name, _ in TABLES.values()} | {"schema_migrations"}
    out = {}
    for t in tables:
        if t not in known:
            raise ValueError(f"row_counts: {t!r} is not a warehouse table; known: {', '.join(sorted(known))}")
        out[t] = int(read_sql(warehouse, f"SELECT count(*) AS n FROM {t}")[0]["n"])
    return out


def schema_version(warehouse: str | None) -> int | None:
    """The newest migration applied (None when none is)."""
    rows = read_sql(warehouse, "SELECT max(version) AS v FROM schema_migrations")
    return rows[0]["v"] if rows else None
