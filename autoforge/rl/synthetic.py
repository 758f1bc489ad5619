"""A stand-in rollout function: real policy sampling, fake environment.

Until the episode engine (autoforge.rollout) plugs in, this produces trajectories with the
exact shape the engine will: a chat prompt, an assistant turn sampled token-in/token-out, a
tool observation appended as context (mask 0), a second assistant turn — and a reward from a
rule. Tests, the throughput benchmark and trainer smoke runs use it. It is not a task
environment; nothing it learns means anything beyond the rule.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from autoforge.rl.policy import Policy, continuation_ids, prompt_ids
from autoforge.rl.trajectory import Trajectory, TrajectoryBuilder, generate_turn

# reward_fn(task, j, generated_turns) -> reward; generated_turns = list of per-turn token-id lists
RewardFn = Callable[[dict, int, list[list[int]]], float]


def alternating_reward(task: dict, j: int, turns: list[list[int]]) -> float:
    """Rollouts 1, 3, 5, ... succeed: every task gets mixed rewards (nothing is dropped)."""
    return float(j % 2)


def make_token_reward(target_ids: set[int]) -> RewardFn:
    """Reward 1 when the first generated token is in ``target_ids``: a rule a policy can learn."""

    def reward(task: dict, j: int, turns: list[list[int]]) -> float:
        return float(bool(turns and turns[0] and turns[0][0] in target_ids))

    return reward


def make_synthetic_rollout_fn(
    max_new_tokens: int = 16,
    temperature: float = 1.0,
    reward_fn: RewardFn = alternating_reward,
    judge_fn: Callable[[dict, int], bool] | None = None,
    turns: int = 2,
) -> Callable[[Policy, Sequence[Any], int], list[Trajectory]]:
    """``rollout_fn(policy, tasks, n_per_task)`` over task dicts ``{"task_id", "env_id", "request"}``.

    ``judge_fn(task, j) -> True`` marks rollout j as having a user error (valid=False, MEU).
    All n rollouts of all tasks are sampled as one batch per turn (batched generation).
    """

    def rollout_fn(policy: Policy, tasks: Sequence[Any], n_per_task: int) -> list[Trajectory]:
        tok = policy.tokenizer
        jobs = [(task, j) for task in tasks for j in range(n_per_task)]
        builders = [TrajectoryBuilder(prompt_ids(tok, [{"role": "user", "content": task["request"]}])) for task, _ in jobs]
        generated: list[list[list[int]]] = [[] for _ in jobs]
        for turn in range(turns):
            new, lps = generate_turn(policy.model, tok, [b.token_ids for b in builders], max_new_tokens,
                                     temperature, stop_ids=policy.stop_ids)
            for k, b in enumerate(builders):
                b.add_generated(new[k], lps[k])
                generated[k].append(new[k])
                if turn + 1 < turns:  # a tool observation: context, never trained on
                    obs = {"role": "tool", "content": f'{{"ok": true, "turn": {turn}}}'}
                    b.add_context(continuation_ids(tok, [obs]))
        out = []
        for k, ((task, j), b) in enumerate(zip(jobs, builders)):
            valid = not (judge_fn(task, j) if judge_fn else False)
            out.append(b.build(task["task_id"], task["env_id"], reward_fn(task, j, generated[k]), valid, trial=j))
        return out

    return rollout_fn


def synthetic_tasks(n_envs: int = 2, tasks_per_env: int = 2) -> list[dict]:
    return [
        {"task_id": f"t{e}{i}", "env_id": f"env{e}", "request": f"Please update record R{e}{i} in environment {e}."}
        for e in range(n_envs)
        for i in range(tasks_per_env)
    ]
