"""pass^k with confidence intervals (tau-bench's reliability metric).

tau-bench (Yao et al., 2024, Sec. 5) defines, for a task run n times with c successes,

    pass^k = C(c, k) / C(n, k)          (k <= n)

the unbiased estimate of the chance that k i.i.d. trials of the task *all* succeed; the
reported number is its mean over tasks. pass^1 is the plain success rate.

Confidence interval (our choice, the paper reports none): a **percentile bootstrap over
tasks** — resample tasks with replacement (``n_boot`` times, seeded), recompute the mean,
take the 2.5/97.5 percentiles. Tasks are the unit of sampling because trials of one task are
not independent, and per-task pass^k is not a Bernoulli variable (so Wilson's interval does
not apply for k > 1). With one task the interval is a point.

Trials whose reward is None (could not be scored, e.g. the environment crashed) count as
failures here — an unscored trial is not a demonstrated success — and are reported as
``n_unscored``. Tasks with fewer than k trials are left out of that k.
"""

from __future__ import annotations

from collections import defaultdict
from math import comb
from typing import Iterable, Sequence

import numpy as np


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k) for one task with ``c`` successes out of ``n`` trials."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_hat_k: successes c={c} must be within 0..n={n}")
    if not 1 <= k <= n:
        raise ValueError(f"pass_hat_k: k={k} must be within 1..n={n}")
    return comb(c, k) / comb(n, k)


def mean_pass_hat_k(trials: Sequence[Sequence[bool]], k: int) -> float | None:
    """Mean over tasks of pass^k; tasks with fewer than k trials are skipped (None if none left)."""
    vals = [pass_hat_k(len(t), sum(map(bool, t)), k) for t in trials if len(t) >= k]
    return float(np.mean(vals)) if vals else None


def bootstrap_ci(values: Sequence[float], n_boot: int = 1000, alpha: float = 0.05, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (resampling the values)."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("bootstrap_ci: no values")
    if x.size == 1 or np.all(x == x[0]):
        return float(x[0]), float(x[0])
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    return float(np.quantile(means, alpha / 2)), float(np.quantile(means, 1 - alpha / 2))


def pass_hat_k_table(
    outcomes: Iterable[tuple[str, str, bool]],
    max_k: int,
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[dict]:
    """Rows ``{env_id, k, pass_hat_k, ci_low, ci_high, n_tasks}`` per environment and overall.

    ``outcomes``: one ``(task_id, env_id, success)`` per trial. The overall row has
    ``env_id=None`` and averages over all tasks (each task weighs the same, whatever its
    environment).
    """
    per_task: dict[str, list[bool]] = defaultdict(list)
    env_of: dict[str, str] = {}
    for task_id, env_id, ok in outcomes:
        per_task[task_id].append(bool(ok))
        env_of[task_id] = env_id
    groups: dict[str | None, list[str]] = defaultdict(list)
    for t in sorted(per_task):
        groups[env_of[t]].append(t)
        groups[None].append(t)
    rows = []
    for env_id in sorted(groups, key=lambda e: (e is None, e or "")):
        tasks = groups[env_id]
        for k in range(1, max_k + 1):
            vals = [pass_hat_k(len(per_task[t]), sum(per_task[t]), k) for t in tasks if len(per_task[t]) >= k]
            if not vals:
                continue
            lo, hi = bootstrap_ci(vals, n_boot=n_boot, seed=seed + k)
            rows.append({"env_id": env_id, "k": k, "pass_hat_k": float(np.mean(vals)), "ci_low": lo, "ci_high": hi,
                         "n_tasks": len(vals)})
    return rows
