"""Use the corpus and the environments outside AutoForge (issue 17): Hugging Face datasets, verl's
RL parquet, and the task rows both are built from (:mod:`autoforge.integrations.rows`).

This package sits above :mod:`autoforge.pipeline` (it may import pipeline, rollout and the
warehouse) and below ``cli.py``; nothing in the package below imports it.
"""

from autoforge.integrations.rows import ChatMessage, TaskRow, is_task_relation, task_rows

__all__ = ["ChatMessage", "TaskRow", "is_task_relation", "task_rows"]
