"""Trainer smoke tests: two ERPO steps move every parameter; SFT trains only masked tokens; resume; curve."""

from __future__ import annotations

import math

import pytest
import torch

from autoforge.errors import ConfigError
from autoforge.rl.checkpoint import latest_checkpoint
from autoforge.rl.config import TrainConfig
from autoforge.rl.curves import empty_panels, panels_for, plot_learning_curve
from autoforge.rl.policy import build_tiny_policy, encode_dialogue, load_policy
from autoforge.rl.synthetic import make_synthetic_rollout_fn, synthetic_tasks
from autoforge.rl.trainer import sft, train

CORPUS = [f"Please update record R{i % 9} in environment {i % 3}; set status {i % 4}." for i in range(200)]


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return build_tiny_policy(tmp_path_factory.mktemp("tiny"), CORPUS, vocab_size=500, hidden_size=64, num_layers=2,
                             num_heads=4)


def _cfg(tmp_path, **kw) -> TrainConfig:
    base = dict(steps=2, tasks_per_batch=4, rollouts_per_task=4, micro_batch_size=8, lr=1e-3, max_new_tokens=8,
                checkpoint_dir=str(tmp_path / "ckpt"), checkpoint_every=1, device="cpu", sft_epochs=0, seed=3)
    base.update(kw)
    return TrainConfig(**base)


