"""Stages 4-5: task instantiation, gold execution, request writing, verification and curation (paper Sec. 3.3)."""

from autoforge.tasks.execute import DagExecutionError, run_dag
from autoforge.tasks.generate import generate_task, generate_tasks, split_of, state_change
from autoforge.tasks.stages import run_generate, run_sample, run_verify
from autoforge.tasks.verify import CHECKS, verify_tasks

__all__ = ["CHECKS", "DagExecutionError", "generate_task", "generate_tasks", "run_dag", "run_generate", "run_sample",
           "run_verify", "split_of", "state_change", "verify_tasks"]
