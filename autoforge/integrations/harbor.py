"""``autoforge export RELATION --format harbor --out DIR``: Harbor task folders (issue 35), one per task::

    DIR/<task>/task.toml            Harbor's task config (schema 1.4): timeouts, resources, a separate verifier
                                    container, [metadata] with the AutoForge task (id, environment, kind, split)
    DIR/<task>/instruction.md       what the agent is told: the system text, the user's request, and how to
                                    call the tools from the shell (python -m autoforge.integrations.harbor_cli)
    DIR/<task>/environment/         the image: Dockerfile, requirements.txt (the bundle runtime's dependencies,
                                    pinned), autoforge/ (AutoForge's Python code), bundle/ (the environment bundle)
    DIR/<task>/tests/test.sh        the verifier: replays the episode file through the bundle and writes
                                    AutoForge's reward (1 or 0) to /logs/verifier/reward.txt
    DIR/<task>/solution/solve.sh    the oracle: the gold trajectory's actions through the same command-line tool

The agent's calls are kept in ``/logs/artifacts/autoforge-episode.json`` (Harbor collects ``/logs/artifacts``
and hands it to the separate verifier container), see :mod:`autoforge.integrations.harbor_cli`. The scripts
run ``$AUTOFORGE_PYTHON`` (default ``python3``): in the image, the Dockerfile's Python with requirements.txt
installed and ``PYTHONPATH=/opt/autoforge/src``; outside it, any Python with AutoForge's runtime.
``benchmarks/interop.py`` checks the folders with Harbor's own code (docs/trainers.md, "Harbor").
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from importlib.metadata import PackageNotFoundError, requires, version
from pathlib import Path
from typing import Any

from autoforge.errors import ConfigError
from autoforge.integrations.bundle import Bundle, write_bundle
from autoforge.integrations.hf import ExportResult
from autoforge.integrations.outdir import staged_dir, write_marker

BUNDLE_DIR = "bundle"  # in each task's environment/
STAGED_BUNDLE = ".bundle"  # the whole bundle, while the export is written
DONE = "All done: I have completed everything you asked for."
RUNTIME_PACKAGES = ("pydantic", "pydantic-core", "networkx", "jsonschema", "pyyaml", "orjson", "regex",
                    "google-re2", "openai")  # what the bundle runtime imports (benchmarks/interop.py RUNTIME_DEPS)
CLI = "python -m autoforge.integrations.harbor_cli"

DOCKERFILE = """FROM python:3.12-slim
# AutoForge's bundle runtime (the dependencies pinned in requirements.txt, the code under /opt/autoforge/src)
COPY requirements.txt /opt/autoforge/requirements.txt
RUN python -m pip install --no-cache-dir -r /opt/autoforge/requirements.txt
COPY autoforge /opt/autoforge/src/autoforge
COPY bundle /opt/autoforge/bundle
ENV PYTHONPATH=/opt/autoforge/src AUTOFORGE_BUNDLE=/opt/autoforge/bundle AUTOFORGE_TASK={task_id} \\
    AUTOFORGE_PYTHON=python AUTOFORGE_HARBOR_STATE=/logs/artifacts/autoforge-episode.json
RUN mkdir -p /logs/artifacts /app
WORKDIR /app
"""

TASK_TOML = """schema_version = "1.4"
source = "autoforge"

[metadata]
autoforge_task_id = {task_id}
autoforge_env = {env}
autoforge_kind = {kind}
autoforge_split = {split}
autoforge_gold_calls = {n_calls}
category = "tool-use"

[agent]
timeout_sec = 1800.0

[verifier]
timeout_sec = 600.0
environment_mode = "separate"

[environment]
build_timeout_sec = 900.0
cpus = 1
memory_mb = 2048
"""

INSTRUCTION = """{system}

## The user's request

{user}

## How to act

You reach the tools and the user from the shell, one process per call (the episode is saved between calls):

```bash
{cli} prompt                                   # this request and the tools again
{cli} tools                                    # the tools' JSON schemas
{cli} call TOOL_NAME '{{"arg": "value"}}'        # run a tool; prints its result
{cli} call talk_to_user '{{"message": "..."}}'   # ask the user; prints the reply
{cli} final 'YOUR LAST MESSAGE'                # your last word to the user: state the answer here
```