def test_two_erpo_steps_change_every_parameter(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    before = {n: p.detach().clone() for n, p in pol.model.named_parameters()}
    tasks = synthetic_tasks(n_envs=2, tasks_per_env=2)
    # one rollout per task (trial 0) is flagged by the judge: masked out
    rollout_fn = make_synthetic_rollout_fn(max_new_tokens=8, judge_fn=lambda task, j: j == 0)
    logged = []
    res = train(pol, tasks, rollout_fn, _cfg(tmp_path), log_fn=lambda s, ph, m: logged.append((s, ph, m)))
    assert [(s, ph) for s, ph, _ in logged] == [(1, "erpo"), (2, "erpo")]
    for _, _, m in logged:
        assert math.isfinite(m["loss"]) and math.isfinite(m["entropy"]) and m["entropy"] > 0
        assert m["masked_frac"] == pytest.approx(0.25)  # 1 of 4 rollouts per task
        assert m["kept_rollouts"] == 12 and m["dropped_tasks"] == 0  # trials 1,2,3 -> rewards 1,0,1: mixed
        assert {"reward/env0", "reward/env1", "clip_frac", "kl", "tokens_per_s", "grad_norm"} <= set(m)
        # on-policy: recomputed log-probs on the exact token ids equal the recorded ones (token-in/token-out,
        # masks and log-prob positions aligned), so the ratio is 1 and nothing is clipped
        assert m["ratio_mean"] == pytest.approx(1.0, abs=1e-4) and m["clip_frac"] == 0.0
        assert abs(m["approx_kl_old"]) < 1e-4
    for n, p in pol.model.named_parameters():
        assert not torch.equal(before[n], p.detach()), f"{n} did not change"
    assert res.last_checkpoint is not None and res.last_checkpoint.name == "erpo-000002"
    assert len(res.history) == 2


def test_all_tasks_dropped_skips_the_update(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    before = [p.detach().clone() for p in pol.model.parameters()]
    rollout_fn = make_synthetic_rollout_fn(max_new_tokens=4, reward_fn=lambda task, j, turns: 1.0)
    res = train(pol, synthetic_tasks(), rollout_fn, _cfg(tmp_path, steps=1))
    assert res.history[0]["skipped"] == 1.0 and res.history[0]["dropped_tasks"] == 4
    assert all(torch.equal(a, b) for a, b in zip(before, pol.model.parameters()))


def test_drop_reasons_name_why_each_group_is_dropped():
    from autoforge.rl.erpo import group_drop_reasons

    rewards = [1, 1, 0, 0, 1, 0, 0.5, 0.5, 1, 0]
    tasks = ["right", "right", "wrong", "wrong", "mixed", "mixed", "half", "half", "masked", "masked"]
    valid = [True] * 8 + [True, False]
    assert group_drop_reasons(rewards, tasks, valid) == {"right": "all_right", "wrong": "all_wrong",
                                                         "half": "no_variance", "masked": "few_valid"}


def test_dynamic_sampling_refills_the_batch_with_mixed_groups(base_dir, tmp_path):
    """Half the tasks always succeed: the step keeps rolling out new tasks until 4 groups have mixed
    rewards, within the cap, and logs why the others were dropped."""
    pol = load_policy(base_dir, device="cpu")
    tasks = synthetic_tasks(n_envs=2, tasks_per_env=8)
    solved = {t["task_id"] for t in tasks[::2]}
    reward = lambda task, j, turns: 1.0 if task["task_id"] in solved else float(j % 2)  # noqa: E731
    calls = []

    def rollout_fn(policy, batch, n):
        calls.append([t["task_id"] for t in batch])
        return make_synthetic_rollout_fn(max_new_tokens=4, reward_fn=reward)(policy, batch, n)

    res = train(pol, tasks, rollout_fn, _cfg(tmp_path, steps=1, refill_max_rollouts=2.0))
    m = res.history[0]
    assert m["kept_groups"] >= 4 and "skipped" not in m
    assert m["refill_rounds"] == len(calls) - 1 >= 1 and m["extra_rollouts"] <= 2 * 16
    tried = [tid for c in calls for tid in c]
    assert len(tried) == len(set(tried))  # a task is rolled out once per step
    assert m["dropped/all_right"] == sum(tid in solved for tid in tried) and m["dropped/all_wrong"] == 0
    # no refill: the step keeps what the first sample gave
    calls.clear()
    res = train(load_policy(base_dir, device="cpu"), tasks, rollout_fn,
                _cfg(tmp_path / "b", steps=1, refill_max_rollouts=0))
    assert len(calls) == 1 and res.history[0]["refill_rounds"] == 0


def test_refill_stops_at_the_cap_when_nothing_is_learnable(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    rollout_fn = make_synthetic_rollout_fn(max_new_tokens=4, reward_fn=lambda task, j, turns: 0.0)
    res = train(pol, synthetic_tasks(n_envs=2, tasks_per_env=20), rollout_fn,
                _cfg(tmp_path, steps=1, refill_max_rollouts=1.0))
    m = res.history[0]
    assert m["skipped"] == 1.0 and m["extra_rollouts"] == 16 and m["dropped/all_wrong"] == m["n_tasks"] == 8


def test_sft_loss_counts_only_masked_tokens(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    dialogue = [{"role": "user", "content": "Please update record R1."},
                {"role": "assistant", "content": "", "tool_calls": [{"name": "update", "arguments": {"id": "R1"}}]},
                {"role": "tool", "content": '{"ok": true}'},
                {"role": "assistant", "content": "Done."}]
    ids, mask = encode_dialogue(pol.tokenizer, dialogue)
    # expected first-step loss: mean over masked target tokens of -log p(token | prefix)
    with torch.no_grad():
        full = torch.tensor([ids])
        logp = torch.log_softmax(pol.model(full).logits[0, :-1].float(), -1)
        nll = -logp.gather(1, full[0, 1:, None]).squeeze(1)
        m = torch.tensor(mask[1:], dtype=torch.float32)
        expected = float((nll * m).sum() / m.sum())
    cfg = _cfg(tmp_path, sft_epochs=12, sft_batch_size=1, sft_lr=1e-2, checkpoint_every=100)
    hist = sft(pol, [(ids, mask)], cfg)
    assert hist[0]["loss"] == pytest.approx(expected, rel=1e-4)
    assert hist[-1]["loss"] < 0.5 * hist[0]["loss"]  # it fits the one example
    assert latest_checkpoint(cfg.checkpoint_dir).name == "sft-000012"
    with pytest.raises(ConfigError, match="mask entries"):
        sft(pol, [([1, 2, 3], [0, 1])], cfg)


def test_resume_does_not_redo_steps_and_matches_an_uninterrupted_run(base_dir, tmp_path):
    tasks = synthetic_tasks()
    calls = []
    inner = make_synthetic_rollout_fn(max_new_tokens=6)

    class Killed(Exception):
        pass

    def dying(policy, batch, n):
        calls.append(len(calls))
        if len(calls) == 3:
            raise Killed("simulated kill during step 3")
        return inner(policy, batch, n)

    cfg = _cfg(tmp_path, steps=3, tasks_per_batch=2)
    with pytest.raises(Killed):
        train(load_policy(base_dir, device="cpu"), tasks, dying, cfg)
    assert latest_checkpoint(cfg.checkpoint_dir).name == "erpo-000002"

    calls.clear()
    logged = []
    pol = load_policy(base_dir, device="cpu")
    res = train(pol, tasks, lambda p, b, n: (calls.append(1), inner(p, b, n))[1], cfg,
                log_fn=lambda s, ph, m: logged.append(s))
    assert res.resumed_from.name == "erpo-000002"
    assert logged == [3] and len(calls) == 1  # steps 1-2 were not redone
    assert [r["step"] for r in res.history] == [1, 2, 3]

    straight = load_policy(base_dir, device="cpu")
    ref = train(straight, tasks, inner, _cfg(tmp_path / "straight", steps=3, tasks_per_batch=2))
    for a, b in zip(pol.model.parameters(), straight.model.parameters()):
        assert torch.allclose(a, b, atol=1e-5)
    assert [r["reward_mean"] for r in ref.history] == [r["reward_mean"] for r in res.history]


def test_sft_then_erpo_resumes_past_sft(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    ids, mask = encode_dialogue(pol.tokenizer, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}])
    cfg = _cfg(tmp_path, steps=1, sft_epochs=2, sft_batch_size=1)
    res = train(pol, synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=4), cfg, sft_examples=[(ids, mask)] * 2)
    assert [(r["phase"], r["step"]) for r in res.history] == [("sft", 1), ("sft", 2), ("sft", 3), ("sft", 4), ("erpo", 1)]
    again = train(load_policy(base_dir, device="cpu"), synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=4),
                  cfg, sft_examples=[(ids, mask)] * 2, log_fn=lambda *a: pytest.fail("nothing left to do"))
    assert len(again.history) == 5
    evals = {"start": {"per_env": {"env0": 0.0, "env1": 0.0}}, "end": {"per_env": {"env0": 0.5, "env1": 0.25}}}
    png = plot_learning_curve(res.history, tmp_path / "curve.png", title="tiny", evals=evals)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    # every panel has a line: SFT loss, ERPO reward / pass rate / entropy / KL per environment, held-out bars
    titles = [t for t, _ in panels_for(res.history, evals)]
    assert len(titles) == 6 and empty_panels(res.history, evals) == []
    erpo = res.history[-1]
    assert {"pass/env0", "entropy/env1", "kl_ref/env0", "pass_rate", "entropy_sampled", "kl_ref"} <= set(erpo)
    assert erpo["entropy_sampled"] > 0 and erpo["kl_ref"] >= 0


def test_kl_term_with_reference(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    cfg = _cfg(tmp_path, steps=2, beta=0.5, tasks_per_batch=2)
    res = train(pol, synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=6), cfg)
    assert res.history[0]["kl"] == pytest.approx(0.0, abs=1e-6)  # policy == reference before the first step
    assert res.history[1]["kl"] > 0
    assert (tmp_path / "ckpt" / "reference" / "config.json").is_file()


def test_policy_from_config_builds_once_and_records(tmp_path):
    from autoforge.rl.trainer import policy_from_config, training_step_record

    cfg = _cfg(tmp_path, tiny_vocab_size=400, tiny_hidden_size=32, tiny_num_layers=1, tiny_num_heads=2)
    with pytest.raises(ConfigError, match="corpus"):
        policy_from_config(cfg)
    pol = policy_from_config(cfg, CORPUS)
    assert pol.model.config.hidden_size == 32 and (tmp_path / "ckpt" / "base" / "config.json").is_file()
    again = policy_from_config(cfg)  # reuses the built base, no corpus needed
    assert all(torch.equal(a, b) for a, b in zip(pol.model.parameters(), again.model.parameters()))
    row = training_step_record("tr_1", 3, "erpo", {"loss": 0.5, "reward_mean_valid": float("nan")})
    assert row.metrics == {"loss": 0.5, "reward_mean_valid": None} and row.phase == "erpo"


def test_rl_library_does_not_import_prefect():
    import subprocess
    import sys

    code = ("import sys, autoforge.rl.trainer, autoforge.rl.synthetic, autoforge.rl.curves; "
            "sys.exit(1 if any(m.startswith('prefect') for m in sys.modules) else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_sft_lr_schedule_warms_up_then_decays_to_a_tenth(tmp_path):
    from autoforge.rl.trainer import sft_lr_at

    cfg = _cfg(tmp_path, sft_lr=1e-3, sft_warmup_frac=0.1)
    lrs = [sft_lr_at(cfg, s, 100) for s in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)  # linear warm-up over 10 steps
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))  # then monotone decay
    assert lrs[-1] == pytest.approx(1e-4)
    assert sft_lr_at(_cfg(tmp_path, sft_lr=1e-3, sft_schedule="constant"), 50, 100) == 1e-3


