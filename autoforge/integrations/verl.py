"""``autoforge export RELATION --format verl --out DIR``: a folder verl trains on with AutoForge's environments
(issue 35): the tools, the initial states and the reward, not prompts alone.

The export writes an environment bundle first (``DIR/bundle``, :func:`autoforge.integrations.bundle.write_bundle`;
``--bundle SRC`` copies an existing one instead, with no warehouse), then what verl reads::

    DIR/tools.yaml        verl's tool config (actor_rollout_ref.rollout.multi_turn.tool_config_path): one entry per
                          tool of every environment, plus talk_to_user (the simulated user), each naming the one
                          class autoforge.integrations.verl_tool.AutoForgeTool, config {type: native, tool: NAME},
                          and its OpenAI function schema
    DIR/train.parquet     verl's RL rows (data.train_files / data.val_files), one per task of the split:
    DIR/test.parquet      prompt, agent_name "tool_agent", data_source, reward_model, extra_info with tools_kwargs
                          (create_kwargs: task id and bundle) and tool_selection (the task's tools)
    DIR/reward.py         compute_score(data_source, solution_str, ground_truth, extra_info) for
                          custom_reward_function: the response's tool calls replayed in the bundle
    DIR/bundle/           the environment bundle the tools and the reward play
    DIR/README.md         the card: provenance, the columns, the verl settings

verl runs the tools with :mod:`autoforge.integrations.verl_tool` and scores with
:mod:`autoforge.integrations.verl_runtime`; both import only the bundle runtime. ``benchmarks/interop.py``
checks the folder with verl's own code (docs/trainers.md, "verl").

The row contract (:data:`CONTRACT`):

==============  ============================================================================
column          value
==============  ============================================================================
data_source     ``"autoforge/<env_name>"``: verl passes it to the reward function and groups
                validation metrics by it, so each environment is its own source
prompt          list of ``{role, content}``: the system prompt (the user is reached through
                the ``talk_to_user`` tool), then the simulated user's opening request
ability         ``"tool_use"``
agent_name      ``"tool_agent"``: verl's ``ToolAgentLoop``
reward_model    ``{style: "rule", ground_truth}``: state tasks, the gold final-state hash;
                answer and boundary tasks, the gold answer as JSON
extra_info      struct: ``index`` (row in its file), ``tools_kwargs`` (per tool:
                ``{create_kwargs: {task_id, bundle}}``; null for other environments' tools),
                ``need_tools_kwargs`` (true), ``tool_selection`` (the tools the task's agent
                is given; ``<env>__<name>`` where environments define a name differently),
                ``env_tools`` (the environment's name of each), ``split``, ``task_id``,
                ``env_id``, ``env_name``, ``dag_id``,
                ``kind``, ``batch_id``, ``request``, ``gold_state_hash``, difficulty counts, and
                JSON strings ``tools``, ``initial_state``, ``user_facts``, ``gold_answer``,
                ``gold_calls``
==============  ============================================================================
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from autoforge.errors import ConfigError, WarehouseError
from autoforge.integrations.bundle import USER_TOOL, USER_TOOL_SCHEMA, USER_TOOL_SYSTEM_PROMPT, Bundle, write_bundle
from autoforge.integrations.hf import ExportResult
from autoforge.integrations.outdir import check_out_dir, staged_dir, write_marker
from autoforge.integrations.rows import SPLITS, TaskRow, is_task_relation
from autoforge.integrations.verl_runtime import BUNDLE_ENV, ground_truth
from autoforge.types import canonical_json

ABILITY = "tool_use"
AGENT_NAME = "tool_agent"  # verl's ToolAgentLoop (experimental/agent_loop/tool_agent_loop.py)
TOOL_CLASS = "autoforge.integrations.verl_tool.AutoForgeTool"
BUNDLE_DIR = "bundle"
EXTRA_JSON = ("tools", "initial_state", "user_facts", "gold_answer", "gold_calls")  # JSON strings in extra_info
EXTRA_PLAIN = ("split", "task_id", "env_id", "env_name", "dag_id", "kind", "batch_id", "request", "gold_state_hash",
               "n_tool_calls", "dag_depth", "n_reasoning_nodes", "n_requirements")
COLUMNS = ["data_source", "prompt", "ability", "agent_name", "reward_model", "extra_info"]

CONTRACT: list[tuple[str, str, str]] = [
    ("data_source", "string", '"autoforge/<env_name>": verl hands it to the reward function and groups validation '
                              "metrics by it (one source per environment)"),
    ("prompt", "list of {role: string, content: string}",
     f"the system prompt (the user is reached through the {USER_TOOL} tool), then the simulated user's opening "
     "request: what an episode of the bundle opens with"),
    ("ability", "string", f'always "{ABILITY}"'),
    ("agent_name", "string", f'always "{AGENT_NAME}": verl\'s ToolAgentLoop plays the row'),
    ("reward_model", "struct {style: string, ground_truth: string}",
     'style "rule"; ground_truth: state tasks, the gold final-state hash; answer and boundary tasks, the gold answer '
     "as JSON ({value, kind, tolerance, field}); reward.py checks it against the bundle"),
    ("extra_info", "struct",
     "index (int64, row in its file); tools_kwargs: per tool of the export {create_kwargs: {task_id, bundle}} (null "
     "for the tools of other environments): what verl's ToolAgentLoop hands the tool's create(); need_tools_kwargs "
     "(true); tool_selection: the names of the tools the task's agent is given (its environment's and "
     f"{USER_TOOL}; a name two environments define differently is <env>__<name>); env_tools: the environment's name "
     "of each (reward.py maps the calls back); " + ", ".join(EXTRA_PLAIN) + " (as in the HF export), and JSON strings "
     + ", ".join(EXTRA_JSON) + " (tools: OpenAI function schemas; initial_state: S; user_facts: what the simulated "
                               "user may reveal)"),
]


# --------------------------------------------------------------------------- tools.yaml


def _escape(obj: Any) -> Any:
    """Strings as OmegaConf reads them back verbatim (``${`` would start an interpolation)."""
    if isinstance(obj, str):
        return obj.replace("${", "\\${")
    if isinstance(obj, dict):
        return {k: _escape(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_escape(v) for v in obj]
    return obj


_JSON_TYPES = ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string"), (list, "array"),
               (dict, "object"), (type(None), "null"))


def _json_type(value: Any) -> str:
    return next(name for t, name in _JSON_TYPES if isinstance(value, t))


def verl_tool_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI function schema as verl's ``OpenAIFunctionToolSchema`` accepts it: every parameter has a ``type``
    (verl requires one; a parameter given only as ``anyOf`` / ``oneOf`` / ``enum`` / ``const`` gets the types those
    allow, else ``string``) and the function a description. Other keys stay (verl ignores what it does not model)."""
    s = json.loads(json.dumps(schema))
    fn = s.setdefault("function", {})
    fn.setdefault("description", fn.get("name", ""))
    params = fn.setdefault("parameters", {"type": "object", "properties": {}})
    params.setdefault("type", "object")
    for prop in (params.get("properties") or {}).values():
        if not isinstance(prop, dict) or isinstance(prop.get("type"), (str, list)):
            continue
        types: list[str] = []
        for alt in prop.get("anyOf") or prop.get("oneOf") or ():
            t = alt.get("type") if isinstance(alt, dict) else None
            types += t if isinstance(t, list) else [t] if isinstance(t, str) else []
        if not types and "enum" in prop:
            types = [_json_type(v) for v in prop["enum"]]
        if not types and "const" in prop:
            types = [_json_type(prop["const"])]
        types = list(dict.fromkeys(types)) or ["string"]
        prop["type"] = types[0] if len(types) == 1 else types
    return s


RENAME_SEP = "__"  # a tool two environments define differently is <env>__<tool> in verl (one tool per name there)


def tool_entries(bundle: Bundle) -> tuple[list[dict[str, Any]], dict[str, list[tuple[str, str]]]]:
    """``(tools.yaml entries, env id -> [(verl's name, the environment's name)] of the tools its tasks are given)``.

    verl keeps one tool per name. A name every environment that has it defines the same way stays one shared
    entry; a name two environments define differently becomes ``<env>__<name>`` in each (``<env>``: its bundle
    folder), its ``config.tool`` still the environment's own name."""
    variants: dict[str, set[str]] = {}
    per_env: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for env_id in bundle.environments:
        env = bundle.env(env_id)
        tools = [(s["function"]["name"], verl_tool_schema(s))
                 for s in env.tool_schemas("full") + [json.loads(json.dumps(USER_TOOL_SCHEMA))]]
        per_env[env_id] = tools
        for name, s in tools:
            variants.setdefault(name, set()).add(canonical_json(s))
    entries: dict[str, dict[str, Any]] = {}
    selection: dict[str, list[tuple[str, str]]] = {}
    for env_id, tools in per_env.items():
        prefix = Path(bundle.env(env_id).folder).name
        selection[env_id] = []
        for name, s in tools:
            vname = f"{prefix}{RENAME_SEP}{name}" if len(variants[name]) > 1 else name
            if vname != name and vname in variants:
                raise ConfigError(f"tool {name!r} of {prefix} would be renamed {vname!r} (environments define {name!r} "
                                  f"differently), but {vname!r} is another tool's name; export the environments "
                                  "separately (`autoforge bundle --env NAME`, then `autoforge export --format verl "
                                  "--bundle DIR`)")
            s["function"]["name"] = vname
            entries.setdefault(vname, {"class_name": TOOL_CLASS, "config": {"type": "native", "tool": name},
                                       "tool_schema": _escape(s)})
            selection[env_id].append((vname, name))
    return [entries[n] for n in sorted(entries)], selection


def tools_yaml(entries: list[dict[str, Any]], bundle_root: str) -> str:
    import yaml

    head = (f"# AutoForge tools for verl (autoforge export --format verl): {len(entries)} tools, each played by\n"
            f"# {TOOL_CLASS} in the bundle {bundle_root}\n"
            f"# ({BUNDLE_ENV}=/path/to/bundle overrides it). Set\n"
            "#   actor_rollout_ref.rollout.multi_turn.tool_config_path=<this file>\n")
    return head + yaml.safe_dump({"tools": entries}, sort_keys=False, allow_unicode=True, width=120)


# --------------------------------------------------------------------------- rows


def verl_schema(tool_names: list[str]):
    """The Parquet schema of both files (``extra_info.tools_kwargs`` has one field per tool of the export)."""
    import pyarrow as pa

    from autoforge.integrations.hf import task_schema

    task = task_schema()
    create = pa.struct([("create_kwargs", pa.struct([("task_id", pa.string()), ("bundle", pa.string())]))])
    extra = [pa.field("index", pa.int64()),
             pa.field("tools_kwargs", pa.struct([(n, create) for n in tool_names])),
             pa.field("need_tools_kwargs", pa.bool_()),
             pa.field("tool_selection", pa.list_(pa.string())),
             pa.field("env_tools", pa.list_(pa.string()))]
    extra += [task.field(c) for c in EXTRA_PLAIN] + [pa.field(c, pa.string()) for c in EXTRA_JSON]
    return pa.schema([
        pa.field("data_source", pa.string()),
        task.field("prompt"),
        pa.field("ability", pa.string()),
        pa.field("agent_name", pa.string()),
        pa.field("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        pa.field("extra_info", pa.struct(extra)),
    ])


def verl_record(row: TaskRow, index: int, *, bundle: str, tools: list[tuple[str, str]],
                tool_names: list[str]) -> dict[str, Any]:
    """One task as a row of verl's RL parquet (see :data:`CONTRACT`); ``tools``: (verl's name, the environment's
    name) of each tool the task's agent is given, ``tool_names``: every tool of the export (verl's names)."""
    d = row.model_dump(mode="json")
    create = {"create_kwargs": {"task_id": row.task_id, "bundle": bundle}}
    mine = {v for v, _ in tools}
    extra: dict[str, Any] = {"index": index, "tools_kwargs": {n: create if n in mine else None for n in tool_names},
                             "need_tools_kwargs": True, "tool_selection": [v for v, _ in tools],
                             "env_tools": [e for _, e in tools], **{c: d[c] for c in EXTRA_PLAIN}}
    extra.update({c: None if d[c] is None else canonical_json(d[c]) for c in EXTRA_JSON})
    return {"data_source": f"autoforge/{row.env_name}", "prompt": d["prompt"], "ability": ABILITY,
            "agent_name": AGENT_NAME, "reward_model": {"style": "rule", "ground_truth": ground_truth(row)},
            "extra_info": extra}


# --------------------------------------------------------------------------- reward.py, README


REWARD_PY = '''"""verl reward function of this AutoForge export (custom_reward_function.path=<this file>,
custom_reward_function.name=compute_score): the response's tool calls replayed in the bundle beside this file.

It imports AutoForge's bundle runtime only (autoforge.integrations.verl_runtime: no warehouse, Prefect or torch).
"""

from pathlib import Path

from autoforge.integrations.verl_runtime import compute_score as _compute_score

BUNDLE = Path(__file__).resolve().parent / "{bundle_dir}"  # {bundle_env} overrides it
MAX_PARALLEL_CALLS = 1  # = actor_rollout_ref.rollout.multi_turn.max_parallel_calls (calls past it in a turn never ran)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    """1.0 or 0.0: the trajectory in solution_str (Hermes <tool_call> blocks) scored as AutoForge's episode engine
    scores it (final state vs the gold state, the answer in the final message, the environment's rules)."""
    return _compute_score(data_source, solution_str, ground_truth, extra_info, bundle=BUNDLE,
                          max_parallel_calls=MAX_PARALLEL_CALLS)
'''


VERL_SETTINGS = (  # (key, value) of the verl overrides that train on a folder; {out}: the folder
    ("data.train_files", "{out}/train.parquet"), ("data.val_files", "{out}/test.parquet"),
    ("data.max_prompt_length", "4096"), ("data.max_response_length", "4096"),
    ("actor_rollout_ref.rollout.multi_turn.enable", "True"),
    ("actor_rollout_ref.rollout.multi_turn.format", "hermes"),
    ("actor_rollout_ref.rollout.multi_turn.tool_config_path", "{out}/tools.yaml"),
    ("actor_rollout_ref.rollout.multi_turn.max_tool_response_length", "8000"),
    ("reward.custom_reward_function.path", "{out}/reward.py"),
    ("reward.custom_reward_function.name", "compute_score"),
)


def verl_settings(out: str) -> str:
    """The verl overrides (Hydra command-line form) that train on the folder ``out``, one per line."""
    return " \\\n".join(f"    {k}={v.format(out=out)}" for k, v in VERL_SETTINGS)


_USAGE = """verl (0.9), with AutoForge's code importable in verl's environment (docs/trainers.md, "verl: tools, rows
and reward"):

```bash
python -m verl.trainer.main_ppo ... \\
{settings}
```

`tools.yaml` lists every tool of the export (each played by `{tool_class}`), and each row's
`extra_info.tool_selection` gives the task's agent only its environment's tools and `{user_tool}`. Each trajectory
plays one episode of the bundle (`bundle/`, a fresh copy of the task's initial state); `reward.py` replays the
response's tool calls in the bundle and scores them as AutoForge's episode engine does. A moved folder: set
`{bundle_env}=/new/place/bundle`.

```python
import pyarrow.parquet as pq

row = pq.read_table("{out}/train.parquet").to_pylist()[0]
row["prompt"], row["extra_info"]["tool_selection"], row["reward_model"]["ground_truth"]
```
"""


def _bundle_provenance(bundle: Bundle) -> dict[str, Any]:
    m = bundle.manifest
    runs = sorted({t.run_id for t in (bundle.task(i) for i in bundle.task_ids()) if t.run_id})
    return {"warehouse": m.source.warehouse, "relation": m.source.relation, "rows": m.counts.get("tasks"),
            "batches": dict(m.source.batches), "runs": runs, "schema_version": m.source.schema_version,
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "autoforge_version": m.autoforge_version, "bundle_created_at": m.created_at.isoformat()}


# --------------------------------------------------------------------------- the export


def export_source(warehouse: str | None, relation: str | None, out: str, fmt: str, bundle: str | None,
                  hint: str = " Or pass --bundle DIR") -> tuple[Path, Bundle | None]:
    """``(the checked --out folder, the loaded --bundle or None)`` for a trainer export of ``fmt``: a
    bundle may not live inside the folder the export replaces, and without one ``relation`` must be a
    tasks relation of the warehouse."""
    target = check_out_dir(warehouse, out, fmt)
    if bundle is not None:
        source = Bundle.load(bundle)
        if Path(source.root) == target or target in Path(source.root).parents:
            raise ConfigError(f"--bundle {source.root} is inside --out {target}, which the export replaces; copy the "
                              "bundle elsewhere first")
        return target, source
    if relation is None or not is_task_relation(warehouse, relation):
        raise WarehouseError(f"--format {fmt} needs a tasks relation (one row per task: columns task_id, env_id, "
                             f"request), e.g. v_curated_tasks; {relation!r} is not one.{hint}")
    return target, None


def export_verl(warehouse: str | None, relation: str | None, out: str, *, bundle: str | None = None,
                tool_schema: str = "full") -> ExportResult:
    """Write the verl folder (see the module docstring) of ``relation`` (a tasks relation of the warehouse), or,
    with ``bundle``, of that bundle's tasks (no warehouse read)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from autoforge.integrations.card import card_text

    if tool_schema != "full":
        raise ConfigError("--format verl writes the tools as the bundle holds them (tool_schema full)")
    target, source = export_source(warehouse, relation, out, "verl", bundle,
                                   hint=" Export it with --format hf or parquet instead, or pass --bundle DIR")
    final_bundle = str(target / BUNDLE_DIR)
    with staged_dir(target) as tmp:
        if source is not None:
            shutil.copytree(source.root, tmp / BUNDLE_DIR)
        else:
            write_bundle(warehouse, relation, tmp / BUNDLE_DIR)
        b = Bundle.load(tmp / BUNDLE_DIR)
        entries, selection = tool_entries(b)
        names = [e["tool_schema"]["function"]["name"] for e in entries]
        schema = verl_schema(names)
        tables, splits = {}, {}
        for split in SPLITS:
            rows = b.task_rows(split=split, system_prompt=USER_TOOL_SYSTEM_PROMPT)
            records = [verl_record(r, i, bundle=final_bundle, tools=selection[r.env_id], tool_names=names)
                       for i, r in enumerate(rows)]
            tables[split] = pa.Table.from_pylist(records, schema=schema)
            splits[split] = len(records)
        prov = _bundle_provenance(b)
        rel = b.manifest.source.relation
        card = card_text(
            title=f"AutoForge {rel} (verl: tools, rows, reward)",
            summary=f"AutoForge tasks from `{rel}` for verl's multi-turn tool agent: `tools.yaml` (every tool of "
                    f"{len(b.environments)} simulated environment(s) and the simulated user), `train.parquet` and "
                    "`test.parquet` (one row per task; test is held out), `reward.py` (the episode engine's reward) "
                    "and `bundle/` (the environments and tasks they play, no warehouse needed).",
            prov=prov, splits=splits, data_files={s: f"{s}.parquet" for s in SPLITS}, columns=CONTRACT,
            json_columns=(), usage=_USAGE.format(out=target, settings=verl_settings(str(target)), tool_class=TOOL_CLASS,
                                                 user_tool=USER_TOOL, bundle_env=BUNDLE_ENV),
            extra="Inside `extra_info`, " + ", ".join(f"`{c}`" for c in EXTRA_JSON) + " are JSON strings (their shape "
                  "differs per environment; one Parquet schema holds every row): read them with `json.loads`.")
        for split, table in tables.items():
            pq.write_table(table, tmp / f"{split}.parquet")
        (tmp / "tools.yaml").write_text(tools_yaml(entries, final_bundle))
        (tmp / "reward.py").write_text(REWARD_PY.format(bundle_dir=BUNDLE_DIR, bundle_env=BUNDLE_ENV))
        (tmp / "README.md").write_text(card)
        write_marker(tmp, "verl", {**prov, "splits": splits, "tools": len(entries)})
    return ExportResult(format="verl", relation=rel, out=str(target), splits=splits, columns=COLUMNS,
                        json_columns=[f"extra_info.{c}" for c in EXTRA_JSON], task_rows=True)
