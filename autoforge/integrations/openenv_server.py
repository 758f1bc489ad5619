"""An AutoForge environment as an OpenEnv ``MCPEnvironment`` (issue 35): the server side of
``autoforge export --format openenv`` (:mod:`autoforge.integrations.openenv`), run by each exported package's
``server/app.py`` with ``openenv-core`` installed (AutoForge's own venv does not need it).

One server per AutoForge environment: its MCP tools are the environment's tools (their JSON schemas as the
bundle holds them) plus ``talk_to_user``, the simulated user. Each OpenEnv session (a WebSocket client) gets its
own :class:`AutoForgeMCPEnvironment`:

* ``reset(task_id=..., split=..., seed=..., episode_id=...)`` starts an :class:`autoforge.integrations.bundle.Episode`
  of that task (``task_id``), or of the ``seed``-th task of the environment (of ``split``, modulo their number), or
  of a random one; it returns an :class:`AutoForgeObservation` (the system text, the user's opening request, the
  tools as OpenAI function schemas);
* ``step(CallToolAction(tool_name, arguments))`` runs the call in the episode's sandbox (``talk_to_user`` reaches
  the simulated user) and returns OpenEnv's ``CallToolObservation`` with the observation text as the tool's
  result, ``reward`` the episode's reward as it stands after the call (the engine's score: state hash vs S*, the
  answer in the last message said to the user, 0 for a broken rule; None when it cannot be scored) and ``done``
  once the user ended the conversation. The reward is the episode's, not an increment: take the last step's.
"""

from __future__ import annotations

import json
import random
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Optional

from fastmcp import FastMCP
from fastmcp.tools import Tool, ToolResult
from mcp.types import TextContent
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_environment import MCPEnvironment
from openenv.core.env_server.mcp_types import RESERVED_TOOL_NAMES, CallToolAction
from openenv.core.env_server.types import EnvironmentMetadata, Observation
from pydantic import PrivateAttr

from autoforge.integrations.bundle import USER_TOOL_SCHEMA, Bundle, BundleEnv, Episode
from autoforge.integrations.openenv_models import AutoForgeAction, AutoForgeObservation, AutoForgeState

__all__ = ["AutoForgeMCPEnvironment", "environment_class", "make_app"]

# the tool's result as text, also as structured content {"result": text}: FastMCP's client then gives the text as
# the result's ``data``, which is what MCPToolClient.call_tool returns
RESULT_SCHEMA = {"type": "object", "properties": {"result": {"type": "string"}}, "required": ["result"],
                 "x-fastmcp-wrap-result": True}


class _EpisodeTool(Tool):
    """One tool of the environment (or talk_to_user), run in the session's episode."""

    _run_call: Callable[[str, dict], str] = PrivateAttr()

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        text = self._run_call(self.name, dict(arguments or {}))
        return ToolResult(content=[TextContent(type="text", text=text)], structured_content={"result": text},
                          meta={"fastmcp": {"wrap_result": True}})


@lru_cache(maxsize=8)
def _bundle(path: str) -> Bundle:
    return Bundle.load(path)  # every file checked against its sha256, once per process


