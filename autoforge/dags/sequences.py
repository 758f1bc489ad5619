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

from autoforge.dags.gates import gate_break, gates
from autoforge.dags.graph import to_networkx
from autoforge.domain.keys import is_key_param, key_fields, name_tokens, output_paths, param_schemas, required_params
from autoforge.errors import ConfigError
from autoforge.types import EnvironmentRecord, GraphEdge, ToolCode, ToolGraph, ToolSequence, content_id

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
    [min_len, max_len], stop early at a sink; then cut the walk before a write whose status gate
    the earlier writes on its record leave no way through (:func:`autoforge.dags.gates.gate_break`:
    check-in after a cancel), and cut reads after the last write. A walk with no write or shorter
    than ``min_len`` is dropped; identical sequences are kept once.

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
    known = gates(by_name.values())
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
            cut = gate_break(path, by_name, known)
            path = _trim(path if cut is None else path[:cut], by_name)
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
    pair. Merges longer than ``max_len`` tools are skipped, and so are merges where a write of the
    second walk cannot pass its status gate after the first walk's writes on its record
    (:func:`autoforge.dags.gates.gate_break`: the first checks in what the second cancels).
    """
    tools = list(tools)
    by_name = {t.name: t for t in tools}
    known = gates(tools)
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
        if len(m.tools) > max_len or m.seq_id in seen or gate_break(m.tools, by_name, known) is not None:
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


# --------------------------------------------------------------------------- ranking walks of every start rule

# Weights of :func:`walk_score` (DEFAULT, ours: the paper draws walks uniformly and ranks none). Every
# term is per walk or a share, never per call, so a longer walk does not outscore a shorter one by
# its length alone (long sequences fail instantiation more often: stage 4).
SCORE_IDENTIFY_START = 3.0  # the walk starts where a user would: identify / look up / search (no stored id needed)
SCORE_READ_START = 1.0  # ... or at a read that takes an id the user states (their order number)
SCORE_WRITES = 2.0  # times the mean over its writes of: an earlier call returns its key (search -> pick -> book) 1,
WRITE_SHOWN = 0.5  # ... an earlier read shows its record with no data flow (check, then act) 0.5,
WRITE_BLIND = -1.0  # ... nothing earlier leads to it (the user must state what it acts on) -1
SCORE_DISTINCT = 1.0  # times the share of distinct tools
SCORE_REPEAT = -1.0  # per tool called again without a write in between that it could show
SCORE_UNDONE = -3.0  # per write the next write undoes (create then delete, link then unlink, book then cancel)
UNDO_WORDS = {"delete", "remove", "cancel", "revoke", "unlink", "undo", "discard", "withdraw", "void"}


def undoes(first: ToolCode, second: ToolCode) -> bool:
    """Does the write ``second`` undo the write ``first`` right before it on the same collection?
    A delete-like write (kind ``delete``/``unlink``, or a name word such as cancel, remove, revoke)
    after a write that is not one: creating then deleting, linking then unlinking, booking then
    cancelling leave S* where it was, so no reward sees the first write. Such a walk is not
    dropped (where the docs allow a cancel after a check-in, that is still a task): it ranks low."""
    def undo_like(t: ToolCode) -> bool:
        return t.kind in ("delete", "unlink") or bool(set(name_tokens(t.name)) & UNDO_WORDS)

    return (is_write(first) and is_write(second) and first.collection is not None and first.collection == second.collection
            and undo_like(second) and not undo_like(first))


def walk_score(seq: ToolSequence, graph: ToolGraph, tools: dict[str, ToolCode], keys: set[str],
               edges: dict[tuple[str, str], GraphEdge] | None = None) -> float:
    """How much a sequence reads like a workflow a user would go through (higher: better).

    The sum of (weights above): the start (an identify / lookup / search read scores most, a read
    by a stated id less, anything else nothing); how the walk reaches its writes, averaged over
    them (an earlier call of the walk returns the write's key: a data edge into one of its
    identifier parameters; or only shows its record: a state edge; or neither: a blind write);
    the share of distinct tools and a penalty per repeated call that no write in between explains
    (a random walk never revisits a tool, so these two rank merged or given sequences); a
    penalty per write the next write undoes (:func:`undoes`). Which writes the kept walks reach is
    :func:`ranked_walks`' concern (coverage), not the score's. ``edges``: ``graph``'s edges by
    (src, dst), when the caller scores many walks of one graph."""
    names = [n for n in seq.tools if n in tools]
    if not names:
        return float("-inf")
    edges = edges if edges is not None else {(e.src, e.dst): e for e in graph.edges}
    first = tools[names[0]]
    score = SCORE_IDENTIFY_START if is_lookup(first, keys) else SCORE_READ_START if first.effect == "read" else 0.0
    reach: list[float] = []
    for i, name in enumerate(names):
        tool = tools[name]
        if is_write(tool):
            into = [edges.get((p, name)) for p in names[:i]]
            if any(e is not None and e.kind == "data" and any(is_key_param(b.param, keys) for b in e.bindings) for e in into):
                reach.append(1.0)
            elif any(e is not None and tools[e.src].effect == "read" for e in into):
                reach.append(WRITE_SHOWN)
            else:
                reach.append(WRITE_BLIND)
            if i + 1 < len(names) and undoes(tool, tools[names[i + 1]]):
                score += SCORE_UNDONE
        if name in names[:i]:
            last = max(j for j in range(i) if names[j] == name)
            changed = any(is_write(tools[m]) and (tools[m].collection == tool.collection or tools[m].collection is None)
                          for m in names[last + 1:i])
            if not (tool.effect == "read" and changed):  # re-reading what a write changed has a reason
                score += SCORE_REPEAT
    if reach:
        score += SCORE_WRITES * sum(reach) / len(reach)
    score += SCORE_DISTINCT * len(set(names)) / len(names)
    return score


def ranked_walks(graph: ToolGraph, tools: Iterable[ToolCode], n: int, seed: int, rules: Iterable[StartRule], *,
                 min_len: int = 2, max_len: int = 5, env: EnvironmentRecord | None = None,
                 goal: Goal = "state") -> tuple[list[ToolSequence], dict[str, dict[str, int]]]:
    """The best ``n`` walks over every start rule in ``rules``, each tagged with its rule.

    Each rule draws up to ``n`` walks (:func:`random_walks`, same seed); a walk two rules draw is
    one walk. A walk is tagged with the first rule of ``rules`` that allows its first tool (a walk
    the ``read`` rule drew from a lookup is a ``lookup`` walk). The pool is ranked by
    :func:`walk_score` (ties: the drawing rule's place in ``rules``, then the order drawn), so one
    rule yielding little never stops the others, and a rule yielding much never crowds out better
    walks. The best-ranked walk to each write tool is kept first (every write the pool reaches
    stays reachable), then the rest by rank. Returns the kept walks in the order drawn (rule by
    rule: the rank decides which are kept, not how later merges pair them, so a single rule keeps
    exactly what :func:`random_walks` drew) and, per rule (its tag),
    ``{"walks": distinct walks drawn, "kept": kept}``."""
    tools = [t for t in tools if t.env_id == graph.env_id]
    by_name = {t.name: t for t in tools}
    keys = key_fields(env)
    rules = list(rules)
    in_graph = {k: t for k, t in by_name.items() if k in set(graph.tools)}
    allowed = {rule: set(start_tools(graph, in_graph, keys, rule)) for rule in rules}
    pool: dict[str, tuple[ToolSequence, int, int]] = {}
    stats: dict[str, dict[str, int]] = {rule: {"walks": 0, "kept": 0} for rule in rules}
    for r, rule in enumerate(rules):
        for i, w in enumerate(random_walks(graph, tools, n, seed, min_len=min_len, max_len=max_len, start=rule, env=env,
                                           goal=goal)):
            if w.seq_id in pool:
                continue
            tag = next((q for q in rules if w.tools[0] in allowed[q]), rule)
            stats[tag]["walks"] += 1
            pool[w.seq_id] = (w.model_copy(update={"start_rule": tag}), r, i)
    edges = {(e.src, e.dst): e for e in graph.edges}
    ranked = sorted(pool.values(), key=lambda x: (-walk_score(x[0], graph, by_name, keys, edges), x[1], x[2]))
    # coverage first: the best walk to each write tool, so no write the pool reaches is lost to
    # better-scoring walks of other writes; then the rest by rank
    chosen: list[int] = []
    covered: set[str] = set()
    for j, (w, _, _) in enumerate(ranked):
        new = {t for t in w.tools if t in by_name and is_write(by_name[t])} - covered
        if new and len(chosen) < n:
            chosen.append(j)
            covered |= new
    taken = set(chosen)
    rest = [j for j in range(len(ranked)) if j not in taken]
    kept = sorted((ranked[j] for j in (chosen + rest)[:max(n, 0)]), key=lambda x: (x[1], x[2]))
    for w, _, _ in kept:
        stats[w.start_rule or ""]["kept"] += 1
    return [w for w, _, _ in kept], stats


__all__ = ["random_walks", "merge_pair", "merge_sequences", "sample_sequences", "start_tools", "param_schemas",
           "ranked_walks", "walk_score"]
