"""Dataset cards (``README.md`` with Hugging Face front matter) and provenance of the folder exports.

A card says what each column is, how it is stored (JSON strings are marked), which warehouse,
relation, factory batch(es) and runs the rows came from, and how to load them. Its YAML front
matter carries ``configs`` (data files per split) and, for Arrow exports, ``dataset_info``
(features and split sizes), the fields the Hugging Face Hub reads.

Column descriptions of a table or view come from the ``-- comment`` beside each column in
``sql/NNN_*.sql`` (the migrations document every column there; the latest file that defines or
alters the relation wins).
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timezone
from typing import Any, Iterable

import yaml

from autoforge.pipeline.admin import migration_files, shown_warehouse
from autoforge.pipeline.corpus import schema_version

_HEAD = re.compile(r"^\s*(CREATE\s+(?:OR\s+REPLACE\s+)?(?:TABLE|VIEW)(?:\s+IF\s+NOT\s+EXISTS)?|ALTER\s+TABLE)\s+(\w+)",
                   re.IGNORECASE)
_NOT_COLUMNS = {"CREATE", "PRIMARY", "UNIQUE", "CHECK", "FOREIGN", "CONSTRAINT", "ALTER", "COMMENT"}
_ADD = re.compile(r"ADD\s+COLUMN\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)", re.IGNORECASE)


def sql_column_comments(relation: str) -> dict[str, str]:
    """Column -> the comment beside it in the migrations that define ``relation`` (empty when none do)."""
    out: dict[str, str] = {}
    for path in migration_files():
        current, is_view = None, False
        for line in path.read_text().splitlines():
            head = _HEAD.match(line)
            if head:
                current = head.group(2) if head.group(2) == relation else None
                is_view = "VIEW" in head.group(1).upper()
                if current and is_view:
                    out = {}  # CREATE OR REPLACE VIEW: the newest definition is the whole truth
            if current is None or "--" not in line:
                continue
            code, comment = line.split("--", 1)
            code, comment = code.strip(), comment.strip()
            added = _ADD.search(code)
            if added:
                out[added.group(1)] = comment
            elif is_view:
                m = re.search(r"(\w+)\s*,?\s*$", code)  # `expr AS name,` or `v.name,`
                if m and not code.upper().startswith(("WITH", "SELECT", "FROM")) and not code.endswith("("):
                    out[m.group(1)] = comment
            elif re.match(r'^"?\w+"?\s+\w', code):  # `name TYPE ...,` (a quoted name too: "check", "values")
                first = code.split()[0].strip('"')
                if code.startswith('"') or first.upper() not in _NOT_COLUMNS:
                    out[first] = comment
    return out


def provenance(warehouse: str | None, relation: str, rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Where the rows came from: warehouse (password hidden), relation, batches and runs, schema version, time."""
    rows = list(rows)
    batches = Counter(r.get("batch_id") for r in rows if "batch_id" in r)
    runs = Counter(r.get("run_id") for r in rows if "run_id" in r)
    try:
        from importlib.metadata import version as _pkg_version

        autoforge_version = _pkg_version("autoforge")
    except Exception:  # noqa: BLE001 - run from a checkout that is not installed
        autoforge_version = "unknown"
    return {
        "warehouse": shown_warehouse(warehouse),
        "relation": relation,
        "rows": len(rows),
        "batches": {str(k): v for k, v in sorted(batches.items(), key=lambda kv: str(kv[0]))},
        "runs": sorted(str(k) for k in runs if k is not None),
        "schema_version": schema_version(warehouse),
        "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "autoforge_version": autoforge_version,
    }


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def card_text(*, title: str, summary: str, prov: dict[str, Any], splits: dict[str, int], data_files: dict[str, str],
              columns: list[tuple[str, str, str]], json_columns: Iterable[str], usage: str,
              dataset_info: dict[str, Any] | None = None, extra: str = "") -> str:
    """The card: front matter (configs, dataset_info), then summary, provenance, splits, columns, usage.

    ``columns``: (name, stored type, description); ``json_columns`` are marked "JSON string"."""
    front: dict[str, Any] = {
        "pretty_name": title,
        "tags": ["autoforge", "agentic-rl", "tool-use", "synthetic"],
        "configs": [{"config_name": "default",
                     "data_files": [{"split": s, "path": p} for s, p in data_files.items()]}],
    }
    if dataset_info:
        front["dataset_info"] = dataset_info
    jc = set(json_columns)
    runs = ", ".join(f"`{r}`" for r in prov["runs"][:10]) or "none recorded"
    if len(prov["runs"]) > 10:
        runs += f" and {len(prov['runs']) - 10} more"
    batches = ", ".join(f"`{b}` ({n} rows)" for b, n in prov["batches"].items()) or "none recorded (no batch_id column)"
    lines = [
        "---", yaml.safe_dump(front, sort_keys=False, allow_unicode=True).rstrip(), "---", "", f"# {title}", "",
        summary, "",
        "## Provenance", "",
        "| | |", "|---|---|",
        f"| warehouse | `{_md(prov['warehouse'])}` |",
        f"| relation | `{_md(prov['relation'])}` |",
        f"| factory batch(es) | {_md(batches)} |",
        f"| runs that wrote the rows | {runs} |",
        f"| warehouse schema version | {prov['schema_version']} |",
        f"| exported at | {prov['exported_at']} |",
        f"| autoforge version | {prov['autoforge_version']} |", "",
        "## Splits", "",
        "| split | rows | files |", "|---|---|---|",
        *[f"| {s} | {splits.get(s, 0)} | `{data_files[s]}` |" for s in data_files], "",
        "## Columns", "",
    ]
    if jc:
        lines += [f"Columns marked *JSON string* ({', '.join(f'`{c}`' for c in sorted(jc))}) hold nested values whose "
                  "shape differs from row to row (e.g. initial states and tools differ per environment), so one "
                  "Arrow schema cannot describe them: they are stored as canonical JSON text (sorted keys); read them "
                  "with `json.loads`.", ""]
    lines += ["| column | type | description |", "|---|---|---|"]
    for name, typ, desc in columns:
        shown = "JSON string" if name in jc else typ
        lines.append(f"| `{name}` | {_md(shown)} | {_md(desc) or '(not documented in sql/)'} |")
    lines += ["", "## Use", "", usage.strip(), ""]
    if extra:
        lines += [extra.strip(), ""]
    return "\n".join(lines)
