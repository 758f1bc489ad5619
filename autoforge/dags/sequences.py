"""Tool sequences: random walks over the tool graph, and merging two walks into one.

Paper (arXiv 2512.22857, Sec. 3.2): random walks on the tool graph give "thousands of" tool
sequences; to make multi-requirement tasks, two sequences are combined and "an LLM removes
redundant tools" (e.g. ``find_id_by_name`` and ``find_id_by_email`` both resolving the same
user: keep one). The paper leaves walk lengths, start nodes and pair choice open; our
defaults (ours; docs/paper_notes.md#random-walks says what the paper leaves open, docs/design.md#stage-3-tool-graph-walks-and-dags lists them) are documented on each function.

A sequence is only useful if it changes state (reward compares final states), so walks
keep only sequences holding a write tool, and reads after the last write are cut off
(they would not change S* and nothing could check them).
"""

from __future__ import annotations

import bisect
import random
from typing import Any, Callable, Iterable, Literal

import networkx as nx

from autoforge.dags.graph import to_networkx
from autoforge.domain.keys import is_key_param, key_fields, output_paths, param_schemas, required_params
from autoforge.errors import ConfigError
from autoforge.types import EnvironmentRecord, ToolCode, ToolGraph, ToolSequence, content_id

StartRule = Literal["lookup", "read", "entry", "any"]
Goal = Literal["state", "answer"]
START_RULES = ("lookup", "read", "entry", "any")
LOOKUP_KINDS = {"lookup", "get", "find", "search"}


def is_write(tool: ToolCode) -> bool:
    return tool.effect == "write"


def is_lookup(tool: ToolCode, keys: set[str]) -> bool:
    """A read whose required inputs are all things a user can say (no identifier to look up first)."""
    return tool.effect == "read" and not any(is_key_param(p, keys) for p in required_params(tool))


def start_tools(graph: ToolGraph, tools: dict[str, ToolCode], keys: set[str], rule: StartRule) -> list[str]:
    """Where walks may start. ``lookup`` (default): reads whose inputs the user knows (email,
    name), so every identifier downstream must be looked up. ``read``: any read. ``entry``: any
    tool with no required identifier (a create, a login, a search). ``any``: all tools."""
    if rule not in START_RULES:
        raise ConfigError(f"start rule {rule!r} is unknown; valid: {', '.join(START_RULES)} (or auto)")
    names = [n for n in graph.tools if n in tools]
    if rule == "any":
        return names
    if rule == "read":
        return [n for n in names if tools[n].effect == "read"]
    if rule == "entry":
        return [n for n in names if not any(is_key_param(p, keys) for p in required_params(tools[n]))]
    return [n for n in names if is_lookup(tools[n], keys)]


def _trim(path: list[str], tools: dict[str, ToolCode]) -> list[str]:
    last_write = max((i for i, n in enumerate(path) if is_write(tools[n])), default=-1)
    return path[: last_write + 1]


