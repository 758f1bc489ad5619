"""The one verl tool class of an ``autoforge export --format verl`` folder (issue 35): every entry of its
``tools.yaml`` names :class:`AutoForgeTool` (``class_name: autoforge.integrations.verl_tool.AutoForgeTool``,
``config: {type: native, tool: <name>}``, the tool's OpenAI function schema), ``talk_to_user`` included.

Importing it needs verl (``verl.tools.base_tool``) and, of AutoForge, only the bundle runtime
(:mod:`autoforge.integrations.verl_runtime`): no warehouse, Prefect or torch from AutoForge.

verl's lifecycle, as ``ToolAgentLoop`` (verl 0.9) drives it for each tool call the policy makes:
``create(create_kwargs={"task_id", "bundle"})`` -> ``execute(instance_id, arguments, agent_data=...)`` ->
``release(instance_id)``. The trajectory's episode (a fresh copy of the task's initial state, its simulated
user) is made on its first call and kept per ``agent_data`` until verl drops it, so every tool of the
trajectory acts on one state; ``calc_reward`` scores it as the episode engine does (ToolAgentLoop itself
never calls it: the reward comes from the folder's ``reward.py``, which replays the response text).
"""

from __future__ import annotations

from typing import Any, Optional

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from autoforge.integrations.verl_runtime import SESSIONS

__all__ = ["AutoForgeTool"]


class AutoForgeTool(BaseTool):
    """A tool of an AutoForge environment (or the simulated user, ``talk_to_user``), played in the bundle's
    sandbox. ``config.tool``: the environment's name for it (default: the schema's name)."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema):
        super().__init__(config, tool_schema)
        self.tool = str((config or {}).get("tool") or self.name)

    async def create(self, instance_id: Optional[str] = None, create_kwargs: Optional[dict] = None,
                     **kwargs: Any) -> tuple[str, ToolResponse]:
        """``create_kwargs`` (ToolAgentLoop) or keyword arguments (older rollouts): ``task_id`` and ``bundle``."""
        return SESSIONS.create(instance_id, {**(create_kwargs or {}), **kwargs}), ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], agent_data: Any = None,
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        """Run the call in the trajectory's episode; the observation text (an error is text, never raised)."""
        text = await SESSIONS.call(instance_id, self.tool, parameters, agent_data)
        return ToolResponse(text=text), 0.0, {}

    async def calc_reward(self, instance_id: str, agent_data: Any = None, final_message: Optional[str] = None,
                          **kwargs: Any) -> float:
        """The trajectory's reward now (1.0 / 0.0; the last message said to the user is the final word unless
        ``final_message`` is given)."""
        return await SESSIONS.reward(instance_id, agent_data, final_message)

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        SESSIONS.release(instance_id)
