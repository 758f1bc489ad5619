"""Shared fixtures of the rollout tests: curated-style tasks on the dags helper's mock shop.

Three tasks whose gold states are computed by the task generator's own executor
(:func:`autoforge.tasks.execute.run_dag`) and checked by hand in the tests below:

- ``cancel``: find user by email -> list orders -> argmax total -> cancel   (facts: email)
- ``reschedule``: find user -> list orders -> argmin delivery_date -> update delivery date
  to a date the user gives                                                 (facts: email, new_delivery_date)
- ``buy``: find user, find product by name -> create order of a quantity   (facts: email, product_name, quantity)
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from dags_mock import ENV_ID, STATE, LocalEnvironment, gold_dag, make_env, make_tools  # noqa: E402

from autoforge.tasks.execute import run_dag  # noqa: E402
from autoforge.types import ArgSource, DagNode, Task, TaskDag, content_id, state_hash  # noqa: E402


def _dag(nodes: list[DagNode]) -> TaskDag:
    edges = sorted({(a.node, n.node_id) for n in nodes for a in n.args.values() if a.kind == "node"})
    return TaskDag(dag_id=content_id("dag", ENV_ID, [n.model_dump() for n in nodes], edges), env_id=ENV_ID, nodes=nodes,
                   edges=edges, n_requirements=1)


def _u(fact: str) -> ArgSource:
    return ArgSource(kind="user", fact=fact)


def _n(node: str, path: str | None = None) -> ArgSource:
    return ArgSource(kind="node", node=node, path=path)


def dags() -> dict[str, TaskDag]:
    reschedule = _dag([
        DagNode(node_id="n0", kind="tool", tool="find_user_id_by_email", args={"email": _u("email")}),
        DagNode(node_id="n1", kind="tool", tool="list_user_orders", args={"user_id": _n("n0", "user_id")}),
        DagNode(node_id="r0", kind="reasoning", op="argmax", params={"field": "delivery_date"},
                args={"items": _n("n1", "orders")}),
        DagNode(node_id="n2", kind="tool", tool="update_delivery_date",
                args={"order_id": _n("r0", "order_id"), "delivery_date": _u("new_delivery_date")}),
    ])
    buy = _dag([
        DagNode(node_id="n0", kind="tool", tool="find_user_id_by_email", args={"email": _u("email")}),
        DagNode(node_id="n1", kind="tool", tool="find_product_id_by_name", args={"name": _u("product_name")}),
        DagNode(node_id="n2", kind="tool", tool="create_order",
                args={"user_id": _n("n0", "user_id"), "product_id": _n("n1", "product_id"), "quantity": _u("quantity")}),
    ])
    return {"cancel": gold_dag(), "reschedule": reschedule, "buy": buy}


REQUESTS = {
    "cancel": "Hi, please cancel my most expensive order.",
    "reschedule": "Hello, I'd like to move the delivery of my order that arrives last to a new date.",
    "buy": "Hi! I want to order some items from your shop.",
}
FACTS = {
    "cancel": {"email": "ava.chen@example.com"},
    "reschedule": {"email": "ava.chen@example.com", "new_delivery_date": "2025-03-09"},
    "buy": {"email": "ava.cheng@example.com", "product_name": "Blue Lamp", "quantity": 2},
}


def make_task(name: str, dag: TaskDag, split: str = "test") -> Task:
    env = LocalEnvironment(make_tools())
    run = run_dag(env, dag, copy.deepcopy(STATE), dict(FACTS[name]))
    gold = run.final_state
    return Task(task_id=f"task_{name}", env_id=ENV_ID, dag_id=dag.dag_id, request=REQUESTS[name],
                user_facts=dict(FACTS[name]), initial_state=copy.deepcopy(STATE), gold_state=gold,
                gold_state_hash=state_hash(gold), gold_calls=run.calls, n_tool_calls=len(run.calls), dag_depth=4,
                n_reasoning_nodes=sum(n.kind == "reasoning" for n in dag.nodes), n_requirements=1, status="verified",
                split=split)


def tasks_and_dags() -> tuple[list[Task], dict[str, TaskDag]]:
    ds = dags()
    tasks = [make_task(name, d) for name, d in ds.items()]
    return tasks, {d.dag_id: d for d in ds.values()}


def local_env_factory(tools):
    return LocalEnvironment(tools)


__all__ = ["ENV_ID", "STATE", "LocalEnvironment", "make_env", "make_tools", "tasks_and_dags", "local_env_factory"]


# --------------------------------------------------------------------------- the fixtures themselves


def test_gold_states_are_the_hand_computed_ones():
    tasks, _ = tasks_and_dags()
    by = {t.task_id: t for t in tasks}
    cancel = copy.deepcopy(STATE)
    cancel["orders"]["O0002"]["status"] = "cancelled"  # highest total of U0001: 75.5
    assert by["task_cancel"].gold_state == cancel
    resched = copy.deepcopy(STATE)
    resched["orders"]["O0002"]["delivery_date"] = "2025-03-09"  # latest delivery of U0001: 2025-03-04
    assert by["task_reschedule"].gold_state == resched
    buy = by["task_buy"].gold_state
    assert buy["orders"]["O0005"] == {"order_id": "O0005", "user_id": "U0002", "product_id": "P0001", "quantity": 2,
                                      "total": 40.0, "status": "pending", "delivery_date": "2025-01-10"}
    assert buy["products"]["P0001"]["stock"] == 3
    assert all(t.gold_state_hash != state_hash(t.initial_state) for t in tasks)
