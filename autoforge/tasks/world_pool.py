"""The worlds one environment's candidate tasks start from: a pool, each world made once and copied.

A world (:func:`autoforge.tasks.instantiate.make_world`) costs 1-14 ms to make on the 11 bundled
environments and a copy ~0.1 ms (2026-12-06, the 2-core host); a batch tries about 2.5 candidates per
task it keeps, so one fresh world per candidate spent about a quarter of the factory's CPU on worlds
that were mostly thrown away.
"""

from __future__ import annotations

import math
import random
from typing import Any

from autoforge.envs.sandbox import _json_copy as json_copy  # the sandbox's copy of JSON values, ~5x deepcopy's speed
from autoforge.tasks.instantiate import make_world
from autoforge.types import EnvironmentRecord


TASKS_PER_WORLD = 4  # candidate tasks' worlds are drawn from a pool of about n_tasks / 4 worlds per environment (DEFAULT)
MIN_WORLDS = 8  # the smallest pool (DEFAULT)


def pool_size(n_tasks: int) -> int:
    """Worlds in one environment's :class:`WorldPool` for a batch of ``n_tasks`` tasks: one per
    :data:`TASKS_PER_WORLD` tasks wanted, at least :data:`MIN_WORLDS`."""
    return max(MIN_WORLDS, math.ceil(max(0, n_tasks) / TASKS_PER_WORLD))


class WorldPool:
    """The worlds one environment's candidate tasks start from: ``size`` worlds, world ``k`` made by
    :func:`make_world` from its own seed (``f"{seed}:world:{k}"``) the first time a candidate draws it,
    and each candidate gets its own copy (a gold run, a rule repair and a boundary task's shaping change
    it in place).

    Several tasks sharing one initial state is
    how hand-built agent benchmarks work too (one database per domain, many requests over it); the
    pool keeps about :data:`TASKS_PER_WORLD` tasks per world, so worlds grow with the batch. Which
    world a candidate draws comes from the candidate's own seed, so the tasks do not depend on the
    order candidates run in (serial and parallel runs agree)."""

    def __init__(self, env: EnvironmentRecord, seed: Any, size: int):
        self.env, self.seed, self.size = env, seed, max(1, size)
        self._made: dict[int, dict[str, dict]] = {}

    def draw(self, rng: random.Random) -> dict[str, dict]:
        """A copy of the world ``rng`` picks."""
        k = rng.randrange(self.size)
        world = self._made.get(k)
        if world is None:
            world = self._made[k] = make_world(self.env, random.Random(f"{self.seed}:world:{k}"))
        return json_copy(world)


def fresh_world(env: EnvironmentRecord, rng: random.Random, worlds: WorldPool | None) -> dict[str, dict]:
    """A candidate's world: drawn from ``worlds``, or made from ``rng`` when there is no pool."""
    return worlds.draw(rng) if worlds is not None else make_world(env, rng)
