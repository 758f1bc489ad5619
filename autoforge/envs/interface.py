"""The environment interface every stage talks to: reset to a state, call a tool, read the state.

:class:`autoforge.envs.runtime.Environment` (the sandboxed runtime) implements it; task
generation, verification, the episode engine and training take an :data:`EnvFactory` so a test
or a benchmark can hand in another implementation (an in-process baseline, a fake).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from autoforge.types import ToolCode


class EnvLike(Protocol):
    """What a stage needs of an environment."""

    def reset(self, state: dict) -> Any: ...

    def call(self, name: str, arguments: dict) -> Any: ...

    def get_state(self) -> dict: ...


EnvFactory = Callable[[list[ToolCode]], EnvLike]
"""Builds an environment over a tool set's accepted tool code."""


def default_env_factory(tools: list[ToolCode]) -> EnvLike:
    """The sandboxed runtime (:class:`autoforge.envs.runtime.Environment`) over the tool code."""
    from autoforge.envs.runtime import Environment  # the worker pool starts only when an environment is made

    return Environment(tools)
