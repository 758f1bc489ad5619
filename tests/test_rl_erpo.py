"""ERPO math on hand-computed numbers: advantages (env vs task level, masking, dynamic sampling) and the loss."""

from __future__ import annotations

import math

import pytest
import torch

from autoforge.errors import ConfigError
from autoforge.rl.erpo import advantages_with_info, compute_advantages, erpo_loss, token_entropy, token_logprobs

# docs/design.md#worked-example. Env A: task a1 valid rewards [1,0,0,1]; task a2 [1,1,0] plus one masked rollout.
REWARDS = [1, 0, 0, 1, 1, 1, 0, 0]
TASKS = ["a1"] * 4 + ["a2"] * 4
ENVS = ["A"] * 8
VALID = [True] * 7 + [False]


def test_worked_example_env_level():
    adv = compute_advantages(REWARDS, TASKS, ENVS, VALID, level="env")
    # Pooled over the 7 valid rewards (4 ones, 3 zeros): population std = sqrt(4/7 * 3/7) = sqrt(12)/7 = 0.4949
    sd = math.sqrt(12) / 7
    assert sd == pytest.approx(0.495, abs=5e-4)
    # a1: mean 0.5 -> successes +0.5/sd = +1.0104, failures -1.0104
    assert adv[0] == pytest.approx(0.5 / sd, rel=1e-5) and adv[0] == pytest.approx(1.01, abs=5e-3)
    assert adv[1] == pytest.approx(-0.5 / sd, rel=1e-5)
    # a2: mean 2/3 -> success +(1/3)/sd = 0.6736, failure -(2/3)/sd = -1.347
    assert adv[4] == pytest.approx((1 / 3) / sd, rel=1e-5)
    assert adv[6] == pytest.approx((-2 / 3) / sd, rel=1e-5) and adv[6] == pytest.approx(-1.35, abs=5e-3)
    # the masked rollout has no advantage at all (not 0)
    assert adv[7] is None


def test_task_level_is_grpo():
    adv = compute_advantages(REWARDS, TASKS, ENVS, VALID, level="task")
    # a1: std 0.5 -> +-1.0
    assert adv[:4] == pytest.approx([1.0, -1.0, -1.0, 1.0], rel=1e-5)
    # a2 valid [1,1,0]: mean 2/3, std sqrt(2/9) = 0.4714 -> success 0.7071, failure -1.4142
    assert adv[4] == pytest.approx(math.sqrt(0.5), rel=1e-5)
    assert adv[6] == pytest.approx(-math.sqrt(2), rel=1e-5)
    assert adv[7] is None


def test_environments_are_pooled_separately():
    # Env B has one task b1 [1,0,0,0]: mean 0.25, std sqrt(.25*.75)=0.4330 (env with one task == task level)
    rewards = REWARDS + [1, 0, 0, 0]
    tasks, envs, valid = TASKS + ["b1"] * 4, ENVS + ["B"] * 4, VALID + [True] * 4
    env = compute_advantages(rewards, tasks, envs, valid, level="env")
    task = compute_advantages(rewards, tasks, envs, valid, level="task")
    assert env[8] == pytest.approx(0.75 / math.sqrt(0.1875), rel=1e-5)  # 1.732
    assert env[9] == pytest.approx(-0.25 / math.sqrt(0.1875), rel=1e-5)  # -0.577
    assert env[8:] == pytest.approx(task[8:], rel=1e-6)
    # env A's numbers are unchanged by env B's presence
    assert env[:7] == pytest.approx(compute_advantages(REWARDS, TASKS, ENVS, VALID)[:7], rel=1e-9)


