"""The rules per environment as the warehouse holds them (``v_rule_summary``, ``v_rule_coverage``, sql/089).

``autoforge synthesize`` and ``autoforge factory`` print :func:`rule_summary_rows` when some
environment has rules of a policy (source other than ``'tool'``) or rules the rule engine or the
judge enforces (:func:`shows_rules`); ``benchmarks/policy.py`` reads both views.
"""

from __future__ import annotations

from typing import Any

from autoforge.warehouse import query
from autoforge.warehouse.store import table_exists


def _select(warehouse: str | None, relation: str, order: str, env_ids: list[str] | None,
            names: list[str] | None, name_col: str) -> list[dict[str, Any]]:
    if not table_exists(warehouse, relation):  # a warehouse not yet migrated to sql/089
        return []
    rows = query(warehouse, f"SELECT * FROM {relation} ORDER BY {order}", read_only_check=False)
    ids, wanted = set(env_ids or ()), set(names or ())
    return [r for r in rows if (env_ids is None or r["env_id"] in ids) and (names is None or r[name_col] in wanted)]


def rule_summary_rows(warehouse: str | None, env_ids: list[str] | None = None,
                      names: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_rule_summary`` (per environment: rules read, by source, enforcement and probe;
    verified tasks that exercise a rule; episodes that broke one), for these environments (by id or
    by name) or all."""
    return _select(warehouse, "v_rule_summary", "name, env_id", env_ids, names, "name")


def rule_coverage_rows(warehouse: str | None, env_ids: list[str] | None = None,
                       names: list[str] | None = None) -> list[dict[str, Any]]:
    """Rows of ``v_rule_coverage`` (one per rule: its sentence, source and offset, enforcement and
    why, probe, the verified tasks exercising it and the episodes that broke it)."""
    return _select(warehouse, "v_rule_coverage", "env_name, source, source_offset, rule_id", env_ids, names, "env_name")


def shows_rules(rows: list[dict[str, Any]]) -> bool:
    """Whether the summary is worth printing: some environment has policy rules or rules enforced at
    runtime or judged (the tools' own prose rules are in the acceptance-checks table already)."""
    return any(r["n_from_policy"] or r["n_runtime"] or r["n_judged"] for r in rows)


def summary_table(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The compact per-environment table the CLI prints."""
    return [{"environment": r["name"],
             "rules (policy / tools)": f"{r['n_rules']} ({r['n_from_policy']} / {r['n_from_tools']})",
             "runtime": r["n_runtime"], "judged": r["n_judged"], "code": r["n_code"],
             "not enforced (unparsed)": f"{r['n_not_enforced']} ({r['n_unparsed']})",
             "probe passed / failed": f"{r['n_probe_passed']} / {r['n_probe_failed']}",
             "policy: checkable (enforced)": (f"{r['n_checkable_policy']} ({r['n_checkable_policy_enforced']})"
                                              if "n_checkable_policy" in r else "-"),
             "tasks (boundary)": f"{r['tasks_with_rules']} ({r['boundary_tasks']})"} for r in rows]
