"""AutoForge's exports checked by each trainer library's own code, in a venv of its own (issue 35).

    python benchmarks/interop.py --setup             # create the cached venvs it lacks, then check
    python benchmarks/interop.py                     # check (a library whose venv is missing is skipped)
    python benchmarks/interop.py --warehouse wh.duckdb --relation v_curated_tasks --keep /tmp/verl_export

One line per library: ``<library> <version>: gold <reward> noop <reward> (<tasks> tasks, <envs> envs)``.

The corpus: a warehouse made here (three environments through the offline factory: ``effects_calculator``
answer tasks, ``library`` state and boundary tasks with runtime guards and a judged rule, ``hr`` state tasks;
~15 s), or ``--warehouse``. Its tasks are exported with AutoForge (this interpreter), then checked by a
process of the library's venv, which sees AutoForge's code on ``PYTHONPATH`` (no install: the venv's
``pip check`` stays clean) and has, of AutoForge's dependencies, only what the bundle runtime imports
(:data:`RUNTIME_DEPS`).

The venvs live outside the repository, in ``$AUTOFORGE_INTEROP_DIR`` (default ``/work/.cache/autoforge-interop``),
one per library and pinned version; ``--setup`` creates a missing one (verl 0.9.1: 163-251 s on 2 shared cores,
2.0 GB with the CPU torch wheel; the torch pin is this interpreter's torch, so a CPU build stays a CPU build).

**verl** (``verl[verl-core]==0.9.1``): ``autoforge export --format verl`` writes the folder, then verl's code runs it:
``verl.tools.tool_registry.load_all_tools`` reads ``tools.yaml``; ``verl.utils.dataset.rl_dataset.RLHFDataset`` reads
both parquet files with a local tokenizer (``autoforge/data/base_policy``'s, Hermes ``<tool_call>`` blocks); for each
row, ``verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop.run`` plays the gold trajectory (the oracle agent's,
played first by AutoForge's episode engine from the bundle: the gold DAG's calls and the questions and confirmations
the user and the rules want; a scripted server hands ToolAgentLoop each of its actions as a generated ``<tool_call>``
turn, messages to the user through ``talk_to_user``, then its last message as the final turn; ToolAgentLoop parses the
calls with verl's Hermes parser and runs them through the tools' ``create`` / ``execute`` / ``release``), and a
do-nothing trajectory (the final message only); ``verl.trainer.ppo.reward.load_reward_manager`` loads ``reward.py`` as
``custom_reward_function`` into the ``naive`` reward manager, whose ``run_single`` decodes the response and calls
``compute_score``. The live episode's ``calc_reward`` must equal it: gold 1.0, do-nothing 0.0 on every task.

**Harbor** (``harbor==0.25.0``, a Python 3.12 venv: ``PYENV_VERSION=3.12.1 python3.12 -m venv``; 74 s, 427 MB;
AutoForge's runtime is not installed there): ``autoforge export --format harbor`` writes one task folder per task;
``harbor lint --json`` over every folder must report nothing (Harbor's default rules) and
``harbor.models.task.task.Task`` must load each. Then, without Docker, each picked task (``--tasks-per-env``,
default 2 per environment, one of each kind first) runs in a temp copy of its folder with this interpreter as
``$AUTOFORGE_PYTHON`` and the folder's own ``environment/`` (its copy of AutoForge's code and the bundle) on
``PYTHONPATH``: ``solution/solve.sh`` then ``tests/test.sh`` must write 1.0 to the reward file, ``tests/test.sh``
alone 0.0.

**OpenEnv**, **verifiers** and **NeMo Gym**: ``benchmarks/interop_openenv.py``, ``interop_verifiers.py`` and
``interop_nemo_gym.py`` (each module's docstring says what its library's own code checks).

**Rewards that agree.** After the libraries, every task any of them played is scored by AutoForge itself from one
bundle (the bundle runtime's replay, and the TRL environment class), gold and do-nothing; one line says whether
every library gave the same rewards as those two on every task (``rewards agree: ...``) or where they differ.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("AUTOFORGE_INTEROP_DIR") or ("/work/.cache/autoforge-interop" if Path("/work").is_dir()
                                                       else Path.home() / ".cache" / "autoforge-interop"))
TOOLSETS = [ROOT / "tests" / "fixtures" / "realstyle" / "effects_calculator.json",
            ROOT / "autoforge" / "data" / "tooldocs" / "library", ROOT / "autoforge" / "data" / "tooldocs" / "hr"]
TOKENIZER = ROOT / "autoforge" / "data" / "base_policy"
# What AutoForge's bundle runtime imports beyond the standard library (pyproject's ranges). verl brings all but
# google-re2 and openai (autoforge.llm is imported on the way to the task DAG code).
RUNTIME_DEPS = ["pydantic>=2.7,<3", "networkx>=3.2,<4", "jsonschema>=4.20", "pyyaml>=6", "orjson>=3.9",
                "regex>=2023.0", "google-re2>=1.1", "openai>=1.40"]
LIBRARIES = {"verl": {"version": "0.9.1", "install": ["verl[verl-core]==0.9.1"]},
             # Harbor needs Python >= 3.12; it only reads the folders (lint, Task): no AutoForge runtime in its venv
             "harbor": {"version": "0.25.0", "install": ["harbor==0.25.0"], "python": ["python3.12"],
                        "env": {"PYENV_VERSION": "3.12.1"}, "runtime": False},
             # checked by benchmarks/interop_<library>.py (each: ``run(warehouse, relation, tmp, keep, per_env)``
             # with the same result keys as run_harbor, and ``rewards`` per task)
             # the export is pip-installed with --no-build-isolation: setuptools older than 70.1 (a fresh venv's 65.5)
             # builds wheels only with the `wheel` package, which nothing else brings
             "openenv": {"version": "0.3.0", "install": ["openenv-core==0.3.0", "setuptools>=70.1"], "torch": False},
             "verifiers": {"version": "0.4.0", "install": ["verifiers==0.4.0"], "torch": False},
             # NeMo Gym 0.7.0 declares Python >= 3.13.14; with only 3.13.0 here it is installed ignoring that pin
             # (benchmarks/interop_nemo_gym.py says what the check then shows). "torch": False: the bundle runtime
             # does not need it (only verl does), so the venv does not carry the 750 MB wheel.
             "nemo-gym": {"version": "0.7.0", "install": ["nemo-gym==0.7.0"], "python": ["python3.13"],
                          "env": {"PYENV_VERSION": "3.13.0"}, "pip_flags": ["--ignore-requires-python"],
                          "torch": False}}
DONE = "All done: I have completed everything you asked for."


def venv_of(library: str) -> Path:
    return CACHE / f"{library}-{LIBRARIES[library]['version']}"


def venv_python(library: str) -> Path | None:
    """The library's cached venv interpreter (None: not set up)."""
    py = venv_of(library) / "bin" / "python"
    return py if py.is_file() else None


