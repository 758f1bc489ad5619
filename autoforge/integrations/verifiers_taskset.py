"""The taskset of an ``autoforge export --format verifiers`` package (issue 35; a template: the export copies this
file into the package as ``<package>/verifiers_taskset.py``, and the package's ``__init__`` exports
:class:`AutoForgeTaskset`, so ``vf-eval <id>`` / ``vf-validate <id>`` / prime-rl load it by the package's name).

verifiers 0.4's model: a ``vf.Taskset`` yields typed ``vf.Task`` objects; each task's data rides on the traces, its
``toolsets`` are started per rollout, its ``@vf.reward`` methods score the finished trace, and ``validate`` is
``vf-validate``'s gold check (the noop check scores the untouched task). Here:

* :class:`AutoForgeData`: the prompt (the system text and the simulated user's opening request) and the AutoForge
  task id, environment, kind and split, from the package's ``tasks.json``;
* ``setup`` checks the bundle holds the task; the rollout's tool server
  (:class:`~autoforge.integrations.verifiers_toolset.AutoForgeToolset`) opens the live episode and runs the
  model's calls in it, recording them in the rollout state;
* the reward ``autoforge`` plays the recorded calls again in a fresh episode and scores it with the model's last
  message (1.0 / 0.0, the episode engine's reward; the components go to ``trace.info["autoforge"]``);
* ``validate`` scores the oracle's trajectory (``gold.json``) the same way.

Config (``--env.taskset.*`` / ``--taskset.*``): ``split`` (train | test), ``env`` (an environment's name),
``kind`` (state | answer | boundary) narrow the tasks.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import verifiers.v1 as vf

from autoforge.integrations.verifiers_runtime import GOLD_FILE, TASKS_FILE, load_bundle, score

from .verifiers_toolset import BUNDLE_DIR, AutoForgeState, AutoForgeToolset

__all__ = ["AutoForgeData", "AutoForgeTask", "AutoForgeTaskConfig", "AutoForgeTaskset", "AutoForgeTasksetConfig"]

PACKAGE_DIR = Path(__file__).resolve().parent


class AutoForgeData(vf.TaskData):
    """One AutoForge task: ``prompt`` / ``system_prompt`` as the episode opens, and which task it is."""

    task_id: str
    env: str
    kind: str
    split: str


class AutoForgeTaskConfig(vf.TaskConfig):
    """``--env.taskset.task.tools.*``: where the tool server runs (verifiers' ``ToolsetConfig``)."""

    tools: vf.ToolsetConfig = vf.ToolsetConfig()


def final_message(trace: vf.Trace) -> str | None:
    """The model's last message written without a tool call (None: it ended on calls, or said nothing)."""
    msgs = trace.assistant_messages
    if not msgs or msgs[-1].tool_calls:
        return None
    content = msgs[-1].content
    if isinstance(content, list):
        content = "".join(getattr(p, "text", "") or "" for p in content)
    return (content or "").strip() or None


class AutoForgeTask(vf.Task[AutoForgeData, AutoForgeState, AutoForgeTaskConfig]):
    """A task of an AutoForge environment: its tools (and the simulated user) over MCP, the engine's reward."""

    @property
    def key(self) -> str:
        return self.data.task_id

    @classmethod
    def toolsets(cls, config: AutoForgeTaskConfig) -> list[vf.Toolset]:
        return [AutoForgeToolset(config.tools)]

    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        bundle = await asyncio.to_thread(load_bundle, BUNDLE_DIR)
        if self.data.task_id not in bundle.task_ids():
            raise vf.TaskError(f"the package's bundle holds no task {self.data.task_id!r}")

    @vf.reward(weight=1.0)
    async def autoforge(self, trace: vf.Trace) -> float:
        """1.0 when the episode engine scores the rollout's episode a success, else 0.0."""
        state = trace.state
        actions = list(state.actions) if isinstance(state, AutoForgeState) else []
        result = await asyncio.to_thread(score, BUNDLE_DIR, self.data.task_id, actions, final_message(trace))
        trace.info["autoforge"] = result
        return result["reward"]

    async def validate(self, runtime: vf.Runtime) -> bool | None:
        """The gold check: the oracle's trajectory (the gold calls, the questions and confirmations the user and
        the rules want, its final message) scores 1.0."""
        gold = json.loads((PACKAGE_DIR / GOLD_FILE).read_text())[self.data.task_id]
        actions = [{"name": name, "arguments": args} for name, args in gold["actions"]]
        result = await asyncio.to_thread(score, BUNDLE_DIR, self.data.task_id, actions, gold["final"])
        return result["reward"] == 1.0


class AutoForgeTasksetConfig(vf.TasksetConfig):
    """Which tasks load: ``split`` (train | test), ``env`` (environment name), ``kind`` (state | answer |
    boundary); None: all."""

    split: str | None = None
    env: str | None = None
    kind: str | None = None
    task: AutoForgeTaskConfig = AutoForgeTaskConfig()


class AutoForgeTaskset(vf.Taskset[AutoForgeTask, AutoForgeTasksetConfig]):
    """The package's AutoForge tasks, in the bundle's order (by environment, then task id)."""

    def load(self) -> list[AutoForgeTask]:
        c = self.config
        rows: list[dict[str, Any]] = json.loads((PACKAGE_DIR / TASKS_FILE).read_text())
        return [AutoForgeTask(AutoForgeData(id=r["task_id"], name=r["task_id"], task_id=r["task_id"], env=r["env"],
                                            kind=r["kind"], split=r["split"], prompt=r["prompt"],
                                            system_prompt=r["system"]), c.task)
                for r in rows if all(want is None or r[k] == want for k, want in
                                     (("split", c.split), ("env", c.env), ("kind", c.kind)))]
