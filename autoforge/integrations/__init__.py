"""Use the corpus and the environments outside AutoForge (issue 17): the environment bundle, played with no
warehouse (:mod:`~autoforge.integrations.bundle`, issue 35), Hugging Face datasets
(:mod:`~autoforge.integrations.hf`), verl's tools, rows and reward (:mod:`~autoforge.integrations.verl`; what a
verl process runs: :mod:`~autoforge.integrations.verl_tool` and :mod:`~autoforge.integrations.verl_runtime`), the
task rows both are built from (:mod:`~autoforge.integrations.rows`), TRL's ``GRPOTrainer`` over
the environments with ERPO's advantage (:mod:`~autoforge.integrations.trl`) and an MCP server of
one environment (:mod:`~autoforge.integrations.mcp`).

This package sits above :mod:`autoforge.pipeline` (it may import pipeline and rollout; it reads
and writes the warehouse only through :mod:`autoforge.pipeline`) and below ``autoforge.cli``;
nothing in the package below imports it.
"""

from typing import Any

__all__ = ["ChatMessage", "TaskRow", "is_task_relation", "task_rows"]


def __getattr__(name: str) -> Any:
    """The task-row names, imported on first use (PEP 562): loading a bundle (``integrations.bundle``) then
    loads no warehouse code."""
    if name in __all__:
        from autoforge.integrations import rows

        return getattr(rows, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
