"""The per-rollout tool server of an ``autoforge export --format verifiers`` package (issue 35; a template:
the export copies this file into the package as ``<package>/verifiers_toolset.py``, beside the bundle).

verifiers 0.4 runs a task's ``vf.Toolset`` (``Task.toolsets``) as an MCP server in a process of its own, one per
rollout (``python -m <package>.verifiers_toolset``): it fetches the rollout's task data, runs ``setup_task``, then
serves the tools. Here ``setup_task`` opens a live AutoForge episode of the task (a fresh copy of its initial
state, the offline simulated user) and the server offers that environment's tools, with the JSON schemas the
bundle holds, plus ``talk_to_user`` (the user's reply is the tool's result). Every call runs in the episode and is
appended to the rollout's shared state (:class:`AutoForgeState`, synced back to the rollout through verifiers'
state channel), which the task's reward plays again (:func:`autoforge.integrations.verifiers_runtime.score`).

Imports verifiers and, of AutoForge, the bundle runtime only.
"""

from __future__ import annotations

import asyncio
import inspect
import re
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import verifiers.v1 as vf
from pydantic import Field

from autoforge.integrations.verifiers_runtime import act, open_episode

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["BUNDLE_DIR", "AutoForgeState", "AutoForgeToolset"]

BUNDLE_DIR = Path(__file__).resolve().parent / "bundle"  # the package's environment bundle
_UNSET = object()  # an optional argument the model left out


class AutoForgeState(vf.State):
    """The rollout state the tool server shares with the task: the actions run in the episode, in order
    (``{"name", "arguments", "observation": sha256 prefix of the text the model got}``)."""

    actions: list[dict[str, Any]] = Field(default_factory=list)


def _signature(parameters: dict[str, Any]) -> inspect.Signature:
    """A keyword-only signature for a JSON-schema object: one argument per top-level property (any JSON value,
    under its own name as an alias, so names that are not Python identifiers work), optional ones defaulting to
    "left out". The sandbox checks the values against the full schema, as in AutoForge's own engine."""
    props = (parameters or {}).get("properties") or {}
    required = set((parameters or {}).get("required") or ())
    return inspect.Signature([
        inspect.Parameter(f"p{i}", inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[Any, Field(alias=str(key))],
                          default=inspect.Parameter.empty if key in required else _UNSET)
        for i, key in enumerate(props)], return_annotation=str)


class AutoForgeToolset(vf.Toolset[vf.ToolsetConfig, AutoForgeState]):
    """The task's environment tools and ``talk_to_user``, under their own names (no server prefix), each running
    in the rollout's live AutoForge episode. Calls run one at a time (an episode is one sandbox)."""

    TOOL_PREFIX = None

    def __init__(self, config: vf.ToolsetConfig) -> None:
        super().__init__(config)
        self.episode: Any = None
        self._lock = asyncio.Lock()

    async def setup_task(self, task: Any) -> None:
        """The rollout's task data (``task_id``): open its live episode, closed with the server."""
        self.episode = await asyncio.to_thread(open_episode, BUNDLE_DIR, task.task_id)
        self._exit_stack.callback(self.episode.close)

    async def _call(self, name: str, arguments: dict[str, Any]) -> str:
        if self.episode is None:
            raise vf.ToolsetError("this tool server has no task (it serves one rollout's episode)")
        async with self._lock:
            text, action = await asyncio.to_thread(act, self.episode, name, arguments)
        self.state.actions.append(action)
        return text

    def _tool(self, name: str, parameters: dict[str, Any]):
        async def call(**kwargs: Any) -> str:
            return await self._call(name, {k: v for k, v in kwargs.items() if v is not _UNSET})

        call.__name__ = re.sub(r"\W", "_", name)
        call.__signature__ = _signature(parameters)  # type: ignore[attr-defined]
        return call

    def register(self, mcp: MCPServer) -> None:
        """Every tool the episode gives the model, with the bundle's JSON schema as its input schema."""
        super().register(mcp)
        for schema in self.episode.tools if self.episode is not None else ():
            fn = schema.get("function", schema)
            with warnings.catch_warnings():  # the "left out" default has no JSON form; the schema is replaced below
                warnings.simplefilter("ignore")
                mcp.add_tool(self._with_state(self._tool(fn["name"], fn.get("parameters") or {})), name=fn["name"],
                             description=fn.get("description") or None, structured_output=False)
            registered = mcp._tool_manager.get_tool(fn["name"])  # the schema tools/list advertises
            registered.parameters = fn.get("parameters") or {"type": "object", "properties": {}}


if __name__ == "__main__":  # verifiers starts the server as `python -m <package>.verifiers_toolset`
    AutoForgeToolset.run()