def random_walks(graph: ToolGraph, tools: Iterable[ToolCode], n: int, seed: int, *, min_len: int = 2, max_len: int = 5,
                 start: StartRule = "lookup", env: EnvironmentRecord | None = None,
                 max_attempts: int | None = None, goal: Goal = "state") -> list[ToolSequence]:
    """Up to ``n`` distinct walks, each of ``min_len..max_len`` tools, ending in a write.

    Defaults (ours, docs/design.md#stage-3-tool-graph-walks-and-dags): start uniformly among ``start`` tools, the next tool
    uniformly among out-neighbours not yet visited, target length uniform in
    [min_len, max_len], stop early at a sink; then cut reads after the last write. A walk
    with no write or shorter than ``min_len`` is dropped; identical sequences are kept once.

    ``goal="answer"``: walks over reads only (no cut): the last read's output answers the user
    (answer tasks, for tool sets where nothing changes state).
    """
    if min_len < 1 or max_len < min_len:
        raise ConfigError(f"walk lengths must satisfy 1 <= min_len <= max_len (got {min_len}, {max_len})")
    by_name = {t.name: t for t in tools if t.name in set(graph.tools)}
    if goal == "answer":
        by_name = {k: t for k, t in by_name.items() if t.effect == "read"}
    keys = key_fields(env)
    g: nx.DiGraph = to_networkx(graph).subgraph(by_name)
    starts = start_tools(graph, by_name, keys, start)
    if not starts or n <= 0:
        return []
    rng = random.Random(seed)
    seen: set[tuple[str, ...]] = set()
    out: list[ToolSequence] = []
    for _ in range(max_attempts or n * 30):
        if len(out) >= n:
            break
        target = rng.randint(min_len, max_len)
        path = [rng.choice(starts)]
        while len(path) < target:
            nxt = sorted(s for s in g.successors(path[-1]) if s not in path)
            if not nxt:
                break
            path.append(rng.choice(nxt))
        if goal == "state":
            path = _trim(path, by_name)
        key = tuple(path)
        if len(path) < min_len or key in seen:
            continue
        seen.add(key)
        sid = content_id("seq", graph.env_id, path) if goal == "state" else content_id("seq", graph.env_id, path, goal)
        out.append(ToolSequence(seq_id=sid, env_id=graph.env_id, tools=path, source="walk", seed=seed,
                                requirements=[0] * len(path), goal=goal))
    return out


# --------------------------------------------------------------------------- merging


def _resolves_same(a: ToolCode, b: ToolCode, keys: set[str]) -> bool:
    """Two reads that give the same entity: the same tool, or two lookups of one collection
    that both return its identifier (``find_user_id_by_email`` / ``find_user_id_by_name``)."""
    if a.name == b.name:
        return True
    if not (a.collection and a.collection == b.collection and is_lookup(a, keys) and is_lookup(b, keys)):
        return False
    ka = {p.rsplit(".", 1)[-1] for p in output_paths(a.output_schema) if "*" not in p and is_key_param(p.rsplit(".", 1)[-1], keys)}
    kb = {p.rsplit(".", 1)[-1] for p in output_paths(b.output_schema) if "*" not in p and is_key_param(p.rsplit(".", 1)[-1], keys)}
    return bool(ka & kb)


def _id_only(t: ToolCode, keys: set[str]) -> bool:
    """A lookup that returns identifiers only (``find_user_id_by_email`` -> ``user_id``): its answer
    does not change when the record is updated, so repeating it after a write is still redundant."""
    leaves = [p.rsplit(".", 1)[-1] for p in output_paths(t.output_schema) if "*" not in p]
    return is_lookup(t, keys) and bool(leaves) and all(is_key_param(x, keys) for x in leaves)


def merge_pair(a: ToolSequence, b: ToolSequence, tools: Iterable[ToolCode], *,
               env: EnvironmentRecord | None = None) -> tuple[ToolSequence, int]:
    """``a`` then ``b`` as one two-requirement sequence, with ``b``'s redundant reads removed.

    A read of ``b`` is redundant when an earlier kept read resolves the same entity and no
    write to that read's collection happened in between (after a write the second read
    would see new data, so it stays) — unless it returns identifiers only, which a write does
    not change (the user's id looked up by email once serves both requirements, and the user
    is asked for the email once). Returns the merged sequence and how many calls were removed.
    """
    by_name = {t.name: t for t in tools}
    keys = key_fields(env)
    merged: list[tuple[str, int]] = [(n, 0) for n in a.tools]
    removed = 0
    for name in b.tools:
        t = by_name[name]
        redundant = False
        if t.effect == "read":
            for i in range(len(merged) - 1, -1, -1):
                u = by_name[merged[i][0]]
                if u.effect == "read" and _resolves_same(u, t, keys):
                    later_writes = {by_name[m].collection for m, _ in merged[i + 1 :] if is_write(by_name[m])}
                    redundant = _id_only(t, keys) or (t.collection not in later_writes and None not in later_writes)
                    break
        if redundant:
            removed += 1
        else:
            merged.append((name, 1))
    names = [n for n, _ in merged]
    reqs = [r for _, r in merged]
    seq = ToolSequence(seq_id=content_id("seq", a.env_id, names, reqs), env_id=a.env_id, tools=names, source="merge",
                       parents=[a.seq_id, b.seq_id], seed=None, requirements=reqs)
    return seq, removed


