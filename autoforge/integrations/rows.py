"""Task rows: one self-contained record per curated task, what a trainer outside AutoForge needs.

``task_rows(warehouse, relation="v_curated_tasks", split=None)`` joins a task-shaped relation
(one row per task: it has ``task_id``, ``env_id`` and ``request`` columns, like ``tasks`` and
``v_curated_tasks``) with the ``tasks`` table, the environment's accepted tool code and its tool
specs, and returns :class:`TaskRow` records. The Hugging Face export
(:mod:`autoforge.integrations.hf`), the verl export (:mod:`autoforge.integrations.verl`) and the
TRL environment factory build their datasets from these rows.

The conversation opening is the rollout engine's own, not a copy of it: the system prompt is
:data:`autoforge.rollout.engine.DEFAULT_SYSTEM_PROMPT` (or the one the caller plays with), the
first user message is what the simulated user opens with (``OfflineUser(task).opening()``; the
LLM user opens with the same request), and the tools are
:func:`autoforge.rollout.toolcalls.tool_schemas` over the environment's accepted code and specs,
exactly what :func:`autoforge.rollout.batch.play_episodes` hands the agent. So
``row.prompt`` equals the first two messages of an episode of that task, and ``row.tools`` the
tools its agent is given (``tests/test_export_hf.py`` plays one and compares).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ConfigError, WarehouseError
from autoforge.pipeline.corpus import accepted_tools, env_names, env_tool_specs
from autoforge.pipeline.export import relation_columns, relation_rows, tasks_in
from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT
from autoforge.rollout.toolcalls import SCHEMA_STYLES, tool_schemas
from autoforge.rollout.users import OfflineUser
from autoforge.types import Task, TaskKindName

TASK_COLUMNS = ("task_id", "env_id", "request")  # a relation with these columns holds one row per task
SPLITS = ("train", "test")


class ChatMessage(BaseModel):
    """One chat message of a prompt, in the OpenAI / Hugging Face chat format."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user"]
    content: str


class TaskRow(BaseModel):
    """One task, self-contained: ids, the opening conversation, tools, states and gold outcome.

    Field descriptions are the column descriptions of the exported dataset cards."""

    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="content hash of (environment, DAG shape, state change); primary key of `tasks`")
    env_id: str = Field(description="the environment whose tools solve the task (`environments.env_id`)")
    env_name: str = Field(description="the environment's name (its tool set); route multi-environment training by it")
    dag_id: str = Field(description="the task's blueprint (`task_dags.dag_id`)")
    split: Literal["train", "test"] = Field(description="train, or test (held out); from the task id's hash")
    kind: TaskKindName = Field(
        description="state: the reward compares the final state's hash with gold_state_hash; answer: a read-only "
                    "task, the agent's final message must state gold_answer; boundary: the user asks for a write a "
                    "rule forbids, the state must stay as it was and the final message must state why (gold_answer)")
    status: Literal["generated", "verified", "rejected"] = Field(
        description="curation state (every row of v_curated_tasks is verified)")
    batch_id: str | None = Field(description="the factory batch that made the task (None: made outside a batch)")
    run_id: str | None = Field(description="the run that last wrote the task row (`runs.run_id`)")
    prompt: list[ChatMessage] = Field(
        description="the conversation as the rollout engine opens it: the agent's system prompt, then the "
                    "simulated user's opening request (chat messages: role, content)")
    system_prompt: str = Field(description="the agent's system prompt (prompt[0].content)")
    request: str = Field(description="the user's opening message (prompt[1].content): minimum necessary information")
    tools: list[dict[str, Any]] = Field(
        description="the environment's tools as OpenAI function-calling schemas ({type: function, function: "
                    "{name, description, parameters}}), sorted by name; what the agent is given")
    initial_state: dict[str, Any] = Field(
        description="S: the environment's state when the task starts (collections of records; the shape differs "
                    "per environment)")
    gold_state_hash: str = Field(description="hash of S*, the state after the gold tool calls (autoforge.types.state_hash: h2: + 64 hex; older tasks: sha256 of its canonical JSON)")
    gold_answer: dict[str, Any] | None = Field(
        description="answer and boundary tasks: {value, kind (number|string|boolean|list), tolerance, field} the "
                    "final message must state; None for state tasks")
    user_facts: dict[str, Any] = Field(
        description="hidden facts the simulated user knows and reveals only when asked (never shown to the agent)")
    gold_calls: list[dict[str, Any]] = Field(description="the gold tool calls ({name, arguments}) in order: one solution")
    n_tool_calls: int = Field(description="difficulty: tool calls in the gold DAG")
    dag_depth: int = Field(description="difficulty: nodes on the longest DAG path")
    n_reasoning_nodes: int = Field(description="difficulty: reasoning nodes (argmax, filter, count, ...)")
    n_requirements: int = Field(description="difficulty: requirements merged into the task")
    has_reasoning: bool = Field(description="difficulty: at least one reasoning node")
    is_multi_requirement: bool = Field(description="difficulty: merged from two or more tool sequences")
    n_checks_passed: int | None = Field(
        description="verification checks the task passed (None when the relation does not carry it)")