def test_sft_context_weight_scores_the_non_agent_tokens(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    ids = pol.tokenizer("Please update record R1 in environment 2; set status 3.")["input_ids"]
    mask = [0] * (len(ids) - 3) + [1] * 3
    with torch.no_grad():
        logp = torch.log_softmax(pol.model(torch.tensor([ids])).logits[0, :-1].float(), -1)
        nll = -logp.gather(1, torch.tensor(ids[1:])[:, None]).squeeze(1)
    m = torch.tensor(mask[1:], dtype=torch.float32)
    w = m + 0.5 * (1 - m)
    cfg = _cfg(tmp_path, sft_epochs=1, sft_batch_size=1, sft_context_weight=0.5, checkpoint_every=100)
    hist = sft(pol, [(ids, mask)], cfg)
    assert hist[0]["loss"] == pytest.approx(float((nll * w).sum() / w.sum()), rel=1e-4)


def _env_dialogues(tokenizer, n_envs: int = 2, per_env: int = 3):
    """Dialogues whose first message (a long system prompt per environment) is shared, then differ."""
    from autoforge.rl.policy import encode_dialogue

    out = []
    for e in range(n_envs):
        system = " ".join(f"tool{e}_{k} updates record R{k % 9} in environment {e}." for k in range(14))
        for i in range(per_env):
            out.append(encode_dialogue(tokenizer, [
                {"role": "system", "content": system},
                {"role": "user", "content": f"Please update record R{i} in environment {e}; set status {i % 4}."},
                {"role": "assistant", "content": "", "tool_calls": [{"name": f"tool{e}_{i}", "arguments": {"id": f"R{i}"}}]},
                {"role": "tool", "content": '{"ok": true}'},
                {"role": "assistant", "content": f"Done: R{i} has status {i % 4}."}]))
    return out


def test_shared_prefix_pass_equals_the_plain_pass(base_dir):
    """The prompt run once and its KV cache repeated: the same log-probs and gradients as one full pass per row."""
    from autoforge.rl.trainer import Trajectory, _common_prefix, _forward_logprobs, _micro_batches, _untrained_head
    from autoforge.rl.trajectory import collate

    pol = load_policy(base_dir, device="cpu")
    rows = [Trajectory("t", "e", ids, m, [0.0] * len(ids), 0.0) for ids, m in _env_dialogues(pol.tokenizer, 2, 3)]
    mbs = _micro_batches(rows, 8, share=True)
    assert sorted(len(mb) for mb, _ in mbs) == [3, 3] and all(p >= 64 for _, p in mbs)  # one per environment
    for mb, p in mbs:
        assert p == min([*(_common_prefix(mb[0].token_ids, t.token_ids) for t in mb[1:]), *map(_untrained_head, mb)])
        assert all(t.loss_mask.index(1) > p for t in mb)  # no row trains inside the prefix
    assert [len(mb) for mb, p in _micro_batches(rows, 8, share=False)] == [6]
    assert [p for _, p in _micro_batches(rows[:1] + rows[3:4], 8, share=True)] == [0]  # two environments: no prefix

    mb, p = mbs[0]
    b = collate(mb, pol.pad_id)
    results = []
    for prefix in (0, p):
        pol.model.zero_grad()
        lp, _ = _forward_logprobs(pol.model, b, 1.0, shared_prefix=prefix)
        (-(lp * b["loss_mask"][:, 1:]).sum()).backward()
        results.append(((lp * b["loss_mask"][:, 1:]).detach(), [q.grad.clone() for q in pol.model.parameters()]))
    (lp0, g0), (lp1, g1) = results
    assert lp0.abs().sum() > 0 and torch.allclose(lp0, lp1, atol=1e-5)
    for a, c in zip(g0, g1):
        assert torch.allclose(a, c, atol=1e-5, rtol=1e-4)
    with pytest.raises(ConfigError, match="inside the prefix"):
        _forward_logprobs(pol.model, b, 1.0, shared_prefix=b["input_ids"].size(1) - 2)


def test_sft_with_a_shared_prefix_follows_the_plain_run(base_dir, tmp_path):
    pol = load_policy(base_dir, device="cpu")
    data = _env_dialogues(pol.tokenizer, 2, 4)
    hists = []
    for share in (False, True):
        torch.manual_seed(0)
        p = load_policy(base_dir, device="cpu")
        cfg = _cfg(tmp_path / str(share), sft_epochs=3, sft_batch_size=8, sft_lr=1e-2, checkpoint_every=100,
                   sft_share_prefix=share)
        hists.append([h["loss"] for h in sft(p, data, cfg)])
    assert len(hists[0]) == 3 and hists[0][-1] < hists[0][0]
    assert hists[1] == pytest.approx(hists[0], rel=1e-4)



def test_two_runs_with_the_same_config_give_identical_weights(base_dir, tmp_path):
    """Seeded everything, fixed threads: SFT then ERPO twice in one process give byte-identical checkpoints
    (what lets a README quote a run's weights; across machines it also needs the same torch build and CPU kind)."""
    import hashlib

    hashes, threads = [], torch.get_num_threads()
    try:
        for run in ("a", "b"):
            pol = load_policy(base_dir, device="cpu")
            data = _env_dialogues(pol.tokenizer, 2, 4)
            cfg = _cfg(tmp_path / run, steps=1, sft_epochs=1, sft_batch_size=4, sft_lr=1e-2, torch_threads=1)
            torch.set_num_threads(1)
            res = train(pol, synthetic_tasks(), make_synthetic_rollout_fn(max_new_tokens=6), cfg, sft_examples=data)
            hashes.append(hashlib.sha256((res.last_checkpoint / "model.safetensors").read_bytes()).hexdigest())
    finally:
        torch.set_num_threads(threads)
    assert hashes[0] == hashes[1]