The task is scored on the final state of the environment, on the answer in your last message where the user
asked a question, and on keeping the environment's rules.

## Tools

{tools}
"""

SCRIPT_HEAD = """#!/bin/bash
# {what} (autoforge export --format harbor). Runs $AUTOFORGE_PYTHON (the image sets it; default python3) with
# AutoForge's bundle runtime importable; $AUTOFORGE_BUNDLE / $AUTOFORGE_HARBOR_STATE say where the bundle and the
# episode file are (the image sets them).
set -euo pipefail
PY="${{AUTOFORGE_PYTHON:-python3}}"
af() {{ "$PY" -m autoforge.integrations.harbor_cli --task {task} "$@"; }}
"""

TEST_SH = SCRIPT_HEAD + """REWARD="${{AUTOFORGE_REWARD_FILE:-/logs/verifier/reward.txt}}"
mkdir -p "$(dirname "$REWARD")"
echo 0 > "$REWARD"  # a verifier that breaks scores 0
af reward --out "$REWARD"
"""


def _toml_str(s: str) -> str:
    return json.dumps(str(s), ensure_ascii=False)  # a TOML basic string is a JSON string


def _folder_name(task_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", task_id)


def gold_trajectories(bundle: Bundle) -> dict[str, dict[str, Any]]:
    """Per task, the oracle agent's trajectory (the gold DAG's calls, the questions and confirmations the user and
    the rules want), played by AutoForge's episode engine from the bundle: ``{"actions": [(tool, args)],
    "final": message, "reward": the engine's}``. Messages to the user are ``talk_to_user`` calls."""
    from autoforge.integrations.bundle import USER_TOOL
    from autoforge.rollout.agents import OracleAgent
    from autoforge.rollout.batch import play_episodes
    from autoforge.rollout.evaluate import make_user_factory

    tasks, dags, tools, specs, judged = bundle.eval_inputs()
    user_factory, user_name = make_user_factory("offline")
    episodes = play_episodes(tasks, dags, tools, agent_factory=OracleAgent, user_factory=user_factory,
                             agent_name="oracle", user_name=user_name, specs_by_env=specs, rules_by_env=judged,
                             concurrency=2).episodes
    out = {}
    for e in episodes:
        actions, said = [], []
        for m in e.messages:
            if m.role != "assistant":
                continue
            actions += [(c.name, c.arguments) for c in m.tool_calls or ()]
            if (m.content or "").strip() and not m.tool_calls:
                actions.append((USER_TOOL, {"message": m.content}))
                said.append(m.content)
        out[e.task_id] = {"actions": actions, "final": said[-1] if said else DONE, "reward": e.reward,
                          "ended": f"{e.termination}" + (f" ({e.termination_detail})" if e.termination_detail else "")}
    return out


def requirements() -> str:
    lines = []
    for p in RUNTIME_PACKAGES:
        try:
            lines.append(f"{p}=={version(p)}")
        except PackageNotFoundError:
            raise ConfigError(f"--format harbor pins the bundle runtime's dependencies as installed here; {p} is not "
                              "installed") from None
    return "\n".join(lines) + "\n"


def runtime_requirements() -> list[str]:
    """The bundle runtime's dependencies with AutoForge's own version ranges (its installed metadata; bare names
    where AutoForge is not installed)."""
    names = {p.lower() for p in RUNTIME_PACKAGES if p != "pydantic-core"}
    try:
        reqs = requires("autoforge") or []
    except PackageNotFoundError:
        reqs = []
    out = {}
    for r in reqs:
        if "extra ==" in r:
            continue
        name = re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0].strip().lower()
        if name in names:
            out[name] = r.split(";")[0].strip()
    return [out.get(n, n) for n in sorted(names)]


def _copy_code(dst: Path) -> None:
    src = Path(__file__).resolve().parents[1]  # the autoforge package
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "base_policy"))


def solve_sh(task_id: str, gold: dict[str, Any]) -> str:
    q = shlex.quote
    lines = [SCRIPT_HEAD.format(what="The oracle: the gold trajectory's actions", task=q(task_id))]
    for name, args in gold["actions"]:
        lines.append(f"af call {q(name)} {q(json.dumps(args, ensure_ascii=False, sort_keys=True))}")
    lines.append(f"af final {q(gold['final'])}")
    return "\n".join(lines) + "\n"


