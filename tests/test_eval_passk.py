"""pass^k on hand-computed numbers, bootstrap intervals, and the reward components."""

from __future__ import annotations

import copy

import pytest

from autoforge.rollout import reward as R
from autoforge.rollout.passk import bootstrap_ci, mean_pass_hat_k, pass_hat_k, pass_hat_k_table
from autoforge.types import Task, state_hash


def test_pass_hat_k_by_hand():
    # 4 trials, 3 successes: pass^1 = 3/4, pass^2 = C(3,2)/C(4,2) = 3/6, pass^3 = 1/4, pass^4 = 0
    assert [pass_hat_k(4, 3, k) for k in (1, 2, 3, 4)] == [0.75, 0.5, 0.25, 0.0]
    assert pass_hat_k(4, 4, 4) == 1.0 and pass_hat_k(5, 0, 1) == 0.0
    with pytest.raises(ValueError):
        pass_hat_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_hat_k(3, 2, 4)


def test_mean_over_tasks_and_short_tasks_skipped():
    trials = [[True, True, False, True], [True, False, False, False], [True, True]]
    # k=2: task1 3/6, task2 0/6, task3 (n=2, c=2) 1 -> mean (0.5 + 0 + 1) / 3
    assert mean_pass_hat_k(trials, 2) == pytest.approx(0.5)
    # k=3: task3 has only 2 trials and is left out: (C(3,3)/C(4,3) + 0) / 2 = (1/4) / 2
    assert mean_pass_hat_k(trials, 3) == pytest.approx(0.125)
    assert mean_pass_hat_k([[True]], 2) is None


def test_table_per_environment_and_overall():
    outcomes = [("a1", "A", r) for r in (True, True, True, False)] + [("a2", "A", r) for r in (True, False, False, False)] \
        + [("b1", "B", r) for r in (True, True, True, True)]
    rows = pass_hat_k_table(outcomes, 4, n_boot=200, seed=1)
    by = {(r["env_id"], r["k"]): r for r in rows}
    assert by[("A", 1)]["pass_hat_k"] == pytest.approx((0.75 + 0.25) / 2)
    assert by[("A", 2)]["pass_hat_k"] == pytest.approx((0.5 + 0.0) / 2)
    assert by[("B", 4)]["pass_hat_k"] == 1.0 and by[("B", 4)]["ci_low"] == by[("B", 4)]["ci_high"] == 1.0
    # overall: each task weighs the same
    assert by[(None, 1)]["pass_hat_k"] == pytest.approx((0.75 + 0.25 + 1.0) / 3)
    assert by[(None, 1)]["n_tasks"] == 3 and by[("A", 3)]["n_tasks"] == 2
    for r in rows:
        assert r["ci_low"] <= r["pass_hat_k"] <= r["ci_high"]
    assert [r["env_id"] for r in rows][-1] is None  # overall rows come last


def test_bootstrap_interval_covers_the_mean_and_narrows_with_more_tasks():
    small = bootstrap_ci([1, 0, 1, 0], n_boot=2000, seed=0)
    large = bootstrap_ci([1, 0] * 200, n_boot=2000, seed=0)
    assert small[0] < 0.5 < small[1] and large[0] < 0.5 < large[1]
    assert (large[1] - large[0]) < (small[1] - small[0]) / 4
    assert bootstrap_ci([0.3]) == (0.3, 0.3)
    assert bootstrap_ci([1, 0, 1], seed=5) == bootstrap_ci([1, 0, 1], seed=5)  # seeded: reproducible


# --------------------------------------------------------------------------- reward components


STATE = {"users": {"U1": {"name": "a"}}, "orders": {"O1": {"status": "pending"}, "O2": {"status": "pending"}}}


def _task(gold: dict) -> Task:
    return Task(task_id="t", env_id="e", dag_id="d", request="r", user_facts={}, initial_state=STATE, gold_state=gold,
                gold_state_hash=state_hash(gold), gold_calls=[], n_tool_calls=1, dag_depth=1, n_reasoning_nodes=0,
                n_requirements=1)


def test_reward_components():
    gold = copy.deepcopy(STATE)
    gold["orders"]["O1"]["status"] = "cancelled"
    task = _task(gold)
    r, info = R.score(task, copy.deepcopy(gold))
    assert r == 1.0 and info["state_match"] is True and info["differing_collections"] == [] and info["unchanged"] is False
    wrong = copy.deepcopy(STATE)
    wrong["orders"]["O2"]["status"] = "cancelled"
    wrong["users"]["U2"] = {"name": "b"}
    r, info = R.score(task, wrong)
    assert r == 0.0 and info["differing_collections"] == ["orders", "users"]
    assert info["differing_records"] == {"orders": ["O1", "O2"], "users": ["U2"]}
    r, info = R.score(task, copy.deepcopy(STATE))
    assert r == 0.0 and info["unchanged"] is True
    r, info = R.score(task, None)
    assert r is None and info["state_match"] is None and info["unscored_reason"] == "no final state"


def test_small_named_functions():
    assert R.state_match("a", "a") is True and R.state_match("a", "b") is False and R.state_match(None, "b") is None
    assert R.outcome_reward(True) == 1.0 and R.outcome_reward(False) == 0.0 and R.outcome_reward(None) is None
    assert R.differing_collections({"a": 1}, {"a": 1, "b": {}}) == ["b"]
    # key order does not matter (canonical JSON)
    assert R.differing_collections({"a": {"x": 1, "y": 2}}, {"a": {"y": 2, "x": 1}}) == []
