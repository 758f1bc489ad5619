"""The observation and state models of an AutoForge environment served through OpenEnv (issue 35).

``autoforge export --format openenv`` copies this file, as it is, into each exported package as ``models.py``
(the client's side: it needs ``openenv-core`` and pydantic only); the server
(:mod:`autoforge.integrations.openenv_server`) imports it from AutoForge. The tools' calls are OpenEnv's own
``CallToolAction`` / ``CallToolObservation``; what is AutoForge's is the observation ``reset`` returns (the task:
system text, the user's opening request, the tools as OpenAI function schemas) and the state.
"""

from __future__ import annotations

from typing import Any, Optional

from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.env_server.types import Observation, State
from pydantic import Field

__all__ = ["AutoForgeAction", "AutoForgeObservation", "AutoForgeState"]

AutoForgeAction = CallToolAction  # every action is an MCP tool call (list_tools / call_tool)


class AutoForgeObservation(Observation):
    """What ``reset`` returns: the task the episode plays, as the agent opens it."""

    task_id: str = Field(description="the AutoForge task the episode plays")
    env: str = Field(description="the AutoForge environment (this server's)")
    kind: str = Field(description="state | answer | boundary: what success needs (state match; the answer stated too)")
    split: str = Field(description="train or test")
    system: str = Field(description="the system text (how the agent reaches the user: the talk_to_user tool)")
    user: str = Field(description="the simulated user's opening request")
    tool_schemas: list[dict[str, Any]] = Field(
        default_factory=list, description="the tools as OpenAI function schemas (the MCP tools, talk_to_user included)")

    def messages(self) -> list[dict[str, str]]:
        """The opening as chat messages: system, then user."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


class AutoForgeState(State):
    """``state``: the episode so far."""

    task_id: Optional[str] = Field(default=None, description="the task of the episode (None: not reset yet)")
    env: Optional[str] = Field(default=None, description="the AutoForge environment")
    reward: Optional[float] = Field(default=None, description="the episode's reward now (1.0 / 0.0; None: not "
                                                              "scorable, or not reset yet)")
    ended: bool = Field(default=False, description="the user ended the conversation (tools no longer run)")