def instruction_md(bundle: Bundle, task_id: str) -> str:
    with bundle.episode(task_id) as ep:
        p = ep.prompt()
    tools = []
    for t in p.tools:
        fn = t.get("function", t)
        tools.append(f"### {fn['name']}\n\n{fn.get('description', '').strip()}\n\n```json\n"
                     f"{json.dumps(fn.get('parameters', {}), indent=1, ensure_ascii=False)}\n```")
    return INSTRUCTION.format(system=p.system.strip(), user=p.user.strip(), cli=CLI, tools="\n\n".join(tools))


def stage_bundle(tmp: Path, warehouse: str | None, relation: str | None, source: Bundle | None,
                 name: str = ".bundle") -> Bundle:
    """The bundle a trainer export is built around, in its staging folder ``tmp``: a copy of ``source`` (a
    --bundle), else written from ``relation``; loaded and checked."""
    if source is not None:
        shutil.copytree(source.root, tmp / name)
    else:
        write_bundle(warehouse, relation, tmp / name)
    return Bundle.load(tmp / name)


def checked_golds(bundle: Bundle, why: str) -> dict[str, dict[str, Any]]:
    """The oracle's trajectory per task (:func:`autoforge.integrations.harbor.gold_trajectories`); ConfigError
    when one does not score 1.0 (``why``: what the export would then ship broken)."""
    golds = gold_trajectories(bundle)
    bad = {t: f"reward {g['reward']}, ended {g['ended']}" for t, g in golds.items() if g["reward"] != 1.0}
    if bad:
        raise ConfigError(f"the oracle's trajectory does not score 1.0 on {len(bad)} task(s) ({bad}); {why}")
    return golds


def export_harbor(warehouse: str | None, relation: str | None, out: str, *, bundle: str | None = None) -> ExportResult:
    """Write the Harbor task folders (see the module docstring) of ``relation`` (a tasks relation of the
    warehouse), or, with ``bundle``, of that bundle's tasks (no warehouse read)."""
    from autoforge.integrations.verl import export_source

    target, source = export_source(warehouse, relation, out, "harbor", bundle)
    reqs = requirements()
    with staged_dir(target) as tmp:
        b = stage_bundle(tmp, warehouse, relation, source, STAGED_BUNDLE)
        golds = checked_golds(b, "solution/solve.sh would not solve them")
        splits: dict[str, int] = {}
        code = tmp / ".autoforge-code"
        _copy_code(code)
        for task_id in b.task_ids():
            entry = b.task(task_id)
            env = b.env(entry.env_id)
            d = tmp / _folder_name(task_id)
            (d / "environment").mkdir(parents=True)
            shutil.copytree(tmp / STAGED_BUNDLE, d / "environment" / BUNDLE_DIR)
            shutil.copytree(code, d / "environment" / "autoforge")
            (d / "environment" / "requirements.txt").write_text(reqs)
            (d / "environment" / "Dockerfile").write_text(DOCKERFILE.format(task_id=shlex.quote(task_id)))
            (d / "task.toml").write_text(TASK_TOML.format(
                task_id=_toml_str(task_id), env=_toml_str(env.name), kind=_toml_str(entry.kind),
                split=_toml_str(entry.split), n_calls=len(entry.gold_calls or [])))
            (d / "instruction.md").write_text(instruction_md(b, task_id))
            for sub, name, text in (("tests", "test.sh", TEST_SH.format(what="The verifier: AutoForge's reward",
                                                                         task=shlex.quote(task_id))),
                                    ("solution", "solve.sh", solve_sh(task_id, golds[task_id]))):
                (d / sub).mkdir()
                (d / sub / name).write_text(text)
                (d / sub / name).chmod(0o755)
            splits[entry.split] = splits.get(entry.split, 0) + 1
        shutil.rmtree(code)
        shutil.rmtree(tmp / STAGED_BUNDLE)
        write_marker(tmp, "harbor", {"relation": b.manifest.source.relation, "splits": splits,
                                     "tasks": len(b.task_ids()), "environments": len(b.environments)})
    return ExportResult(format="harbor", relation=b.manifest.source.relation or "", out=str(target), splits=splits,
                        columns=[], json_columns=[], task_rows=True)