def test_dropped_task_leaves_the_env_std():
    # a1 [1,0,0,1] kept; a3 [1,1,1,1] all correct -> dropped, and NOT part of env A's std.
    rewards = [1, 0, 0, 1, 1, 1, 1, 1]
    tasks = ["a1"] * 4 + ["a3"] * 4
    info = advantages_with_info(rewards, tasks, ["A"] * 8)
    # std over a1 only = 0.5 -> +-1.0 (had a3 been pooled: std 0.433 -> 1.155)
    assert info.advantages[:4] == pytest.approx([1.0, -1.0, -1.0, 1.0], rel=1e-5)
    assert info.advantages[4:] == [None] * 4
    assert info.dropped_tasks == ["a3"] and info.kept_tasks == ["a1"]
    assert info.scale["A"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "rewards,valid,why",
    [
        ([1, 0, 1, 0], [False] * 4, "all masked"),
        ([1, 0, 1, 0], [True, False, False, False], "a single valid rollout"),
        ([0, 0, 1, 1], [True, True, False, False], "valid rollouts all equal after masking"),
        ([0, 0, 0, 0], [True] * 4, "all wrong"),
    ],
)
def test_dynamic_sampling_edge_cases(rewards, valid, why):
    info = advantages_with_info(rewards, ["t"] * 4, ["E"] * 4, valid)
    assert info.advantages == [None] * 4, why
    assert info.dropped_tasks == ["t"]
    assert info.masked == 4 - sum(valid)


def test_no_masking_ablation_uses_every_rollout():
    # Unmasked, a2 is [1,1,0,0]: mean 0.5; pooled over 8 rewards (4 ones) std 0.5 -> everything +-1
    adv = compute_advantages(REWARDS, TASKS, ENVS, VALID, mask_user_errors=False)
    assert adv == pytest.approx([1, -1, -1, 1, 1, 1, -1, -1], rel=1e-5)


def test_dynamic_sampling_off_keeps_uniform_tasks_in_the_std():
    rewards = [1, 0, 0, 1, 1, 1, 1, 1]
    tasks = ["a1"] * 4 + ["a3"] * 4
    adv = compute_advantages(rewards, tasks, ["A"] * 8, dynamic_sampling=False)
    sd = math.sqrt(0.75 * 0.25)  # 6 ones of 8
    assert adv[0] == pytest.approx(0.5 / sd, rel=1e-5)
    assert adv[4:] == pytest.approx([0.0] * 4, abs=1e-9)


def test_bad_inputs_fail_loudly():
    with pytest.raises(ConfigError, match="one entry per rollout"):
        compute_advantages([1, 0], ["t"], ["E", "E"])
    with pytest.raises(ConfigError, match="two environments"):
        compute_advantages([1, 0], ["t", "t"], ["E", "F"])
    with pytest.raises(ConfigError, match="level"):
        compute_advantages([1, 0], ["t", "t"], ["E", "E"], level="batch")
    with pytest.raises(ConfigError, match="mask it"):
        compute_advantages([float("nan"), 0], ["t", "t"], ["E", "E"])


# --------------------------------------------------------------------------- loss


def _loss_example(clip_high=0.28):
    # old log-probs 0, new log-probs log(r): ratio r exactly.
    ratios = torch.tensor([[1.0, 1.5, 0.5], [0.5, 1.1, 2.0]])
    lp = torch.log(ratios).requires_grad_(True)
    old = torch.zeros_like(lp)
    adv = torch.tensor([1.0, -2.0])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    loss, stats = erpo_loss(lp, old, adv, mask, clip_low=0.2, clip_high=clip_high)
    return lp, loss, stats


def test_loss_hand_example_token_level():
    lp, loss, stats = _loss_example()
    # Row 0 (A=+1): r=1 -> -1; r=1.5 -> max(-1.5, -1.28) = -1.28 (clipped); third token masked.
    # Row 1 (A=-2): r=0.5 -> max(1.0, 2*0.8=1.6) = 1.6 (clipped); r=1.1 -> 2.2; r=2.0 -> max(4.0, 2.56) = 4.0.
    # Token-level mean over the 5 valid tokens: (-1 - 1.28 + 1.6 + 2.2 + 4.0) / 5 = 1.104
    # (a per-sequence mean, GRPO style, would give ((-2.28/2) + (7.8/3)) / 2 = 0.73)
    assert loss.item() == pytest.approx(1.104, abs=1e-5)
    assert stats["clip_frac"] == pytest.approx(2 / 5)
    assert stats["tokens"] == 5
    loss.backward()
    # d/d lp of -A*r is -A*r; zero where the clipped branch is active, zero off-mask; divided by 5 tokens.
    expected = torch.tensor([[-1.0 * 1.0 / 5, 0.0, 0.0], [0.0, 2.0 * 1.1 / 5, 2.0 * 2.0 / 5]])
    assert torch.allclose(lp.grad, expected, atol=1e-6)