def is_task_relation(warehouse: str | None, relation: str) -> bool:
    """Does ``relation`` hold one row per task (columns task_id, env_id, request), like tasks / v_curated_tasks?"""
    return set(TASK_COLUMNS) <= set(relation_columns(warehouse, relation))


def env_tool_schemas(warehouse: str | None, env_ids: list[str], style: str = "full") -> dict[str, list[dict[str, Any]]]:
    """OpenAI schemas of each environment's accepted tools, as the rollout gives them to the agent."""
    out = {}
    for env_id in env_ids:
        out[env_id] = tool_schemas(accepted_tools(warehouse, [env_id]), env_tool_specs(warehouse, env_id), style=style)
    return out


def task_rows(warehouse: str | None, relation: str = "v_curated_tasks", split: str | None = None, *,
              system_prompt: str = DEFAULT_SYSTEM_PROMPT, tool_schema: str = "full") -> list[TaskRow]:
    """One :class:`TaskRow` per row of the task-shaped ``relation`` (ordered by task id).

    ``split``: only ``"train"`` or ``"test"`` tasks (None: both). ``system_prompt``: the agent's
    system prompt (default: the rollout engine's). ``tool_schema``: ``"full"`` or ``"compact"``
    (:func:`autoforge.rollout.toolcalls.tool_schemas`; training's ``tool_schema: compact``).
    Raises WarehouseError when the relation does not exist, is not one row per task, or names a
    task the ``tasks`` table does not hold.
    """
    if split is not None and split not in SPLITS:
        raise ConfigError(f"split must be 'train', 'test' or None (both), got {split!r}")
    if tool_schema not in SCHEMA_STYLES:
        raise ConfigError(f"tool_schema must be one of {', '.join(SCHEMA_STYLES)}, got {tool_schema!r}")
    columns = relation_columns(warehouse, relation)
    missing = [c for c in TASK_COLUMNS if c not in columns]
    if missing:
        raise WarehouseError(f"{relation!r} is not a tasks relation (no column {', '.join(missing)}); task rows need "
                             "one row per task, e.g. v_curated_tasks or tasks; export other relations column by column "
                             "(`autoforge export RELATION --format hf` writes their columns as they are)")
    view_rows = relation_rows(warehouse, relation, order_by="task_id")
    twice = [t for t, n in Counter(r["task_id"] for r in view_rows).items() if n > 1]
    if twice:
        raise WarehouseError(f"{relation!r} holds {len(twice)} task(s) more than once (e.g. {twice[0]}); task rows "
                             "need one row per task")
    tasks = tasks_in(warehouse, relation)
    unknown = [r["task_id"] for r in view_rows if r["task_id"] not in tasks]
    if unknown:
        raise WarehouseError(f"{relation!r} names {len(unknown)} task(s) the tasks table does not hold (e.g. "
                             f"{unknown[0]}); run `autoforge sql \"SELECT * FROM v_integrity\"` to see what is missing")
    names = env_names(warehouse)
    chosen = [(r, tasks[r["task_id"]]) for r in view_rows if split is None or tasks[r["task_id"]].split == split]
    schemas = env_tool_schemas(warehouse, sorted({t.env_id for _, t in chosen}), style=tool_schema)
    return [_row(view, task, names.get(task.env_id, task.env_id), schemas[task.env_id], system_prompt)
            for view, task in chosen]


def _row(view: dict[str, Any], task: Task, env_name: str, tools: list[dict[str, Any]], system_prompt: str) -> TaskRow:
    opening = OfflineUser(task).opening()  # what the simulated user opens every episode with
    n_checks = view.get("n_checks_passed")
    return TaskRow(
        task_id=task.task_id, env_id=task.env_id, env_name=view.get("env_name") or env_name, dag_id=task.dag_id,
        split=task.split, kind=task.kind, status=task.status, batch_id=task.batch_id, run_id=task.run_id,
        prompt=[ChatMessage(role="system", content=system_prompt), ChatMessage(role="user", content=opening)],
        system_prompt=system_prompt, request=opening, tools=tools, initial_state=task.initial_state,
        gold_state_hash=task.gold_state_hash,
        gold_answer=task.gold_answer.model_dump() if task.gold_answer is not None else None,
        user_facts=task.user_facts, gold_calls=[c.model_dump(exclude={"id"}) for c in task.gold_calls],
        n_tool_calls=task.n_tool_calls, dag_depth=task.dag_depth, n_reasoning_nodes=task.n_reasoning_nodes,
        n_requirements=task.n_requirements,
        has_reasoning=bool(view.get("has_reasoning", task.n_reasoning_nodes > 0)),
        is_multi_requirement=bool(view.get("is_multi_requirement", task.n_requirements >= 2)),
        n_checks_passed=int(n_checks) if n_checks is not None else None,
    )
