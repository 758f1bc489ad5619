"""Costs that must not grow faster than the batch (issue 16): merge pairs drawn without building
the quadratic pair list, and generation turns that go to DAGs which instantiate."""

from __future__ import annotations

import random
from collections import Counter
from types import SimpleNamespace

import pytest

import dags_mock as m
from autoforge.dags.build import build_dags
from autoforge.dags.graph import build_graph
from autoforge.dags.sequences import SharedPairs, merge_sequences, sample_sequences
from autoforge.tasks import generate as gen
from autoforge.tasks.execute import DagExecutionError
from autoforge.tasks.quality import sequence_cap


def test_shared_pairs_index_like_the_list_of_pairs_it_replaces():
    for trial in range(150):
        rng = random.Random(trial)
        keys = "abcd" if trial % 3 else "abcdefghijklmnop"  # many groups of one (walks without a partner) too
        walks = [SimpleNamespace(seq_id=f"s{i}", key=rng.choice(keys)) for i in range(rng.randint(0, 40))]
        listed = [(a, b) for a in walks for b in walks if a.seq_id != b.seq_id and a.key == b.key]
        pairs = SharedPairs(walks, lambda w: w.key)
        assert len(pairs) == len(listed)
        assert [pairs[k] for k in range(len(pairs))] == listed
        with pytest.raises(IndexError):
            pairs[len(listed)]
        assert rng.choice(pairs) if listed else not pairs  # what merge_sequences draws from


def test_merges_are_the_same_as_with_the_pair_list():
    """The lazy pairs draw exactly what ``rng.choice`` drew from the list (same merges, same ids)."""
    env, tools = m.make_env(), m.make_tools()
    graph = build_graph(env, tools)
    walks = sample_sequences(graph, tools, 30, seed=1, env=env, n_merged=0)
    by_name = {t.name: t for t in tools}
    got = merge_sequences(walks, tools, 25, seed=2, env=env)

    class Listed(list):  # the old code: rng.choice over the materialised list
        def __init__(self, walks, key):
            super().__init__((a, b) for a in walks for b in walks if a.seq_id != b.seq_id and key(a) == key(b))

    import autoforge.dags.sequences as seqmod

    lazy = seqmod.SharedPairs
    seqmod.SharedPairs = Listed
    try:
        want = merge_sequences(walks, tools, 25, seed=2, env=env)
    finally:
        seqmod.SharedPairs = lazy
    assert [s.seq_id for s in got] == [s.seq_id for s in want] and got
    assert all(by_name[s.tools[0]] for s in got)


@pytest.fixture(scope="module")
def mock_dags():
    env, tools = m.make_env(), m.make_tools()
    graph = build_graph(env, tools)
    seqs = sample_sequences(graph, tools, 30, seed=1, env=env)
    return env, tools, build_dags(graph, seqs, tools, env, seed=1, variants=2)[0]


def _scripted(monkeypatch, good: set[str]):
    """generate_task replaced: DAGs in ``good`` always make a (new) task, the others always fail."""
    tried: list[str] = []
    made: dict[str, str] = {}  # task id -> its DAG

    def fake(env, tools, dag, runtime, rng, **kw):
        tried.append(dag.dag_id)
        if dag.dag_id not in good:
            raise DagExecutionError("gold_call_error", "precondition fails", "n1")
        made[f"task{len(tried)}"] = dag.dag_id
        return SimpleNamespace(task_id=f"task{len(tried)}")

    monkeypatch.setattr(gen, "generate_task", fake)
    return tried, made


def test_dags_that_instantiate_get_the_next_turns_up_to_their_caps(monkeypatch, mock_dags):
    env, tools, dags = mock_dags
    good = {d.dag_id for d in dags[::5]}  # one DAG in five instantiates; the rest always fail
    n_tasks, budget = 60, 60

    tried, made = _scripted(monkeypatch, good)
    plain, _ = gen.generate_tasks(env, tools, dags, 0, n_tasks=n_tasks, max_attempts=budget, env_factory=lambda t: object(),
                                  proven_turns=0)
    plain_order = list(tried)
    tried.clear()
    proven, rejections = gen.generate_tasks(env, tools, dags, 0, n_tasks=n_tasks, max_attempts=budget,
                                            env_factory=lambda t: object())
    assert len(tried) == budget and len(proven) + len(rejections) == budget
    assert len(proven) > 1.5 * len(plain)  # the same attempts make more tasks
    first = next(i for i, d in enumerate(plain_order) if d in good)
    assert tried[:first + 1] == plain_order[:first + 1]  # the shuffled round is unchanged until a DAG succeeds
    assert tried[first + 1] == tried[first]  # ... and then that DAG has the next turn
    # the variety caps still hold: no gold tool sequence holds more than its share
    tools_of = {d.dag_id: tuple(n.tool for n in d.nodes if n.kind == "tool") for d in dags}
    per_seq = Counter(tools_of[made[t.task_id]] for t in proven)
    assert max(per_seq.values()) <= sequence_cap(n_tasks)


def test_proven_turns_make_real_tasks_that_verify(mock_dags):
    """On the mock shop with its real tools: the turns scheme makes as many tasks as asked, all distinct."""
    from autoforge.tasks.verify import verify_tasks

    env, tools, dags = mock_dags
    tasks, _ = gen.generate_tasks(env, tools, dags, 3, n_tasks=30, env_factory=m.LocalEnvironment)
    assert len(tasks) == 30 and len({t.task_id for t in tasks}) == 30
    out, _, _ = verify_tasks(env, tools, tasks, dags, env_factory=m.LocalEnvironment)
    assert sum(t.status == "verified" for t in out) >= 25
