"""``autoforge export RELATION --format verl --out DIR``: verl's RL parquet, ``DIR/train.parquet`` and
``DIR/test.parquet`` (the task split), with ``DIR/README.md`` stating the column contract.

The column contract (:data:`CONTRACT`; one row per task of a tasks relation, from
:func:`autoforge.integrations.rows.task_rows`), the five columns verl's ``RLHFDataset`` and reward
managers read:

==============  ============================================================================
column          value
==============  ============================================================================
data_source     ``"autoforge/<env_name>"``: verl passes it to the reward function and groups
                validation metrics by it, so each environment is its own source
prompt          list of ``{role, content}``: the system prompt, then the user's opening
                request (exactly what AutoForge's rollout engine sends first)
ability         ``"tool_use"``
reward_model    ``{style: "rule", ground_truth}``: state tasks, the gold final-state hash
                (sha256 of the canonical JSON of S*); answer tasks, the gold answer as JSON
                (``{value, kind, tolerance, field}``)
extra_info      struct: ``index`` (row in its file), ``split``, ``task_id``, ``env_id``,
                ``env_name``, ``dag_id``, ``kind``, ``batch_id``, ``request``,
                ``gold_state_hash``, difficulty counts, and JSON strings ``tools`` (OpenAI
                function schemas), ``initial_state``, ``user_facts``, ``gold_answer``,
                ``gold_calls``
==============  ============================================================================

Nested values whose shape differs per environment are JSON strings (one Parquet schema for
every row, and ``ground_truth`` is always a string). A reward function for verl
(``custom_reward_function``) replays the episode's tool calls into
``json.loads(extra_info["initial_state"])`` and compares ``state_hash(final)`` with
``ground_truth`` (state tasks), or checks the final message against the gold answer
(:func:`autoforge.tasks.answers.answer_match`).
"""

from __future__ import annotations

from typing import Any

from autoforge.errors import WarehouseError
from autoforge.integrations.card import card_text, provenance
from autoforge.integrations.hf import ExportResult
from autoforge.integrations.outdir import check_out_dir, staged_dir, write_marker
from autoforge.integrations.rows import SPLITS, TaskRow, is_task_relation, task_rows
from autoforge.tasks.kinds import task_kind
from autoforge.types import canonical_json

ABILITY = "tool_use"
EXTRA_JSON = ("tools", "initial_state", "user_facts", "gold_answer", "gold_calls")  # JSON strings in extra_info
EXTRA_PLAIN = ("split", "task_id", "env_id", "env_name", "dag_id", "kind", "batch_id", "request", "gold_state_hash",
               "n_tool_calls", "dag_depth", "n_reasoning_nodes", "n_requirements")

CONTRACT: list[tuple[str, str, str]] = [
    ("data_source", "string", '"autoforge/<env_name>": verl hands it to the reward function and groups validation '
                              "metrics by it (one source per environment)"),
    ("prompt", "list of {role: string, content: string}",
     "the system prompt, then the user's opening request: what AutoForge's rollout engine sends first"),
    ("ability", "string", f'always "{ABILITY}"'),
    ("reward_model", "struct {style: string, ground_truth: string}",
     'style "rule"; ground_truth: state tasks, the gold final-state hash (sha256 of the canonical JSON of S*); answer '
     "tasks, the gold answer as JSON ({value, kind, tolerance, field}); extra_info.kind says which"),
    ("extra_info", "struct",
     "index (int64, row in its file), " + ", ".join(EXTRA_PLAIN) + " (as in the HF export), and JSON strings "
     + ", ".join(EXTRA_JSON) + " (tools: OpenAI function schemas; initial_state: S; user_facts: what a simulated "
                               "user may reveal)"),
]