def setup(library: str) -> dict:
    """Create the library's venv (once): the pinned library, the bundle runtime's dependencies, ``pip check``."""
    from importlib.metadata import PackageNotFoundError, version

    venv = venv_of(library)
    spec = LIBRARIES[library]
    t0 = time.perf_counter()
    subprocess.run(spec.get("python", [sys.executable]) + ["-m", "venv", str(venv)], check=True,
                   env={**os.environ, **spec.get("env", {})})
    pins = list(spec["install"])
    if spec.get("runtime", True):
        try:
            if spec.get("torch", True):
                pins.append(f"torch=={version('torch')}")  # this interpreter's build (a CPU wheel stays one)
        except PackageNotFoundError:
            pass
        pins += RUNTIME_DEPS
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", *spec.get("pip_flags", [])]
    subprocess.run(pip + pins, check=True)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], check=True)
    size = sum(p.stat().st_size for p in venv.rglob("*") if p.is_file() and not p.is_symlink())
    return {"library": library, "install_s": round(time.perf_counter() - t0, 1), "size_mb": round(size / 2 ** 20)}


def build_warehouse(folder: Path) -> str:
    from autoforge.pipeline import run_factory

    path = str(folder / "interop.duckdb")
    run_factory(warehouse=path, bundled=False, paths=[str(p) for p in TOOLSETS], tasks_per_env=8, seed=0)
    return path


def hermes(name: str, arguments: dict) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments}, ensure_ascii=False)}\n</tool_call>"