class AutoForgeMCPEnvironment(MCPEnvironment):
    """One session's environment (see the module docstring). Subclasses set :attr:`BUNDLE` (the bundle folder) and
    :attr:`ENV` (the environment's name; None: the bundle's only one); :func:`environment_class` makes one."""

    SUPPORTS_CONCURRENT_SESSIONS = True  # each session has its own episode and sandbox worker
    BUNDLE: str = ""
    ENV: Optional[str] = None

    def __init__(self) -> None:
        self.bundle = _bundle(str(Path(self.BUNDLE).resolve()))
        if self.ENV is None and len(self.bundle.environments) != 1:
            raise ValueError(f"the bundle at {self.bundle.root} holds {len(self.bundle.environments)} environments; "
                             "set ENV to one of them")
        self.environment: BundleEnv = self.bundle.env(self.ENV or self.bundle.environments[0])
        self.tool_schemas = self.environment.tool_schemas("full") + [json.loads(json.dumps(USER_TOOL_SCHEMA))]
        mcp = FastMCP(f"autoforge-{self.environment.name}")
        for schema in self.tool_schemas:
            fn = schema.get("function", schema)
            tool = _EpisodeTool(name=fn["name"], description=fn.get("description") or "",
                                parameters=fn.get("parameters") or {"type": "object", "properties": {}},
                                output_schema=RESULT_SCHEMA)
            tool._run_call = self._call
            mcp.add_tool(tool)
        super().__init__(mcp)
        self._lock = threading.Lock()  # reset runs in the session's executor thread, calls on the event loop
        self._episode: Optional[Episode] = None
        self._state = AutoForgeState(env=self.environment.name)

    # ------------------------------------------------------------------ OpenEnv's interface
    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, task_id: Optional[str] = None,
              split: Optional[str] = None, **kwargs: Any) -> AutoForgeObservation:
        """Start an episode: of ``task_id``; else of the ``seed``-th task (of ``split``); else of a random one."""
        mine = self.bundle.task_ids(env=self.environment.env_id, split=split)
        if task_id is not None:
            if task_id not in self.bundle.task_ids(env=self.environment.env_id):
                raise ValueError(f"environment {self.environment.name} has no task {task_id!r} ({len(mine)} tasks)")
        elif not mine:
            raise ValueError(f"environment {self.environment.name} has no {split} tasks")
        else:
            task_id = mine[seed % len(mine)] if seed is not None else random.choice(mine)
        with self._lock:
            if self._episode is not None:
                self._episode.close()
            self._episode = self.bundle.episode(task_id)
            prompt = self._episode.prompt()
            entry = self._episode.entry
            self._state = AutoForgeState(episode_id=episode_id or f"{task_id}-{random.getrandbits(32):08x}",
                                         step_count=0, task_id=task_id, env=self.environment.name)
        return AutoForgeObservation(task_id=task_id, env=self.environment.name, kind=entry.kind, split=entry.split,
                                    system=prompt.system, user=prompt.user, tool_schemas=prompt.tools,
                                    done=False, reward=None)

    def _call(self, name: str, arguments: dict) -> str:
        with self._lock:
            if self._episode is None:
                raise ValueError("no episode: reset the environment first (reset(task_id=...))")
            return self._episode.call(name, arguments)

    def _scored(self, action: Any, obs: Observation) -> Observation:
        """A tool call's observation with the episode's reward and whether the user ended the conversation."""
        if isinstance(action, CallToolAction) and self._episode is not None:
            with self._lock:
                reward = self._episode.reward()
                self._state.step_count += 1
                self._state.reward, self._state.ended = reward, self._episode.ended
                obs.reward, obs.done = reward, self._episode.ended
                obs.metadata = {"reward_info": json.loads(json.dumps(self._episode.reward_info, default=str))}
        return obs

    def step(self, action: Any, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        return self._scored(action, super().step(action, timeout_s=timeout_s, **kwargs))

    async def step_async(self, action: Any, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        return self._scored(action, await super().step_async(action, timeout_s=timeout_s, **kwargs))

    def _step_impl(self, action: Any, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        return Observation(done=False, reward=None, metadata={
            "error": f"{type(action).__name__} is not an action of this environment: call its MCP tools"})

    @property
    def state(self) -> AutoForgeState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        m = self.bundle.manifest
        return EnvironmentMetadata(
            name=f"autoforge-{self.environment.name}", version=m.autoforge_version, author="AutoForge",
            description=(f"AutoForge environment {self.environment.name}: {len(self.tool_schemas) - 1} tools and "
                         f"talk_to_user, {len(self.bundle.task_ids(env=self.environment.env_id))} tasks "
                         f"(reset(task_id=...)); reward 1.0 when the episode solves the task"),
            readme_content=(self.bundle.root / "README.md").read_text() if (self.bundle.root / "README.md").is_file()
            else None)

    def close(self) -> None:
        with self._lock:
            if self._episode is not None:
                self._episode.close()
                self._episode = None
        super().close()


def environment_class(bundle: str | Path, env: str | None = None,
                      name: str = "AutoForgeEnvironment") -> type[AutoForgeMCPEnvironment]:
    """A subclass of :class:`AutoForgeMCPEnvironment` bound to ``bundle`` (and ``env``): OpenEnv's factory."""
    b = _bundle(str(Path(bundle).resolve()))
    environment = b.env(env or b.environments[0])
    clash = sorted({s.get("function", s)["name"] for s in environment.schemas} & RESERVED_TOOL_NAMES)
    if clash:
        raise ValueError(f"environment {environment.name} has tools named {clash}, which OpenEnv reserves")
    return type(name, (AutoForgeMCPEnvironment,), {"BUNDLE": str(Path(bundle).resolve()), "ENV": env,
                                                   "__module__": __name__})


def make_app(bundle: str | Path, env: str | None = None, *, max_concurrent_envs: int = 8,
             env_class: type[AutoForgeMCPEnvironment] | None = None) -> Any:
    """OpenEnv's FastAPI app (``create_app``) serving ``env`` of ``bundle``: /ws, /reset, /step, /state, /mcp,
    /schema, /metadata, /health."""
    cls = env_class or environment_class(bundle, env)
    return create_app(cls, AutoForgeAction, AutoForgeObservation, env_name=f"autoforge-{cls.ENV or 'env'}",
                      max_concurrent_envs=max_concurrent_envs)
