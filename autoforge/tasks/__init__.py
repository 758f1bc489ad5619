"""Stages 4-5: task instantiation, gold execution, request writing, verification and curation (paper Sec. 3.3)."""

from autoforge.tasks.execute import DagExecutionError, run_dag
from autoforge.tasks.generate import StageResult, generate_env, generate_task, generate_tasks, split_of, state_change
from autoforge.tasks.verify import CHECKS, verify_env, verify_tasks

__all__ = ["CHECKS", "DagExecutionError", "StageResult", "generate_env", "generate_task", "generate_tasks", "run_dag",
           "split_of", "state_change", "verify_env", "verify_tasks"]
