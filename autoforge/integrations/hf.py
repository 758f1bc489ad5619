"""``autoforge export RELATION --format hf --out DIR``: a Hugging Face ``datasets.DatasetDict`` on disk.

``DIR`` is what ``DatasetDict.save_to_disk`` writes (``dataset_dict.json``, ``train/``,
``test/`` with Arrow files), plus the dataset card ``DIR/README.md`` and the marker
``DIR/autoforge_export.json``; ``datasets.load_from_disk(DIR)`` opens it.

Two shapes:

- **a tasks relation** (one row per task: ``v_curated_tasks``, ``tasks``, or any view with
  ``task_id``, ``env_id`` and ``request``): one row per task, the columns of
  :class:`autoforge.integrations.rows.TaskRow` (ids, environment, ``prompt`` as chat messages,
  OpenAI tool schemas, initial state, gold state hash, gold answer, user facts, difficulty).
  ``train`` / ``test`` come from the task split; both are always present (an empty split has the
  same features).
- **any other table or view**: its columns as they are, in one ``train`` split, or ``train`` /
  ``test`` when it has a ``split`` column.

Nested values whose shape differs between rows (an initial state is a different set of
collections in each environment; tool schemas, user facts and JSON columns such as
``runs.params`` vary too) would make Arrow infer one sparse struct over every key seen, or fail
on conflicting types, so they are stored as canonical JSON strings (:data:`TASK_JSON_COLUMNS`;
for other relations every JSON column holding objects), and the card marks them. Flat values
(ids, counts, flags, lists of scalars) keep their Arrow types; ``prompt`` is a list of
``{role, content}`` structs, the chat format trainers read.
"""

from __future__ import annotations

import json
import typing
from contextlib import contextmanager
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from autoforge.integrations.card import card_text, provenance, sql_column_comments
from autoforge.integrations.outdir import check_out_dir, staged_dir, write_marker
from autoforge.integrations.rows import SPLITS, TaskRow, is_task_relation, task_rows
from autoforge.pipeline.export import column_types, relation_columns, relation_rows
from autoforge.types import canonical_json

TASK_JSON_COLUMNS = ("tools", "initial_state", "gold_answer", "user_facts", "gold_calls")
_SCALARS = (str, int, float, bool)
_SHARD_BYTES = 500 * 2**20  # datasets' default max_shard_size


class ExportResult(BaseModel):
    """What a folder export wrote (``autoforge export`` prints it)."""

    model_config = ConfigDict(extra="forbid")

    format: str
    relation: str
    out: str
    splits: dict[str, int]  # rows per split
    columns: list[str]
    json_columns: list[str]  # stored as JSON strings
    task_rows: bool  # one row per task (TaskRow columns) or the relation's own columns


def _arrow_type(annotation: Any):
    import pyarrow as pa

    args = typing.get_args(annotation)
    base = next(a for a in args if a is not type(None)) if type(None) in args else annotation  # X | None -> X
    if typing.get_origin(base) is Literal or base is str:
        return pa.string()
    return {int: pa.int64(), bool: pa.bool_(), float: pa.float64()}[base]


def task_schema():
    """The Arrow schema of a tasks export: TaskRow's fields, JSON columns as strings, prompt as chat structs."""
    import pyarrow as pa

    fields = []
    for name, f in TaskRow.model_fields.items():
        if name in TASK_JSON_COLUMNS:
            typ = pa.string()
        elif name == "prompt":
            typ = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
        else:
            typ = _arrow_type(f.annotation)
        fields.append(pa.field(name, typ))
    return pa.schema(fields)


def task_record(row: TaskRow) -> dict[str, Any]:
    """One TaskRow as a flat dict for Arrow: JSON columns as canonical JSON strings (None stays None)."""
    d = row.model_dump(mode="json")
    for c in TASK_JSON_COLUMNS:
        d[c] = None if d[c] is None else canonical_json(d[c])
    return d


def _sql_arrow_type(sql_type: str):
    """The Arrow type of a SQL column type, for columns with no value to infer one from (None: unknown)."""
    import pyarrow as pa

    t = sql_type.upper()
    if "JSON" in t or t.startswith(("VARCHAR", "TEXT", "CHAR", "CHARACTER")):
        return pa.string()
    if t.startswith("TIMESTAMP"):
        return pa.timestamp("us", tz="UTC") if "TIME ZONE" in t or t.endswith("TZ") else pa.timestamp("us")
    return {"BOOLEAN": pa.bool_(), "INTEGER": pa.int64(), "BIGINT": pa.int64(), "SMALLINT": pa.int64(),
            "DOUBLE": pa.float64(), "DOUBLE PRECISION": pa.float64(), "REAL": pa.float64(), "FLOAT": pa.float64(),
            "DATE": pa.date32()}.get(t)


def _generic_column(values: list[Any], sql_type: str):
    """(Arrow array, stored as JSON?) for one column of any relation."""
    import pyarrow as pa

    is_json = "JSON" in sql_type.upper()
    present = [v for v in values if v is not None]
    if not present:  # nothing to infer from (an empty relation, an all-NULL column): the SQL type says
        return pa.array(values, _sql_arrow_type(sql_type) or pa.string()), is_json
    nested = any(isinstance(v, dict) or (isinstance(v, list) and not all(isinstance(x, _SCALARS) for x in v))
                 for v in present)
    if is_json and (nested or len({type(v) for v in present}) > 1):
        return pa.array([None if v is None else canonical_json(v) for v in values], pa.string()), True
    try:
        return pa.array(values), False
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
        return pa.array([None if v is None else canonical_json(v) for v in values], pa.string()), True