def verl_schema():
    """The Parquet schema of both files (the same for every environment)."""
    import pyarrow as pa

    from autoforge.integrations.hf import task_schema

    task = task_schema()
    extra = [pa.field("index", pa.int64())] + [task.field(c) for c in EXTRA_PLAIN] + \
        [pa.field(c, pa.string()) for c in EXTRA_JSON]
    return pa.schema([
        pa.field("data_source", pa.string()),
        task.field("prompt"),
        pa.field("ability", pa.string()),
        pa.field("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        pa.field("extra_info", pa.struct(extra)),
    ])


def ground_truth(row: TaskRow) -> str:
    """The rule reward's target: the gold state hash, or (answer tasks) the gold answer as canonical JSON."""
    if task_kind(row.kind).states_answer and row.gold_answer is not None:
        return canonical_json(row.gold_answer)
    return row.gold_state_hash


def verl_record(row: TaskRow, index: int) -> dict[str, Any]:
    """One task as a row of verl's RL parquet (see :data:`CONTRACT`)."""
    d = row.model_dump(mode="json")
    extra: dict[str, Any] = {"index": index, **{c: d[c] for c in EXTRA_PLAIN}}
    extra.update({c: None if d[c] is None else canonical_json(d[c]) for c in EXTRA_JSON})
    return {"data_source": f"autoforge/{row.env_name}", "prompt": d["prompt"], "ability": ABILITY,
            "reward_model": {"style": "rule", "ground_truth": ground_truth(row)}, "extra_info": extra}


_USAGE = """```python
import json
import pyarrow.parquet as pq

rows = pq.read_table("{out}/train.parquet").to_pylist()
row = rows[0]
row["prompt"]                      # [{{"role": "system", ...}}, {{"role": "user", ...}}]
row["reward_model"]["ground_truth"]
state = json.loads(row["extra_info"]["initial_state"])
```

verl: `data.train_files={out}/train.parquet data.val_files={out}/test.parquet` (`data.prompt_key=prompt`, the
default), with a `custom_reward_function` that scores a rollout against `reward_model.ground_truth`
(state tasks: replay the tool calls into `extra_info.initial_state` and compare the state's hash; answer
tasks: the final message must state the gold answer, as `autoforge.tasks.answers.answer_match` checks).
"""


def export_verl(warehouse: str | None, relation: str, out: str, *, tool_schema: str = "full") -> ExportResult:
    """Write ``relation`` (a tasks relation) as ``out/train.parquet`` and ``out/test.parquet`` with a README."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = check_out_dir(warehouse, out, "verl")
    if not is_task_relation(warehouse, relation):
        raise WarehouseError(f"--format verl needs a tasks relation (one row per task: columns task_id, env_id, "
                             f"request), e.g. v_curated_tasks; {relation!r} is not one. Export it with --format hf "
                             "or parquet instead")
    rows = task_rows(warehouse, relation, tool_schema=tool_schema)
    schema = verl_schema()
    tables = {}
    for split in SPLITS:
        mine = [r for r in rows if r.split == split]
        tables[split] = pa.Table.from_pylist([verl_record(r, i) for i, r in enumerate(mine)], schema=schema)
    splits = {s: t.num_rows for s, t in tables.items()}
    prov = provenance(warehouse, relation, [r.model_dump(include={"batch_id", "run_id"}) for r in rows])
    card = card_text(
        title=f"AutoForge {relation} (verl RL parquet)",
        summary=f"AutoForge tasks from `{relation}` in verl's RL data format: one row per task of a simulated "
                "tool-use environment. `train.parquet` and `test.parquet` are the task split (test is held out).",
        prov=prov, splits=splits, data_files={s: f"{s}.parquet" for s in SPLITS}, columns=CONTRACT,
        json_columns=(), usage=_USAGE.format(out=out),
        extra="Inside `extra_info`, " + ", ".join(f"`{c}`" for c in EXTRA_JSON) + " are JSON strings (their shape "
              "differs per environment; one Parquet schema holds every row): read them with `json.loads`.")
    with staged_dir(target) as tmp:
        for split, table in tables.items():
            pq.write_table(table, tmp / f"{split}.parquet")
        (tmp / "README.md").write_text(card)
        write_marker(tmp, "verl", {**prov, "splits": splits})
    return ExportResult(format="verl", relation=relation, out=str(target), splits=splits,
                        columns=[f.name for f in schema], json_columns=[f"extra_info.{c}" for c in EXTRA_JSON],
                        task_rows=True)