def oracle_scripts(bundle_dir: Path) -> dict[str, dict]:
    """Per task, the gold trajectory as a policy would generate it for verl: the oracle agent (it follows the gold
    DAG, asks the user for the facts it needs and for the confirmations the rules want) played by AutoForge's
    episode engine from the bundle, each of its actions one generated turn (a tool call, or a message to the user
    through talk_to_user; the environment's tool names: the verl check renders them with the names the row's
    agent was given), then its last message as the final one; and the engine's reward for it."""
    from autoforge.integrations.bundle import Bundle
    from autoforge.integrations.harbor import gold_trajectories

    return {tid: {"actions": g["actions"], "final": g["final"], "engine_reward": g["reward"]}
            for tid, g in gold_trajectories(Bundle.load(bundle_dir)).items()}


def child_env(tmp: Path) -> dict[str, str]:
    """The library process's environment: AutoForge's code on PYTHONPATH, nothing fetched from a hub."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(ROOT), HF_HOME=str(tmp / "hf"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", RAY_DEDUP_LOGS="0")
    return env


def inside(py: Path, argv: list[str], key: str, what: str, env: dict[str, str], timeout: float,
           cwd: Path | None = None) -> dict:
    """Run a check in a library's venv (``py argv``) and return the JSON it printed as ``{"<key>": ...}`` on one
    line; RuntimeError with the tail of its output when it failed or printed none."""
    proc = subprocess.run([str(py), *argv], capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"{{\"{key}\"")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the {what} check failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-6000:]}")
    return json.loads(lines[-1])[key]


def run_verl(warehouse: str, relation: str, tmp: Path, keep: Path | None = None) -> dict:
    """Export ``relation`` for verl, then check the folder in verl's venv; its result (see the module docstring)."""
    from autoforge.integrations.verl import export_verl

    py = venv_python("verl")
    if py is None:
        return {"library": "verl", "skipped": f"no venv at {venv_of('verl')} (python benchmarks/interop.py --setup)"}
    out = keep or tmp / "verl_export"
    export_verl(warehouse, relation, str(out))
    scripts = tmp / "verl_gold.json"
    scripts.write_text(json.dumps(oracle_scripts(out / "bundle")))
    return inside(py, [__file__, "--inside-verl", str(out), "--scripts", str(scripts)], "verl_check", "verl",
                  child_env(tmp), 1800)


def _pick(tasks: list[tuple[str, str, str]], per_env: int | None) -> list[str]:
    """Task ids to play, ``per_env`` per environment (None: all), each environment's kinds first."""
    if per_env is None:
        return [t for t, _, _ in tasks]
    out: list[str] = []
    for env in sorted({e for _, e, _ in tasks}):
        mine = [(t, k) for t, e, k in tasks if e == env]
        first = list({k: t for t, k in reversed(mine)}.values())  # one task of each kind
        out += (first + [t for t, _ in mine if t not in first])[:per_env]
    return out


def play_harbor_task(folder: Path, work: Path, *, gold: bool) -> float:
    """A Harbor task run without Docker: the folder copied to ``work``; ``solution/solve.sh`` (gold) then
    ``tests/test.sh``, with this interpreter as ``$AUTOFORGE_PYTHON`` and the task's own ``environment/`` (its
    copy of AutoForge's code and of the bundle) where the image would put them; the reward file test.sh wrote."""
    shutil.copytree(folder, work)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(AUTOFORGE_PYTHON=sys.executable, PYTHONPATH=str(work / "environment"),
               AUTOFORGE_BUNDLE=str(work / "environment" / "bundle"),
               AUTOFORGE_HARBOR_STATE=str(work / "logs" / "artifacts" / "autoforge-episode.json"),
               AUTOFORGE_REWARD_FILE=str(work / "logs" / "verifier" / "reward.txt"))
    scripts = (["solution/solve.sh"] if gold else []) + ["tests/test.sh"]
    for script in scripts:
        proc = subprocess.run(["bash", script], cwd=work, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"{folder.name}: {script} failed (exit {proc.returncode}):\n{proc.stdout[-2000:]}\n"
                               f"{proc.stderr[-3000:]}")
    return float((work / "logs" / "verifier" / "reward.txt").read_text().strip())