def test_loss_symmetric_clip_and_normaliser():
    _, loss, _ = _loss_example(clip_high=0.2)
    assert loss.item() == pytest.approx((-1 - 1.2 + 1.6 + 2.2 + 4.0) / 5, abs=1e-5)
    ratios = torch.tensor([[1.0, 1.5, 0.5], [0.5, 1.1, 2.0]])
    lp = torch.log(ratios)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    half, _ = erpo_loss(lp, torch.zeros_like(lp), torch.tensor([1.0, -2.0]), mask, num_tokens=10)
    assert half.item() == pytest.approx(1.104 / 2, abs=1e-5)  # micro-batches divide by the whole batch's tokens


def test_loss_on_policy_and_kl():
    lp = torch.zeros(1, 2, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0]])
    loss, stats = erpo_loss(lp, lp.detach(), torch.tensor([0.5]), mask)
    assert loss.item() == pytest.approx(-0.5) and stats["clip_frac"] == 0 and stats["kl"] == 0
    # k3 KL: ref = log 2 above the policy -> exp(d) - d - 1 = 2 - ln2 - 1 = 0.3069 per token
    ref = torch.full((1, 2), math.log(2.0))
    loss_kl, stats = erpo_loss(lp, lp.detach(), torch.tensor([0.0]), mask, ref_logprobs=ref, beta=0.1)
    assert stats["kl"] == pytest.approx(1 - math.log(2), abs=1e-6)
    assert loss_kl.item() == pytest.approx(0.1 * (1 - math.log(2)), abs=1e-6)
    with pytest.raises(ConfigError, match="ref_logprobs"):
        erpo_loss(lp, lp.detach(), torch.tensor([0.0]), mask, beta=0.1)
    with pytest.raises(ConfigError, match="advantages"):
        erpo_loss(lp, lp.detach(), torch.tensor([0.0, 1.0]), mask)


def test_empty_mask_gives_zero_not_nan():
    lp = torch.zeros(1, 3, requires_grad=True)
    loss, _ = erpo_loss(lp, lp.detach(), torch.tensor([1.0]), torch.zeros(1, 3))
    assert loss.item() == 0.0


def test_token_logprobs_and_entropy():
    logits = torch.tensor([[[0.0, math.log(3.0)]]])  # p = [0.25, 0.75]
    assert float(token_logprobs(logits, torch.tensor([[1]]))) == pytest.approx(math.log(0.75))
    h = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert float(token_entropy(logits)) == pytest.approx(h, rel=1e-5)
    # temperature 2: logits halved -> p ∝ [1, sqrt 3]
    p1 = math.sqrt(3) / (1 + math.sqrt(3))
    assert float(token_logprobs(logits, torch.tensor([[1]]), temperature=2.0)) == pytest.approx(math.log(p1), rel=1e-5)


def test_logprobs_from_bf16_logits_are_float32_and_match_one_pass_entropy():
    from autoforge.rl.erpo import token_logprobs_and_entropy

    g = torch.Generator().manual_seed(0)
    logits32 = torch.randn(3, 7, 50, generator=g) * 3
    targets = torch.randint(0, 50, (3, 7), generator=g)
    for temp in (1.0, 0.7):
        ref = token_logprobs(logits32.double(), targets, temp)
        bf = logits32.bfloat16().requires_grad_()
        lp = token_logprobs(bf, targets, temp)
        assert lp.dtype == torch.float32  # upcast inside the softmax, not rounded back to bf16
        assert torch.allclose(lp.double(), token_logprobs(bf.detach().double(), targets, temp), atol=1e-5)
        assert torch.allclose(lp.double(), ref, atol=0.1)  # only the bf16 rounding of the logits themselves
        lp.sum().backward()
        assert bf.grad is not None and torch.isfinite(bf.grad.float()).all()
        lp2, ent = token_logprobs_and_entropy(logits32, targets, temp)
        assert torch.allclose(lp2, token_logprobs(logits32, targets, temp), atol=1e-5)
        assert torch.allclose(ent, token_entropy(logits32, temp), atol=1e-5) and not ent.requires_grad
