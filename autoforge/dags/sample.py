"""Stage 3 for one environment: tool graph -> random walks + merged pairs -> task DAGs (paper Sec. 3.2).

:func:`sample_env` is the unit a stage runner fans out (one per environment); it takes records
and returns records (:class:`SampleResult`), and never touches the warehouse: the pipeline
(:mod:`autoforge.pipeline.sample`) reads its inputs and writes what it returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from autoforge.dags.build import DagKnobs, build_dags
from autoforge.dags.graph import build_graph
from autoforge.dags.sequences import StartRule, merge_sequences, ranked_walks, sample_sequences
from autoforge.domain.operands import operand_order
from autoforge.domain.tool_kinds import in_tasks
from autoforge.llm.record import drain_calls
from autoforge.types import (Binding, EnvironmentRecord, GraphEdge, LLMCall, Rejection, TaskDag, ToolCode, ToolGraph, ToolSequence,
                             content_id)


@dataclass
class SampleResult:
    """What one environment gave stage 3: its graph, sequences, DAGs and the drops with reasons."""

    env_id: str
    graph: ToolGraph
    sequences: list[ToolSequence]
    dags: list[TaskDag]
    rejections: list[Rejection]
    llm_calls: list[LLMCall] = field(default_factory=list)  # online backend: every call, for the warehouse
    starts: dict[str, dict[str, int]] = field(default_factory=dict)  # start rule -> {"walks": drawn, "kept": kept}

    def records(self) -> list[Any]:
        return [self.graph, *self.sequences, *self.dags, *self.rejections, *self.llm_calls]

    def row(self, name: str = "") -> dict[str, Any]:
        return {"environment": name or self.env_id, "edges": len(self.graph.edges),
                "walks": sum(s.source == "walk" for s in self.sequences),
                "merged": sum(s.source == "merge" for s in self.sequences), "dags": len(self.dags),
                "rejected": len(self.rejections), "starts": starts_text(self.starts)}


def starts_text(starts: dict[str, dict[str, int]]) -> str:
    """``lookup 12/40, read 28/40``: per start rule, the walks kept of those drawn (rules that drew none left out)."""
    return ", ".join(f"{r} {c['kept']}/{c['walks']}" for r, c in starts.items() if c["walks"]) or "-"


AUTO_STARTS: tuple[StartRule, ...] = ("lookup", "read", "entry", "any")  # start="auto" tries all of these (ranked_walks)


def sample_env(env: EnvironmentRecord, tools: list[ToolCode], seed: int, *, walks: int, merges: int, min_len: int,
               max_len: int, start: StartRule | Literal["auto"], dag_variants: int, client: Any = None,
               knobs: DagKnobs | None = None, run_id: str | None = None,
               procedures: list[list[str]] | None = None) -> SampleResult:
    """Graph -> walks + merges -> DAGs for one environment (the knobs' defaults: ``pipeline.SampleParams``).

    ``start="auto"``: walks are drawn under every start rule (at lookups, the reads the user can
    call with what they know; at any read; at any tool with no required id; at any tool) and the
    best ``walks`` of them by :func:`autoforge.dags.sequences.walk_score` are kept, each
    sequence recording its rule (a merge: its first walk's); ``SampleResult.starts`` counts per
    rule the walks drawn and kept. Where no walk reaches a write at all, walks over reads become
    answer sequences (``goal="answer"``): the last read's output is the answer.

    ``procedures``: tool sequences a policy requires (the steps of the environment's judged ``sequence``
    rules, :mod:`autoforge.domain.policy_order`); each whose tools the environment has is a sequence of
    its own (start rule ``procedure``), ahead of the walks, so tasks teach the procedure."""
    mine = [t for t in tools if t.env_id == env.env_id and t.status == "accepted"]
    graph = build_graph(env, mine, client, run_id=run_id)
    rules = AUTO_STARTS if start == "auto" else (start,)
    kept, starts = ranked_walks(graph, mine, walks, seed, rules, min_len=min_len, max_len=max_len, env=env)
    proc = procedure_sequences(env, mine, procedures or [])
    if proc:
        kept = proc + [w for w in kept if w.seq_id not in {p.seq_id for p in proc}]
        starts["procedure"] = {"walks": len(proc), "kept": len(proc)}
    rule_of = {w.seq_id: w.start_rule for w in kept}
    seqs = kept + [m.model_copy(update={"start_rule": rule_of[m.parents[0]]})
                   for m in merge_sequences([w for w in kept if w.start_rule != "procedure"], mine, merges, seed + 1, env=env)]
    rule: StartRule | None = None  # a fallback's one rule (None: the walks' own)
    if not seqs and start == "auto" and min_len > 1:
        # no multi-step walk anywhere (a tool graph without edges): single writes that need no
        # stored id (make a folder, store a key) are still tasks with a state change to verify
        rule = "entry"
        seqs = sample_sequences(graph, mine, walks, seed, min_len=1, max_len=max_len, start=rule, n_merged=merges,
                                env=env)
    if not seqs and start == "auto":
        # nothing changes state anywhere (math, search, file reads): answer tasks. Computations
        # chain (a mean's result is rounded), so value edges join them first.
        graph = graph.model_copy(update={"edges": [*graph.edges, *value_edges(mine)]})
        rule = "read"
        seqs = sample_sequences(graph, mine, walks, seed, min_len=1, max_len=min(max_len, ANSWER_MAX_LEN), start=rule,
                                env=env, goal="answer")
    if rule is not None:
        starts[rule] = {"walks": sum(s.source == "walk" for s in seqs), "kept": sum(s.source == "walk" for s in seqs)}
    seqs = [s.model_copy(update={"run_id": run_id, "start_rule": rule or s.start_rule}) for s in seqs]
    dags, rejections = build_dags(graph, seqs, mine, env, seed=seed, variants=dag_variants, knobs=knobs, run_id=run_id)
    if not seqs:
        rejections.append(Rejection(rejection_id=content_id("rej", "sample", env.env_id, "no_sequence"), stage="sample",
                                    item_id=env.env_id, reason="no_sequence",
                                    detail=f"no walk of {min_len}..{max_len} tools ending in a write "
                                           f"(start rules tried: {', '.join(rules)})",
                                    run_id=run_id))
    return SampleResult(env.env_id, graph, seqs, dags, rejections, drain_calls(client, run_id), starts)


def procedure_sequences(env: EnvironmentRecord, tools: list[ToolCode], procedures: list[list[str]]) -> list[ToolSequence]:
    """One sequence per distinct procedure whose every step is an accepted tool of ``env`` that tasks may
    use; ``goal="state"`` when a step writes, else ``"answer"`` (the last read answers)."""
    usable = {t.name: t for t in tools if in_tasks(t.kind)}
    out: dict[str, ToolSequence] = {}
    for steps in procedures:
        if len(steps) < 2 or not all(s in usable for s in steps):
            continue
        goal: Literal["state", "answer"] = "state" if any(usable[s].effect == "write" for s in steps) else "answer"
        sid = content_id("seq", env.env_id, steps) if goal == "state" else content_id("seq", env.env_id, steps, goal)
        out.setdefault(sid, ToolSequence(seq_id=sid, env_id=env.env_id, tools=list(steps), start_rule="procedure",
                                          goal=goal))
    return list(out.values())


ANSWER_MAX_LEN = 3  # an answer task chains at most this many reads (DEFAULT: longer chains of sums read as puzzles)


def value_edges(tools: list[ToolCode]) -> list[GraphEdge]:
    """Data edges between computation tools (``ToolCode.kind == "compute"``): the one numeric
    output of ``a`` feeds the first numeric operand of ``b`` (mean -> round_number.number)."""
    comp = sorted((t for t in tools if t.kind == "compute" and t.status == "accepted"), key=lambda t: t.name)
    out = []
    for a in comp:
        props = ((a.output_schema or {}).get("properties") or {})
        numeric = [k for k, v in props.items() if isinstance(v, dict) and v.get("type") in ("number", "integer")]
        if len(numeric) != 1:
            continue
        for b in comp:
            first = operand_order(b.parameters)
            if b.name != a.name and first:
                out.append(GraphEdge(src=a.name, dst=b.name, bindings=[Binding(output_path=numeric[0], param=first[0])]))
    return out


def sample_counts(results: list[SampleResult], seconds: float) -> dict[str, Any]:
    """The stage's counts for its run row and the funnel; per start rule, the sequences that start
    there (``start_<rule>``) and ``start_rules``: the walks each rule drew and how many were kept."""
    per_rule: dict[str, dict[str, int]] = {}
    for r in results:
        for rule, c in r.starts.items():
            tot = per_rule.setdefault(rule, {"walks": 0, "kept": 0})
            tot["walks"] += c["walks"]
            tot["kept"] += c["kept"]
    seqs = [s for r in results for s in r.sequences]
    by_rule = {f"start_{rule}": sum(s.start_rule == rule for s in seqs) for rule in per_rule}
    return {"environments": len(results), "in": len(seqs),
            "out": len({d.seq_id for r in results for d in r.dags}), "dags": sum(len(r.dags) for r in results),
            "rejected": sum(len(r.rejections) for r in results), **{k: v for k, v in by_rule.items() if v},
            "start_rules": per_rule, "seconds": round(seconds, 3)}


def unreachable_writes(graph: ToolGraph, tools: list[ToolCode]) -> list[str]:
    """Accepted write tools that no read tool leads to through ``graph``'s edges: a task can never
    find the record they act on, so no walk starting at a read ever reaches them. A write no task
    may call (a hand-off, :mod:`autoforge.domain.tool_kinds`) is never counted."""
    import networkx as nx

    effect = {t.name: t.effect for t in tools if t.status == "accepted" and in_tasks(t.kind)}
    g = nx.DiGraph()
    g.add_nodes_from(effect)
    g.add_edges_from((e.src, e.dst) for e in graph.edges if e.src in effect and e.dst in effect)
    reached: set[str] = set()
    for name, eff in effect.items():
        if eff == "read":
            reached |= nx.descendants(g, name)
    return sorted(n for n, eff in effect.items() if eff == "write" and n not in reached)