def run_harbor(warehouse: str, relation: str, tmp: Path, keep: Path | None = None,
               per_env: int | None = 2) -> dict:
    """Export ``relation`` as Harbor tasks; Harbor's own code checks every folder (``harbor lint`` and
    ``Task(dir)``, in Harbor's venv); then, without Docker, the gold and do-nothing runs of ``per_env`` tasks per
    environment (None: all) with :func:`play_harbor_task`: gold 1.0, do-nothing 0.0."""
    from autoforge.integrations.harbor import export_harbor

    py = venv_python("harbor")
    if py is None:
        return {"library": "harbor",
                "skipped": f"no venv at {venv_of('harbor')} (python benchmarks/interop.py --setup)"}
    out = keep or tmp / "harbor_export"
    export_harbor(warehouse, relation, str(out))
    dirs = sorted(p for p in out.iterdir() if (p / "task.toml").is_file())
    lint = subprocess.run([str(py.parent / "harbor"), "lint", "--json", *map(str, dirs)], capture_output=True,
                          text=True, env=child_env(tmp), timeout=600)
    loaded = inside(py, [__file__, "--inside-harbor", str(out)], "harbor_check", "Harbor", child_env(tmp), 600)
    bad: list = []
    try:
        findings = json.loads(lint.stdout)
    except ValueError:
        findings = [f"harbor lint exit {lint.returncode}: {lint.stdout[-1000:]} {lint.stderr[-2000:]}"]
    bad += [("lint", f) for f in findings]
    if lint.returncode != 0 and not findings:
        bad.append(("lint exit", lint.returncode))
    meta = {t["dir"]: t for t in loaded["tasks"]}
    picked = _pick([(d, meta[d]["env"], meta[d]["kind"]) for d in sorted(meta)], per_env)
    gold, noop = [], []
    for i, d in enumerate(picked):
        gold.append((d, play_harbor_task(out / d, tmp / "harbor_runs" / f"gold-{i}", gold=True)))
        noop.append((d, play_harbor_task(out / d, tmp / "harbor_runs" / f"noop-{i}", gold=False)))
    bad += [g for g in gold if g[1] != 1.0] + [n for n in noop if n[1] != 0.0]
    envs = sorted({meta[d]["env"] for d in picked})
    return {"library": "harbor", "version": loaded["version"], "tasks": len(picked), "envs": len(envs),
            "env_names": envs, "kinds": sorted({meta[d]["kind"] for d in picked}), "exported": len(dirs),
            "loaded": len(meta), "lint_findings": len(findings),
            "gold": min(g[1] for g in gold) if not bad else [g[1] for g in gold],
            "noop": max(n[1] for n in noop) if not bad else [n[1] for n in noop], "bad": bad,
            "rewards": {meta[d]["task_id"]: {"gold": g, "noop": dict(noop)[d]} for d, g in gold}}


def harbor_check(folder: str) -> dict:
    """Harbor's own loader over every task folder of an export (runs in Harbor's venv)."""
    from importlib.metadata import version

    from harbor.models.task.task import Task

    tasks = []
    for d in sorted(p for p in Path(folder).iterdir() if (p / "task.toml").is_file()):
        t = Task(d)
        md = t.config.metadata
        tasks.append({"dir": d.name, "task_id": md["autoforge_task_id"], "env": md["autoforge_env"],
                      "kind": md["autoforge_kind"], "instruction_chars": len(t.instruction)})
    return {"version": version("harbor"), "tasks": tasks}


# --------------------------------------------------------------------------- inside verl's venv