def generic_table(warehouse: str | None, relation: str):
    """(Arrow table of every row of ``relation``, the columns stored as JSON strings)."""
    import pyarrow as pa

    cols = relation_columns(warehouse, relation)
    types = column_types(warehouse, relation)
    rows = relation_rows(warehouse, relation)
    arrays, json_cols = [], []
    for c in cols:
        arr, as_json = _generic_column([r.get(c) for r in rows], types.get(c, ""))
        arrays.append(arr)
        if as_json:
            json_cols.append(c)
    return pa.Table.from_arrays(arrays, names=cols), json_cols, rows


def _split_tables(table, always: bool) -> dict[str, Any]:
    """``{"train": ..., "test": ...}`` by the ``split`` column, or everything in ``train`` without one."""
    import pyarrow.compute as pc

    if "split" not in table.column_names:
        return {"train": table}
    values = set(table.column("split").to_pylist())
    if not values <= set(SPLITS):
        return {"train": table}  # a split column of other values is just a column
    return {s: table.filter(pc.equal(table.column("split"), s)) for s in SPLITS if always or s in values}


def _type_name(feature: Any) -> str:
    """``string``, ``int64``, ``list of {role: string, content: string}``: a feature as a reader says it."""
    if hasattr(feature, "dtype") and not hasattr(feature, "feature"):
        return str(feature.dtype)
    inner = getattr(feature, "feature", None)
    if isinstance(inner, dict):
        return "list of {" + ", ".join(f"{k}: {_type_name(v)}" for k, v in inner.items()) + "}"
    return f"list of {_type_name(inner)}" if inner is not None else str(feature)


@contextmanager
def _quiet():
    """No progress bars while saving (a CLI prints one line; restored afterwards)."""
    import datasets

    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was:
            datasets.enable_progress_bars()


_USAGE = """```python
import json
from datasets import load_from_disk

ds = load_from_disk("{out}")            # DatasetDict: {splits}
row = ds["{first}"][0]
{json_hint}```
"""


def export_hf(warehouse: str | None, relation: str, out: str, *, tool_schema: str = "full") -> ExportResult:
    """Write ``relation`` as a ``DatasetDict`` folder at ``out`` with its card; see the module docstring."""
    from datasets import Dataset, DatasetDict, Features
    from datasets.table import InMemoryTable

    target = check_out_dir(warehouse, out, "hf")
    tasks = is_task_relation(warehouse, relation)
    if tasks:
        import pyarrow as pa

        rows = task_rows(warehouse, relation, tool_schema=tool_schema)
        records = [task_record(r) for r in rows]
        table = pa.Table.from_pylist(records, schema=task_schema())
        json_cols = list(TASK_JSON_COLUMNS)
        docs = {n: f.description or "" for n, f in TaskRow.model_fields.items()}
        prov_rows = records
    else:
        table, json_cols, prov_rows = generic_table(warehouse, relation)
        docs = sql_column_comments(relation)
    parts = _split_tables(table, always=tasks)
    dd = DatasetDict({s: Dataset(InMemoryTable(t)) for s, t in parts.items()})
    features = Features.from_arrow_schema(table.schema)
    splits = {s: t.num_rows for s, t in parts.items()}
    prov = provenance(warehouse, relation, prov_rows)
    hint = ('tools = json.loads(row["tools"]); state = json.loads(row["initial_state"])\nmessages = row["prompt"]  '
            '# [{"role": "system", ...}, {"role": "user", ...}]\n') if tasks else \
        "".join(f'{c} = json.loads(row["{c}"]) if row["{c}"] is not None else None\n' for c in json_cols[:3])
    summary = (f"AutoForge tasks from `{relation}`: one row per task of a simulated tool-use environment, with the "
               "opening conversation (`prompt`), the tools (OpenAI function schemas), the initial state and the gold "
               "outcome. Reward: for `kind = state` the sha256 of the canonical JSON of the final environment state "
               "equals `gold_state_hash`; for `kind = answer` (and `boundary`: the user asks for what a rule "
               "forbids) the state is left as it was and the agent's final message states `gold_answer`. "
               "`user_facts` are for a simulated user only (the agent never sees them)." if tasks else
               f"Every row of the AutoForge warehouse relation `{relation}`, its columns as they are.")
    card = card_text(
        title=f"AutoForge {relation}", summary=summary, prov=prov, splits=splits,
        data_files={s: f"{s}/data-*.arrow" for s in parts},
        columns=[(f.name, _type_name(features[f.name]), docs.get(f.name, "")) for f in table.schema],
        json_columns=json_cols,
        usage=_USAGE.format(out=out, splits=", ".join(parts), first=next(iter(parts)), json_hint=hint),
        dataset_info={"features": features._to_yaml_list(),
                      "splits": [{"name": s, "num_examples": n} for s, n in splits.items()]},
    )
    with staged_dir(target) as tmp, _quiet():
        # one shard per 500 MB (datasets' default), and one for an empty split: without a shard it cannot be loaded
        dd.save_to_disk(str(tmp), num_shards={s: max(1, -(-t.nbytes // _SHARD_BYTES)) for s, t in parts.items()})
        (tmp / "README.md").write_text(card)
        write_marker(tmp, "hf", {**prov, "splits": splits, "task_rows": tasks})
    return ExportResult(format="hf", relation=relation, out=str(target), splits=splits, columns=table.column_names,
                        json_columns=json_cols, task_rows=tasks)


def load_task_records(folder: str, split: str) -> list[dict[str, Any]]:
    """Rows of a tasks export's ``split`` with the JSON columns decoded (for trainers reading the folder)."""
    from datasets import load_from_disk

    out = []
    for r in load_from_disk(folder)[split]:
        out.append({k: (json.loads(v) if k in TASK_JSON_COLUMNS and v is not None else v) for k, v in r.items()})
    return out