class SharedPairs:
    """The ordered pairs ``(a, b)`` of distinct walks whose first tools read the same collection,
    in the order of ``[(a, b) for a in walks for b in walks if a is not b and key(a) == key(b)]``,
    without building that list (it is quadratic in the walks: 540,000 pairs at 733 walks).
    ``rng.choice`` draws from it exactly as from the list, so the merges do not change."""

    def __init__(self, walks: list[ToolSequence], key: Callable[[ToolSequence], Any]):
        groups: dict[Any, list[int]] = {}
        for i, w in enumerate(walks):
            groups.setdefault(key(w), []).append(i)
        self.walks = walks
        self.group = [groups[key(w)] for w in walks]  # walk i -> the indices of its group, in walk order
        self.rank = [g.index(i) for i, g in enumerate(self.group)]  # walk i's position in its group
        self.starts: list[int] = []  # pair index where walk i's pairs begin
        total = 0
        for g in self.group:
            self.starts.append(total)
            total += len(g) - 1
        self.total = total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, k: int) -> tuple[ToolSequence, ToolSequence]:
        if not 0 <= k < self.total:
            raise IndexError(k)
        i = bisect.bisect_right(self.starts, k) - 1  # the last walk whose pairs begin at or before k (skips walks without any)
        j = k - self.starts[i]
        j += j >= self.rank[i]  # skip the walk itself
        return self.walks[i], self.walks[self.group[i][j]]


def merge_sequences(seqs: list[ToolSequence], tools: Iterable[ToolCode], n: int, seed: int, *,
                    env: EnvironmentRecord | None = None, max_len: int = 9, prefer_shared: float = 0.7) -> list[ToolSequence]:
    """Up to ``n`` distinct merged sequences from pairs of walks of one environment.

    Pair choice (DEFAULT, the paper leaves it open): with probability ``prefer_shared`` a pair
    whose first tools read the same collection (so a lookup is shared and removed), else any
    pair. Merges longer than ``max_len`` tools are skipped.
    """
    tools = list(tools)
    by_name = {t.name: t for t in tools}
    walks = [s for s in seqs if s.source == "walk"]
    if len(walks) < 2 or n <= 0:
        return []
    rng = random.Random(seed)
    shared = SharedPairs(walks, lambda s: by_name[s.tools[0]].collection)
    seen: set[str] = set()
    out: list[ToolSequence] = []
    for _ in range(n * 20):
        if len(out) >= n:
            break
        if shared and rng.random() < prefer_shared:
            a, b = rng.choice(shared)
        else:
            a, b = rng.sample(walks, 2)
        m, _ = merge_pair(a, b, tools, env=env)
        if len(m.tools) > max_len or m.seq_id in seen:
            continue
        seen.add(m.seq_id)
        out.append(m)
    return out


def sample_sequences(graph: ToolGraph, tools: Iterable[ToolCode], n: int, seed: int, *, min_len: int = 2,
                     max_len: int = 5, start: StartRule = "lookup", n_merged: int | None = None,
                     env: EnvironmentRecord | None = None, goal: Goal = "state") -> list[ToolSequence]:
    """Walks plus merged pairs for one environment: ``n`` walks and ``n_merged`` (default n) merges
    (answer walks are not merged: one task asks one question)."""
    tools = [t for t in tools if t.env_id == graph.env_id]
    walks = random_walks(graph, tools, n, seed, min_len=min_len, max_len=max_len, start=start, env=env, goal=goal)
    if goal == "answer":
        return walks
    merged = merge_sequences(walks, tools, n if n_merged is None else n_merged, seed + 1, env=env)
    return walks + merged


__all__ = ["random_walks", "merge_pair", "merge_sequences", "sample_sequences", "start_tools", "param_schemas"]