def verl_check(folder: str, scripts: dict[str, dict]) -> dict:
    """verl's own code over an export folder (runs in verl's venv; see the module docstring); ``scripts``: per
    task, the gold trajectory's generated turns and final message (:func:`oracle_scripts`)."""
    import asyncio
    from importlib.metadata import version

    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap, _agent_loop_registry
    from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop
    from verl.tools.tool_registry import load_all_tools
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from verl.workers.rollout.replica import TokenOutput

    from autoforge.integrations.bundle import Bundle

    folder_p = Path(folder)
    tools_yaml, reward_py = str(folder_p / "tools.yaml"), str(folder_p / "reward.py")
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {
            "prompt_length": 32768, "response_length": 32768, "full_determinism": False,
            "multi_turn": {"enable": True, "max_user_turns": None, "max_assistant_turns": None,
                           "max_parallel_calls": 1, "max_tool_response_length": 8000,
                           "tool_response_truncate_side": "middle", "format": "hermes",
                           "tool_config_path": tools_yaml}}},
        "data": {"tool_config_path": tools_yaml, "max_prompt_length": 32768, "filter_overlong_prompts": False,
                 "cache_dir": str(Path(os.environ["HF_HOME"]) / "verl"), "apply_chat_template_kwargs": {},
                 "mm_processor_kwargs": {}, "prompt_key": "prompt"},
        "reward": {"custom_reward_function": {"path": reward_py, "name": "compute_score", "reward_kwargs": {}},
                   "reward_manager": {"source": "register", "name": "naive"}},
    })
    tok = AutoTokenizer.from_pretrained(str(TOKENIZER), local_files_only=True)
    tools = load_all_tools(tool_config_path=tools_yaml, function_tool_path=None)
    by_name = {t.name: t for t in tools}
    assert {type(t).__name__ for t in tools} == {"AutoForgeTool"}, {type(t).__name__ for t in tools}
    files = [str(folder_p / f"{s}.parquet") for s in ("train", "test")]
    import pyarrow.parquet as pq

    files = [f for f in files if pq.read_metadata(f).num_rows]
    ds = RLHFDataset(files, tok, cfg.data)
    assert ds.tool_schemas is not None and len(ds.tool_schemas) == len(tools), "RLHFDataset did not load the tools"
    bundle = Bundle.load(folder_p / "bundle")
    rm = None  # the reward manager takes the running event loop: made inside main()

    class Scripted:
        """The policy's server: hands the loop the scripted turns, one per generate call."""

        def __init__(self, turns: list[str]):
            self.turns = list(turns)

        async def generate(self, request_id, *, prompt_ids, sampling_params, **kwargs):
            text = self.turns.pop(0) if self.turns else DONE
            return TokenOutput(token_ids=tok.encode(text + "<|im_end|>", add_special_tokens=False))

    class Probe(ToolAgentLoop):
        """ToolAgentLoop as it is; only remembers the trajectory's agent_data (to ask the live reward after)."""

        agent_data = None

        async def _call_tool(self, tool_call, tools_kwargs, agent_data):
            Probe.agent_data = agent_data
            return await super()._call_tool(tool_call, tools_kwargs, agent_data)

    async def play(row: dict, turns: list[str], final: str) -> tuple[float, float, int]:
        Probe.agent_data = None
        loop = Probe(trainer_config=DictConfigWrap(cfg), server_manager=Scripted(turns + [final]), tokenizer=tok,
                     processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                     tools=ToolListWrap(tools))
        out = await loop.run(sampling_params={}, raw_prompt=row["raw_prompt"], tools_kwargs=row["tools_kwargs"],
                             extra_info=row["extra_info"])
        # the live episode's reward, through a tool instance of the trajectory
        user = by_name["talk_to_user"]
        iid, _ = await user.create(create_kwargs=row["tools_kwargs"]["talk_to_user"]["create_kwargs"])
        live = await user.calc_reward(iid, agent_data=Probe.agent_data, final_message=final)
        await user.release(iid)
        # verl's reward manager over the trajectory, as its reward loop hands it one
        prompt, response = list(out.prompt_ids), list(out.response_ids)
        data = DataProto.from_dict(
            tensors={"prompts": torch.tensor([prompt]), "responses": torch.tensor([response]),
                     "attention_mask": torch.ones(1, len(prompt) + len(response), dtype=torch.long)},
            non_tensors={k: np.array([row[k]], dtype=object) for k in ("data_source", "reward_model", "extra_info")}
            | {"__num_turns__": np.array([out.num_turns], dtype=np.int32)})
        scored = await rm.run_single(data)
        if os.environ.get("AUTOFORGE_INTEROP_SHOW") == row["extra_info"]["task_id"]:  # one response, decoded
            print(f"--- {row['extra_info']['task_id']}: response as the reward manager decodes it\n"
                  f"{tok.decode(response, skip_special_tokens=True)}\n--- reward {scored}", file=sys.stderr)
        return float(live), float(scored["reward_score"]), out.num_turns

    async def main() -> dict:
        nonlocal rm
        rm = load_reward_manager(cfg, tok)
        gold, noop, envs, kinds, turns_n = [], [], set(), set(), 0
        for i in range(len(ds)):
            row = ds[i]
            assert row["agent_name"] == "tool_agent" and "tool_agent" in _agent_loop_registry
            assert _agent_loop_registry["tool_agent"]["_target_"].endswith("ToolAgentLoop")
            task = bundle.task(row["extra_info"]["task_id"])
            gold_script = scripts[task.task_id]
            x = row["extra_info"]  # the names the agent was given (<env>__<name> where environments differ)
            given = dict(zip(x["env_tools"], x["tool_selection"]))
            turns = [hermes(given[name], args) for name, args in gold_script["actions"]]
            live, score, n = await play(row, turns, gold_script["final"])
            gold.append((task.task_id, live, score))
            turns_n += n
            live0, score0, _ = await play(row, [], DONE)
            noop.append((task.task_id, live0, score0))
            envs.add(task.env_name)
            kinds.add(task.kind)
        return {"gold": gold, "noop": noop, "envs": sorted(envs), "kinds": sorted(kinds), "turns": turns_n}

    res = asyncio.run(main())
    bad = [g for g in res["gold"] if g[1:] != (1.0, 1.0)] + [n for n in res["noop"] if n[1:] != (0.0, 0.0)]
    bad += [(t, "engine", s["engine_reward"]) for t, s in scripts.items() if s["engine_reward"] != 1.0]
    # the verl side imports AutoForge's bundle runtime only
    heavy = sorted(m for m in ("duckdb", "sqlalchemy", "prefect", "autoforge.warehouse", "autoforge.pipeline",
                               "autoforge.integrations.verl", "autoforge.rl") if m in sys.modules)
    bad += [("imported", m) for m in heavy]
    return {"library": "verl", "version": version("verl"), "tasks": len(res["gold"]), "envs": len(res["envs"]),
            "env_names": res["envs"], "kinds": res["kinds"], "turns": res["turns"],
            "gold": min(g[2] for g in res["gold"]) if bad == [] else [g[2] for g in res["gold"]],
            "noop": max(n[2] for n in res["noop"]) if bad == [] else [n[2] for n in res["noop"]],
            "live_equals_score": all(g[1] == g[2] for g in res["gold"] + res["noop"]), "bad": bad,
            "rewards": {t: {"gold": g, "noop": dict((n[0], n[2]) for n in res["noop"])[t]}
                        for t, _, g in res["gold"]},
            "transformers": version("transformers"), "torch": version("torch")}


