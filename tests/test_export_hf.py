"""Issue 17, Hugging Face datasets and verl: `autoforge export ... --format hf | verl` read back with the
real libraries (``datasets.load_from_disk``, ``pyarrow.parquet``).

One small offline factory batch over two environments of different shapes: the bundled
``library`` (state tasks) and the ``effects_calculator`` fixture (answer tasks), so initial
states, tools and gold answers differ between rows (~4 s).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from autoforge.cli import main
from autoforge.integrations.episode import USER_TOOL_SYSTEM_PROMPT
from autoforge.types import canonical_json, state_hash

ROOT = Path(__file__).resolve().parents[1]
TOOLSETS = [ROOT / "tests" / "fixtures" / "realstyle" / "effects_calculator.json",
            ROOT / "autoforge" / "data" / "tooldocs" / "library"]
CONTRACT = ["data_source", "prompt", "ability", "agent_name", "reward_model", "extra_info"]  # verl's rows


@pytest.fixture(scope="module")
def wh(tmp_path_factory) -> str:
    from autoforge.pipeline import run_factory
    from autoforge.warehouse import query

    path = str(tmp_path_factory.mktemp("export") / "wh.duckdb")
    run_factory(warehouse=path, bundled=False, paths=[str(p) for p in TOOLSETS], tasks_per_env=24)
    got = {(r["env_name"], r["split"]) for r in query(path, "SELECT DISTINCT env_name, split FROM v_curated_tasks")}
    assert {e for e, _ in got} == {"library", "effects_calculator"} and {s for _, s in got} == {"train", "test"}, got
    return path


def _export(wh: str, relation: str, fmt: str, out: Path, capsys=None) -> int:
    return main(["export", relation, "--format", fmt, "--out", str(out), "--warehouse", wh])


def _view_counts(wh: str) -> dict[str, int]:
    from autoforge.warehouse import query

    return {r["split"]: r["n"] for r in query(wh, "SELECT split, count(*) AS n FROM v_curated_tasks GROUP BY split")}


def _front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n", 2)[1])


def test_hf_export_is_a_datasetdict_with_one_row_per_task(wh, tmp_path, capsys):
    from datasets import load_from_disk

    from autoforge.types import Task
    from autoforge.warehouse import query, read_records

    out = tmp_path / "hf"
    assert _export(wh, "v_curated_tasks", "hf", out) == 0
    assert "wrote" in capsys.readouterr().out
    ds = load_from_disk(str(out))
    assert set(ds) == {"train", "test"}
    assert {s: ds[s].num_rows for s in ds} == _view_counts(wh)
    assert ds["train"].features == ds["test"].features  # one schema for every environment and split
    for col in ("task_id", "env_id", "env_name", "batch_id", "run_id", "prompt", "tools", "initial_state",
                "gold_state_hash", "gold_answer", "user_facts", "n_tool_calls", "dag_depth", "n_reasoning_nodes",
                "n_requirements", "has_reasoning", "is_multi_requirement", "n_checks_passed", "kind", "split"):
        assert col in ds["train"].column_names, col

    tasks = {t.task_id: t for t in read_records(wh, Task)}
    view = {r["task_id"]: r for r in query(wh, "SELECT * FROM v_curated_tasks")}
    kinds = Counter()
    for split in ds:
        for row in ds[split]:
            t, v = tasks[row["task_id"]], view[row["task_id"]]
            assert row["split"] == split == t.split
            assert (row["env_id"], row["env_name"], row["batch_id"]) == (t.env_id, v["env_name"], t.batch_id)
            # nested values round-trip exactly through their JSON strings
            assert state_hash(json.loads(row["initial_state"])) == state_hash(t.initial_state)
            assert json.loads(row["user_facts"]) == t.user_facts
            assert row["gold_state_hash"] == t.gold_state_hash
            if t.kind in ("answer", "boundary"):  # a boundary task states why too (issue 33)
                assert json.loads(row["gold_answer"]) == t.gold_answer.model_dump()
            else:
                assert row["gold_answer"] is None
            for c in ("n_tool_calls", "dag_depth", "n_reasoning_nodes", "n_requirements", "has_reasoning",
                      "is_multi_requirement", "n_checks_passed"):
                assert row[c] == v[c], c
            names = [f["function"]["name"] for f in json.loads(row["tools"])]
            assert names == sorted(names) and names
            kinds[(row["env_name"], row["kind"])] += 1
    assert kinds[("library", "state")] and kinds[("effects_calculator", "answer")], kinds

    from autoforge.integrations.hf import load_task_records

    decoded = load_task_records(str(out), "test")
    assert len(decoded) == ds["test"].num_rows
    assert all(r["initial_state"] == tasks[r["task_id"]].initial_state and isinstance(r["tools"], list) for r in decoded)


def test_hf_prompt_and_tools_are_what_the_rollout_engine_sends(wh, tmp_path):
    """Play one real episode per environment with a recording agent: the engine's first two
    messages are the row's prompt, and the tools the agent is handed are the row's tools."""
    from datasets import load_from_disk

    from autoforge.pipeline.evaluate import load_eval_inputs
    from autoforge.rollout.batch import play_episodes
    from autoforge.rollout.engine import AgentTurn
    from autoforge.rollout.evaluate import make_user_factory

    out = tmp_path / "hf"
    assert _export(wh, "v_curated_tasks", "hf", out) == 0
    rows = {}
    for row in load_from_disk(str(out))["train"]:
        rows.setdefault(row["env_name"], row)
    seen: dict[str, dict] = {}

    class Recorder:
        name = "recorder"

        def reset(self, ctx):
            self.ctx = ctx

        def act(self, messages):
            seen[self.ctx.task_id] = {"tools": self.ctx.tools, "messages": [m.model_dump() for m in messages]}
            return AgentTurn(give_up="recorded the opening")

    ids = [r["task_id"] for r in rows.values()]
    tasks, dags, tools_by_env, specs_by_env = load_eval_inputs(wh, task_ids=ids)
    user_factory, user_name = make_user_factory("offline")
    play_episodes(tasks, dags, tools_by_env, agent_factory=Recorder, user_factory=user_factory, agent_name="recorder",
                  user_name=user_name, specs_by_env=specs_by_env, concurrency=1)
    assert sorted(seen) == sorted(ids)
    for row in rows.values():
        got = seen[row["task_id"]]
        assert [{"role": m["role"], "content": m["content"]} for m in got["messages"][:2]] == row["prompt"]
        assert row["prompt"][0]["content"] == row["system_prompt"] and row["prompt"][1]["content"] == row["request"]
        assert got["tools"] == json.loads(row["tools"])


def test_hf_card_says_what_each_column_is_and_where_it_came_from(wh, tmp_path):
    from autoforge.warehouse import query

    out = tmp_path / "hf"
    assert _export(wh, "v_curated_tasks", "hf", out) == 0
    card = (out / "README.md").read_text()
    front = _front_matter(card)
    files = {f["split"]: f["path"] for f in front["configs"][0]["data_files"]}
    assert set(files) == {"train", "test"} and all(list(out.glob(p)) for p in files.values())
    assert {s["name"]: s["num_examples"] for s in front["dataset_info"]["splits"]} == _view_counts(wh)
    features = [f["name"] for f in front["dataset_info"]["features"]]
    for name in features:
        assert f"| `{name}` |" in card, name  # every column has a row in the column table
    assert "(not documented" not in card
    for b in {r["batch_id"] for r in query(wh, "SELECT DISTINCT batch_id FROM v_curated_tasks")}:
        assert b in card
    assert str(Path(wh).resolve()) in card
    assert "| `initial_state` | JSON string |" in card and "json.loads" in card
    marker = json.loads((out / "autoforge_export.json").read_text())
    assert marker["format"] == "hf" and marker["relation"] == "v_curated_tasks"
    # the front matter is what the Hub reads: load_dataset(DIR) finds the splits through `configs`
    from datasets import load_dataset

    hub = load_dataset(str(out), cache_dir=str(tmp_path / "cache"))
    assert {s: hub[s].num_rows for s in hub} == _view_counts(wh)


def test_verl_parquet_contract_read_back_with_pyarrow(wh, tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import load_from_disk

    from autoforge.types import Task
    from autoforge.warehouse import read_records

    out = tmp_path / "verl"
    assert _export(wh, "v_curated_tasks", "verl", out) == 0
    assert (out / "README.md").is_file()
    tasks = {t.task_id: t for t in read_records(wh, Task)}
    hf_out = tmp_path / "hf"
    assert _export(wh, "v_curated_tasks", "hf", hf_out) == 0
    hf_prompts = {r["task_id"]: r["prompt"] for s in ("train", "test") for r in load_from_disk(str(hf_out))[s]}
    counts = _view_counts(wh)
    for split in ("train", "test"):
        table = pq.read_table(out / f"{split}.parquet")
        assert table.column_names == CONTRACT
        assert table.num_rows == counts[split]
        schema = table.schema
        assert schema.field("data_source").type == pa.string() and schema.field("ability").type == pa.string()
        assert schema.field("prompt").type == pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
        assert schema.field("reward_model").type == pa.struct([("style", pa.string()), ("ground_truth", pa.string())])
        rows = table.to_pylist()
        assert [r["extra_info"]["index"] for r in rows] == list(range(len(rows)))
        for r in rows:
            x = r["extra_info"]
            t = tasks[x["task_id"]]
            assert x["split"] == split == t.split and r["data_source"] == f"autoforge/{x['env_name']}"
            assert r["ability"] == "tool_use" and r["reward_model"]["style"] == "rule"
            assert r["agent_name"] == "tool_agent" and x["need_tools_kwargs"] is True
            assert {n: k for n, k in x["tools_kwargs"].items() if k} == {
                n: {"create_kwargs": {"task_id": t.task_id, "bundle": str(out / "bundle")}} for n in x["tool_selection"]}
            assert "talk_to_user" in x["tool_selection"]
            truth = r["reward_model"]["ground_truth"]
            if t.kind in ("answer", "boundary"):  # a boundary task states why too (issue 33)
                assert json.loads(truth) == t.gold_answer.model_dump() == json.loads(x["gold_answer"])
            else:
                assert truth == t.gold_state_hash == x["gold_state_hash"]
            assert r["prompt"][1] == hf_prompts[t.task_id][1]  # the user's opening; the system text names talk_to_user
            assert r["prompt"][0]["content"] == USER_TOOL_SYSTEM_PROMPT
            assert json.loads(x["initial_state"]) == t.initial_state and json.loads(x["user_facts"]) == t.user_facts
            assert {f["function"]["name"] for f in json.loads(x["tools"])} >= {c.name for c in t.gold_calls}
    card = (out / "README.md").read_text()
    files = {f["split"]: f["path"] for f in _front_matter(card)["configs"][0]["data_files"]}
    assert files == {"train": "train.parquet", "test": "test.parquet"}
    # how verl's RLHFDataset reads its files: datasets' parquet builder
    from datasets import load_dataset

    read = load_dataset("parquet", data_files={s: str(out / f"{s}.parquet") for s in counts},
                        cache_dir=str(tmp_path / "cache"))
    assert {s: read[s].num_rows for s in read} == counts and read["train"].column_names == CONTRACT
    for col in CONTRACT:
        assert f"| `{col}` |" in card


def test_any_table_exports_with_its_columns(wh, tmp_path):
    """A generic relation: its own columns in one split; JSON columns of varying shape as JSON strings."""
    from datasets import load_from_disk

    from autoforge.warehouse import query

    out = tmp_path / "runs"
    assert _export(wh, "runs", "hf", out) == 0
    ds = load_from_disk(str(out))
    runs = {r["run_id"]: r for r in query(wh, "SELECT * FROM runs")}
    assert list(ds) == ["train"] and ds["train"].num_rows == len(runs)
    assert ds["train"].column_names == list(next(iter(runs.values())))
    for row in ds["train"]:
        want = runs[row["run_id"]]
        assert json.loads(row["params"]) == want["params"] and row["stage"] == want["stage"]
        assert row["started_at"] == want["started_at"]
    card = (out / "README.md").read_text()
    assert "the parameters the run was started with" in card  # the column's comment in sql/001_runs.sql
    assert "| `params` | JSON string |" in card

    out = tmp_path / "envs"  # sample states of two environments: different collections, one schema
    assert _export(wh, "environments", "hf", out) == 0
    rows = list(load_from_disk(str(out))["train"])
    shapes = {frozenset(json.loads(r["sample_state"])) for r in rows}
    assert len(rows) == 2 and len(shapes) == 2
    want = {r["env_id"]: r["sample_state"] for r in query(wh, "SELECT env_id, sample_state FROM environments")}
    assert all(json.loads(r["sample_state"]) == want[r["env_id"]] for r in rows)

    out = tmp_path / "tasks"  # the tasks table is task-shaped too: one row per task, both splits
    assert _export(wh, "tasks", "hf", out) == 0
    n = query(wh, "SELECT count(*) AS n FROM tasks")[0]["n"]
    assert sum(d.num_rows for d in load_from_disk(str(out)).values()) == n


def test_export_folder_rules(wh, tmp_path, capsys, monkeypatch):
    """Writes only --out, atomically; refuses what it must not replace; clear one-line errors."""
    import datasets

    out = tmp_path / "hf"
    assert _export(wh, "v_curated_tasks", "hf", out) == 0
    first = (out / "autoforge_export.json").read_text()
    assert _export(wh, "v_curated_tasks", "hf", out) == 0  # a previous export of the same format is replaced
    capsys.readouterr()

    def broken(self, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(datasets.DatasetDict, "save_to_disk", broken)
    assert _export(wh, "v_curated_tasks", "hf", out) != 0  # a failed export leaves the previous one as it was
    monkeypatch.undo()
    assert datasets.load_from_disk(str(out))["train"].num_rows == _view_counts(wh)["train"]
    assert json.loads((out / "autoforge_export.json").read_text())["relation"] == json.loads(first)["relation"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hf"]  # no temporary folder left behind
    capsys.readouterr()

    assert _export(wh, "v_curated_tasks", "verl", out) == 2  # an hf export is not a verl one
    assert "already holds a --format hf export" in capsys.readouterr().err
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    assert _export(wh, "v_curated_tasks", "hf", foreign) == 2
    assert "not an autoforge export" in capsys.readouterr().err and (foreign / "notes.txt").read_text() == "keep me"
    assert _export(wh, "v_curated_tasks", "verl", foreign / "notes.txt") == 2
    assert "is a file" in capsys.readouterr().err
    assert _export(wh, "v_curated_tasks", "hf", Path(wh).parent) == 2
    assert "holding it" in capsys.readouterr().err
    assert _export(wh, "runs", "verl", tmp_path / "v") == 2
    assert "needs a tasks relation" in capsys.readouterr().err
    assert _export(wh, "no_such_view", "hf", tmp_path / "x") == 2
    assert "known: " in capsys.readouterr().err
    assert not (tmp_path / "v").exists() and not (tmp_path / "x").exists()


def test_an_empty_corpus_exports_loadable_empty_splits(warehouse, tmp_path):
    """No task yet: hf still writes every split with its schema (datasets cannot load a split saved without a
    shard, so an empty one gets one); verl refuses (no environment to play)."""
    from datasets import load_from_disk

    assert _export(warehouse, "v_curated_tasks", "hf", tmp_path / "hf") == 0
    ds = load_from_disk(str(tmp_path / "hf"))
    assert {s: ds[s].num_rows for s in ds} == {"train": 0, "test": 0}
    assert "prompt" in ds["test"].features and str(ds["test"].features["n_tool_calls"].dtype) == "int64"
    assert _export(warehouse, "v_curated_tasks", "verl", tmp_path / "verl") == 2  # no task: no environment to play
    assert not (tmp_path / "verl").exists()
    assert _export(warehouse, "runs", "hf", tmp_path / "runs") == 0
    runs = load_from_disk(str(tmp_path / "runs"))["train"]
    assert runs.num_rows == 0 and str(runs.features["started_at"].dtype).startswith("timestamp")


def test_card_column_docs_come_from_the_sql_comments():
    """Tables (quoted names too), ALTER ... ADD COLUMN, and the newest definition of a view."""
    from autoforge.integrations.card import sql_column_comments

    tasks = sql_column_comments("tasks")
    assert tasks["initial_state"].startswith("S: the task's own initial state") and "kind" in tasks  # 048 adds kind
    assert sql_column_comments("verification_results")["check"].startswith("replay_deterministic")
    assert sql_column_comments("llm_calls")["created_at"] == "UTC"  # not mistaken for a CREATE line
    view = sql_column_comments("v_curated_tasks")
    assert "gold_answer" in view and view["split"].startswith("train | test")  # 049 replaces 041
    assert not {"verified", "envs", "checks", "final"} & set(view)  # CTE names are not columns
    assert sql_column_comments("no_such_relation") == {}
