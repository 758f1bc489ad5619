"""What a verl run of an ``autoforge export --format verl`` folder calls (issue 35), with no verl import: the
reward function and the per-trajectory episodes behind the tool class of :mod:`autoforge.integrations.verl_tool`.

It imports only the bundle runtime (:mod:`autoforge.integrations.bundle`: no warehouse, no Prefect, no torch),
so a verl process needs AutoForge's code plus ``google-re2`` and ``openai``, nothing else of AutoForge's
dependencies (docs/trainers.md, "verl").

* :func:`compute_score` is the reward (the folder's ``reward.py`` calls it): verl hands it the decoded
  response of ``ToolAgentLoop`` (``solution_str``) and the row's ``extra_info``; the task's tool calls are
  replayed in a fresh episode of the bundle (:meth:`autoforge.integrations.bundle.Bundle.replay`), which gives
  the reward the live episode gave (the offline user is deterministic).
* :data:`SESSIONS` keeps one live :class:`autoforge.integrations.bundle.Episode` per trajectory for every tool
  instance of the process. verl 0.9's ``ToolAgentLoop`` calls ``create`` / ``execute`` / ``release`` once per
  tool call and hands ``execute`` the trajectory's ``agent_data``: the episode is kept per ``agent_data``
  (closed when verl drops it). A caller without ``agent_data`` keeps one instance id for the whole trajectory
  (``create(instance_id)`` ... ``calc_reward`` ... ``release``, verl's older SGLang rollout): the episode is
  kept per instance id and closed on ``release``.

The bundle a row names (``create_kwargs.bundle``, an absolute path written by the export) can be overridden
with the environment variable :data:`BUNDLE_ENV` (a moved folder).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any

from autoforge.integrations.bundle import MANIFEST, Bundle, BundleError
from autoforge.tasks.kinds import task_kind
from autoforge.types import canonical_json

__all__ = ["BUNDLE_ENV", "SESSIONS", "ToolSessions", "compute_score", "ground_truth", "load_bundle"]

BUNDLE_ENV = "AUTOFORGE_BUNDLE"  # a bundle folder that overrides the one the rows and tools.yaml name

_BUNDLES: dict[Path, Bundle] = {}
_BUNDLES_LOCK = threading.Lock()


def ground_truth(task: Any) -> str:
    """``reward_model.ground_truth`` of a task: the gold state hash, or (answer and boundary tasks) the gold answer
    as canonical JSON."""
    if task_kind(task.kind).states_answer and task.gold_answer is not None:
        answer = task.gold_answer
        return canonical_json(answer.model_dump() if hasattr(answer, "model_dump") else answer)
    return task.gold_state_hash


def bundle_path(*candidates: Any) -> Path:
    """The bundle to play: :data:`BUNDLE_ENV` when set, else the first candidate folder holding a bundle."""
    env = os.environ.get(BUNDLE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    tried = [str(c) for c in candidates if c]
    for c in tried:
        if (Path(c).expanduser() / MANIFEST).is_file():
            return Path(c).expanduser().resolve()
    raise BundleError(f"no environment bundle at {' or '.join(tried) or '(no path given)'}; the export's bundle "
                      f"moved? set {BUNDLE_ENV}=/path/to/export/bundle, or export again with `autoforge export "
                      "--format verl --bundle BUNDLE --out DIR`")


def load_bundle(path: Any) -> Bundle:
    """The bundle at ``path`` (its files checked once per process, then cached)."""
    root = Path(path).expanduser().resolve()
    with _BUNDLES_LOCK:
        if root not in _BUNDLES:
            _BUNDLES[root] = Bundle.load(root)
        return _BUNDLES[root]


def create_kwargs_of(extra_info: dict | None) -> dict[str, Any]:
    """The task id and bundle of a row: ``extra_info.tools_kwargs.<tool>.create_kwargs`` (any tool: they are the
    same), else ``extra_info.task_id``."""
    info = extra_info or {}
    for entry in (info.get("tools_kwargs") or {}).values():
        kw = (entry or {}).get("create_kwargs") if isinstance(entry, dict) else None
        if kw and kw.get("task_id"):
            return dict(kw)
    return {"task_id": info.get("task_id"), "bundle": info.get("bundle")}


def compute_score(data_source: str, solution_str: Any, ground_truth: str | None = None,
                  extra_info: dict | None = None, *, bundle: Any = None, max_parallel_calls: int | None = 1,
                  **kwargs: Any) -> float:
    """verl's reward function (``custom_reward_function``) for an AutoForge row: 1.0 or 0.0 as the episode engine
    scores the trajectory, replayed from ``solution_str`` (the decoded response: Hermes ``<tool_call>`` blocks)
    in a fresh episode of the task (``extra_info``'s ``create_kwargs``: task id and bundle). ``bundle``: a
    bundle folder tried before the row's; ``max_parallel_calls``: verl's ``multi_turn.max_parallel_calls``
    (calls of one turn past it were not run). ``extra_info.tool_selection`` / ``env_tools``: the names the agent
    was given and the environment's name of each (calls to other names never ran). An episode that cannot be
    scored (the environment broke) gives 0.0.
    ``ground_truth`` must be the task's (a row and a bundle of different exports are refused)."""
    kw = create_kwargs_of(extra_info)
    task_id = kw.get("task_id")
    if not task_id:
        raise BundleError(f"{data_source}: extra_info names no task (no tools_kwargs.<tool>.create_kwargs.task_id "
                          "and no task_id); score rows of `autoforge export --format verl`")
    b = load_bundle(bundle_path(bundle, kw.get("bundle")))
    if ground_truth is not None:
        want = ground_truth_of(b, task_id)
        if str(ground_truth) != want:
            raise BundleError(f"task {task_id}: the row's ground_truth {str(ground_truth)[:40]!r} is not the bundle's "
                              f"({want[:40]!r}) at {b.root}: the parquet and the bundle come from different exports")
    info = extra_info or {}
    given, own = info.get("tool_selection"), info.get("env_tools")
    names = dict(zip(given, own)) if given is not None and own is not None and len(given) == len(own) else None
    reward = b.replay(task_id, solution_str, max_parallel_calls=max_parallel_calls, tool_names=names)
    return 0.0 if reward is None else float(reward)


def ground_truth_of(bundle: Bundle, task_id: str) -> str:
    return ground_truth(bundle.task(task_id))


# --------------------------------------------------------------------------- live episodes, per trajectory


class _Session:
    """One trajectory's episode (made on its first call), and the lock its calls take turns on."""

    def __init__(self, create_kwargs: dict[str, Any]):
        self.kwargs = dict(create_kwargs)
        self.lock = asyncio.Lock()
        self.episode: Any = None
        self.names: set[str] = set()
        self.closed = False

    def ensure(self) -> Any:
        if self.closed:
            raise BundleError("this trajectory's episode was released; create a new instance")
        if self.episode is None:
            task_id = self.kwargs.get("task_id")
            if not task_id:
                raise BundleError("create_kwargs name no task_id: pass the row's tools_kwargs (verl: "
                                  "extra_info.tools_kwargs of `autoforge export --format verl`)")
            bundle = load_bundle(bundle_path(self.kwargs.get("bundle")))
            self.episode = bundle.episode(str(task_id))
            self.names = {s.get("function", s).get("name") for s in self.episode.tools}
        return self.episode

    def call(self, tool: str, parameters: Any) -> str:
        ep = self.ensure()
        if tool not in self.names:
            env, names = self.episode.environment.name, ", ".join(sorted(self.names))
            return json.dumps({"error": f"{tool} is not a tool of this task's environment ({env}); its tools: {names}"})
        if not isinstance(parameters, dict):
            return json.dumps({"error": f"the arguments of {tool} must be a JSON object, got "
                                        f"{type(parameters).__name__}"})
        return ep.call(tool, parameters)

    def reward(self, final_message: str | None) -> float:
        reward = self.ensure().reward(final_message)
        return 0.0 if reward is None else float(reward)

    def close(self) -> None:
        self.closed = True
        if self.episode is not None:
            self.episode.close()


class ToolSessions:
    """The live episodes of every AutoForge tool instance of a process (see the module docstring)."""

    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}  # instance id -> create kwargs
        self.by_agent: "weakref.WeakKeyDictionary[Any, _Session]" = weakref.WeakKeyDictionary()
        self.by_instance: dict[str, _Session] = {}
        self.by_id: dict[int, tuple[Any, _Session]] = {}

    def create(self, instance_id: str | None, create_kwargs: dict[str, Any]) -> str:
        instance_id = instance_id or uuid.uuid4().hex
        self.created[instance_id] = dict(create_kwargs)
        return instance_id

    def session(self, instance_id: str, agent_data: Any = None) -> _Session:
        kwargs = self.created.get(instance_id)
        if kwargs is None:
            raise BundleError(f"tool instance {instance_id!r} was not created (or was released)")
        if agent_data is not None:
            try:
                s = self.by_agent.get(agent_data)
            except TypeError:  # not weak-referenceable: one episode per object, kept until the process ends
                s = self.by_id.setdefault(id(agent_data), (agent_data, _Session(kwargs)))[1]
            if s is None:
                s = self.by_agent[agent_data] = _Session(kwargs)
                weakref.finalize(agent_data, s.close)  # verl drops the trajectory's agent_data: its episode goes
        else:
            s = self.by_instance.get(instance_id)
            if s is None:
                s = self.by_instance[instance_id] = _Session(kwargs)
        if kwargs.get("task_id") and s.kwargs.get("task_id") != kwargs.get("task_id"):
            raise BundleError(f"one trajectory, two tasks: {s.kwargs.get('task_id')} and {kwargs.get('task_id')}")
        return s

    async def call(self, instance_id: str, tool: str, parameters: Any, agent_data: Any = None) -> str:
        s = self.session(instance_id, agent_data)
        async with s.lock:
            return await asyncio.to_thread(s.call, tool, parameters)

    async def reward(self, instance_id: str, agent_data: Any = None, final_message: str | None = None) -> float:
        s = self.session(instance_id, agent_data)
        async with s.lock:
            return await asyncio.to_thread(s.reward, final_message)

    def release(self, instance_id: str) -> None:
        self.created.pop(instance_id, None)
        s = self.by_instance.pop(instance_id, None)
        if s is not None:
            s.close()


SESSIONS = ToolSessions()  # one per process: every tool instance (one per tool name) shares a trajectory's episode