# --------------------------------------------------------------------------- rewards that agree


def reference_rewards(warehouse: str, relation: str, tmp: Path, task_ids: list[str]) -> dict[str, dict]:
    """Per task, the gold and do-nothing rewards as AutoForge gives them itself, from one bundle of ``relation``:
    ``bundle`` (:meth:`Bundle.replay` of the oracle's trajectory; of nothing with :data:`DONE` as the last word)
    and ``trl`` (the TRL environment class over the same bundle: the tool methods, ``talk_to_user``, the final
    message, ``get_reward``)."""
    from autoforge.integrations.bundle import USER_TOOL, Bundle, write_bundle
    from autoforge.integrations.trl import TRLEnvironments

    folder = tmp / "reference_bundle"
    if not folder.exists():
        write_bundle(warehouse, relation, folder)
    bundle = Bundle.load(folder)
    scripts = oracle_scripts(folder)
    rows = {r.task_id: r for r in bundle.task_rows()}
    out: dict[str, dict] = {}
    envs = TRLEnvironments(bundle, [rows[t] for t in task_ids])
    try:
        for t in task_ids:
            s = scripts[t]
            bundle_gold = bundle.replay(t, [(n, a) for n, a in s["actions"]], final_message=s["final"])
            bundle_noop = bundle.replay(t, [], final_message=DONE)
            env = envs.factories[rows[t].env_name]()
            trl = {}
            for mode, actions, final in (("gold", s["actions"], s["final"]), ("noop", [], DONE)):
                env.reset(task_id=t)
                for name, args in actions:
                    if name == USER_TOOL:
                        env.talk_to_user(**args)
                    else:
                        getattr(env, name)(**args)
                env._set_final_message(final)
                trl[mode] = env.get_reward()
            out[t] = {"bundle": {"gold": bundle_gold, "noop": bundle_noop}, "trl": trl}
    finally:
        envs.close()
    return out


def agreement(results: list[dict], reference: dict[str, dict]) -> dict:
    """Every library's per-task gold and do-nothing rewards beside AutoForge's own (:func:`reference_rewards`):
    the tasks where any two differ."""
    table: dict[str, dict[str, dict]] = {t: dict(ref) for t, ref in reference.items()}
    for res in results:
        for t, r in (res.get("rewards") or {}).items():
            table.setdefault(t, {})[res["library"]] = {"gold": r["gold"], "noop": r["noop"]}
    differ = {t: by for t, by in table.items() if len({(v["gold"], v["noop"]) for v in by.values()}) != 1}
    libraries = sorted({lib for by in table.values() for lib in by})
    return {"tasks": len(table), "libraries": libraries, "differ": differ,
            "compared": sum(len(by) for by in table.values())}


def agreement_line(agree: dict) -> str:
    what = f"{agree['tasks']} tasks, {agree['compared']} task x library results; {', '.join(agree['libraries'])}"
    if agree["differ"]:
        return f"rewards DIFFER on {len(agree['differ'])} of {agree['tasks']} tasks ({what})"
    return f"rewards agree: gold and do-nothing, {what}"


# --------------------------------------------------------------------------- main


def line(res: dict) -> str:
    if "skipped" in res:
        return f"{res['library']}: skipped ({res['skipped']})"
    return f"{res['library']} {res['version']}: gold {res['gold']} noop {res['noop']} ({res['tasks']} tasks, " \
           f"{res['envs']} envs)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setup", action="store_true", help="create the cached venvs that are missing first")
    ap.add_argument("--setup-only", action="store_true", help="create the cached venvs that are missing, then stop "
                                                              "(.ci/run's second step)")
    ap.add_argument("--only", choices=sorted(LIBRARIES), action="append", help="check only this library")
    ap.add_argument("--warehouse", default=None, help="export this warehouse's tasks (default: a 3-environment "
                                                      "corpus made here)")
    ap.add_argument("--relation", default="v_curated_tasks", help="the tasks relation to export")
    ap.add_argument("--keep", type=Path, default=None, help="write the export here (kept) instead of a temp dir "
                                                          "(KEEP/<library> when several libraries run)")
    ap.add_argument("--json", action="store_true", help="print each result as JSON too")
    ap.add_argument("--inside-verl", metavar="DIR", help=argparse.SUPPRESS)  # the check, in verl's venv
    ap.add_argument("--scripts", metavar="JSON", help=argparse.SUPPRESS)  # its gold trajectories
    ap.add_argument("--inside-harbor", metavar="DIR", help=argparse.SUPPRESS)  # Harbor's loader, in its venv
    ap.add_argument("--tasks-per-env", "--harbor-tasks-per-env", dest="tasks_per_env", default="2",
                    help="harbor, openenv, verifiers, nemo-gym: play gold and do-nothing runs of this many tasks per "
                         "environment, or all (default 2; verl plays every task; every Harbor folder is linted and "
                         "loaded)")
    args = ap.parse_args(argv)
    if args.inside_harbor:
        print(json.dumps({"harbor_check": harbor_check(args.inside_harbor)}))
        return 0
    if args.inside_verl:
        print(json.dumps({"verl_check": verl_check(args.inside_verl, json.loads(Path(args.scripts).read_text()))}))
        return 0
    libraries = args.only or sorted(LIBRARIES)
    failed = False
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="autoforge-interop-") as tmp_s:
        tmp = Path(tmp_s)
        for lib in libraries:
            if (args.setup or args.setup_only) and venv_python(lib) is None:
                print(f"setup: {json.dumps(setup(lib))}", flush=True)
        if args.setup_only:
            return 0
        warehouse = args.warehouse or build_warehouse(tmp)
        for lib in libraries:
            t0 = time.perf_counter()
            keep = args.keep / lib if args.keep and len(libraries) > 1 else args.keep
            per_env = None if args.tasks_per_env == "all" else int(args.tasks_per_env)
            if lib == "harbor":
                res = run_harbor(warehouse, args.relation, tmp, keep, per_env=per_env)
            elif lib == "verl":
                res = run_verl(warehouse, args.relation, tmp, keep)
            else:  # benchmarks/interop_<lib>.py
                module = importlib.import_module(f"interop_{lib.replace('-', '_')}")
                res = module.run(warehouse, args.relation, tmp, keep, per_env=per_env)
            res["check_s"] = round(time.perf_counter() - t0, 1)
            print(line(res), flush=True)
            if args.json:
                print(json.dumps(res))
            failed |= bool(res.get("bad"))
            results.append(res)
        played = sorted({t for res in results for t in res.get("rewards") or {}})
        if played:
            agree = agreement(results, reference_rewards(warehouse, args.relation, tmp, played))
            print(agreement_line(agree), flush=True)
            if args.json:
                print(json.dumps({"agreement": agree}))
            failed |= bool(agree["differ"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
