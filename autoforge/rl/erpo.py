"""ERPO math: environment-level advantages and the clipped token-level policy loss.

AutoForge (arXiv 2512.22857, §3.4, Eqs. 2-4) as read in ``docs/paper_notes.md#erpo`` and
``docs/design.md#stage-7-erpo-training`` (ERPO as we implement it):

* **MEU masking** (paper): a rollout whose simulated user gave wrong information is removed
  entirely — it is in neither its task's mean, its environment's std, nor the loss.
* **Dynamic sampling** (DAPO, Yu et al. 2025; applied after masking — our default): a task
  whose valid rollouts all have the same reward, or that has fewer than 2 valid rollouts,
  is dropped.
* **Environment-level advantage** (paper Eq. 4)::

      A_ij = (R_ij - mean_j' R_ij') / (std{R_i'j' : every valid rollout j' of every kept
                                            task i' of the same environment} + eps)

  The numerator is per task, as in GRPO; only the scale is pooled over the environment's
  tasks in this batch. ``level="task"`` gives GRPO's per-task std (Eq. 3), the ablation.
  std is the population std (divide by n), as in docs/design.md#worked-example.
* **Loss** (paper Eq. 2 at token level; DAPO token-level aggregation and clip-higher):
  PPO clipped ratio per agent-generated token, averaged over all valid agent tokens of the
  whole batch, plus optional ``beta * KL(pi_theta || pi_ref)`` with the k3 estimator
  (Schulman 2020; GRPO).

Everything here is pure: lists in, lists out (advantages) or tensors in, tensors out (loss).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Hashable, Literal, Sequence

import torch

from autoforge.errors import ConfigError

AdvantageLevel = Literal["env", "task"]


@dataclass
class AdvantageResult:
    """Advantages plus the bookkeeping the trainer logs.

    ``advantages[k]`` is None when rollout k is masked (``valid`` False) or its task was
    dropped by dynamic sampling.
    """

    advantages: list[float | None]
    masked: int  # rollouts removed by MEU masking
    dropped_tasks: list[Hashable] = field(default_factory=list)  # task ids removed by dynamic sampling
    kept_tasks: list[Hashable] = field(default_factory=list)
    scale: dict[Hashable, float] = field(default_factory=dict)  # env id (level=env) or task id (level=task) -> std


def advantages_with_info(
    rewards: Sequence[float],
    task_ids: Sequence[Hashable],
    env_ids: Sequence[Hashable],
    valid: Sequence[bool] | None = None,
    level: AdvantageLevel = "env",
    eps: float = 1e-6,
    dynamic_sampling: bool = True,
) -> AdvantageResult:
    """:func:`compute_advantages` plus masked/dropped counts and the std used per group."""
    n = len(rewards)
    if not (len(task_ids) == len(env_ids) == n):
        raise ConfigError(
            f"compute_advantages: rewards ({n}), task_ids ({len(task_ids)}) and env_ids ({len(env_ids)}) "
            "must have one entry per rollout"
        )
    valid = [True] * n if valid is None else [bool(v) for v in valid]
    if len(valid) != n:
        raise ConfigError(f"compute_advantages: valid has {len(valid)} entries, expected {n} (one per rollout)")
    if level not in ("env", "task"):
        raise ConfigError(f"compute_advantages: level must be 'env' or 'task', got {level!r}")

    # A task belongs to one environment; a mismatch is a bug upstream, not something to average over.
    task_env: dict[Hashable, Hashable] = {}
    for t, e in zip(task_ids, env_ids):
        if task_env.setdefault(t, e) != e:
            raise ConfigError(f"compute_advantages: task {t!r} appears under two environments ({task_env[t]!r}, {e!r})")

    # 1. MEU masking: only valid rollouts enter any statistic.
    groups: dict[Hashable, list[int]] = defaultdict(list)  # task id -> indices of its valid rollouts
    for k in range(n):
        if not math.isfinite(float(rewards[k])) and valid[k]:
            raise ConfigError(f"compute_advantages: reward of rollout {k} is {rewards[k]!r}; mask it (valid=False) instead")
        if valid[k]:
            groups[task_ids[k]].append(k)
    masked = n - sum(valid)

    # 2. Dynamic sampling (DAPO): drop tasks with < 2 valid rollouts or no reward variance.
    kept, dropped = {}, []
    for t in dict.fromkeys(task_ids):  # first-seen order, deterministic
        idx = groups.get(t, [])
        rs = [float(rewards[k]) for k in idx]
        if dynamic_sampling and (len(rs) < 2 or max(rs) == min(rs)):
            dropped.append(t)
        elif idx:
            kept[t] = idx

    # 3. Scale: population std per environment (ERPO) or per task (GRPO).
    def pstd(xs: list[float]) -> float:
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))

    scale: dict[Hashable, float] = {}
    if level == "env":
        pooled: dict[Hashable, list[float]] = defaultdict(list)
        for t, idx in kept.items():
            pooled[task_env[t]].extend(float(rewards[k]) for k in idx)
        scale = {e: pstd(xs) for e, xs in pooled.items()}
    else:
        scale = {t: pstd([float(rewards[k]) for k in idx]) for t, idx in kept.items()}

    # 4. Advantage: per-task mean in the numerator, pooled (or per-task) std below.
    adv: list[float | None] = [None] * n
    for t, idx in kept.items():
        mean = sum(float(rewards[k]) for k in idx) / len(idx)
        sd = scale[task_env[t]] if level == "env" else scale[t]
        for k in idx:
            adv[k] = (float(rewards[k]) - mean) / (sd + eps)
    return AdvantageResult(adv, masked, dropped, list(kept), scale)


def group_drop_reasons(rewards: Sequence[float], task_ids: Sequence[Hashable], valid: Sequence[bool] | None = None
                       ) -> dict[Hashable, str]:
    """Why dynamic sampling drops each task group (tasks it keeps are absent): ``"few_valid"`` (fewer
    than 2 rollouts left after MEU masking), ``"all_right"`` (every valid rollout scored 1),
    ``"all_wrong"`` (every one scored 0) or ``"no_variance"`` (all the same partial reward)."""
    valid = [True] * len(rewards) if valid is None else list(valid)
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for r, t, v in zip(rewards, task_ids, valid):
        groups[t]  # every task appears, even one whose rollouts were all masked
        if v:
            groups[t].append(float(r))
    out: dict[Hashable, str] = {}
    for t, rs in groups.items():
        if len(rs) < 2:
            out[t] = "few_valid"
        elif max(rs) == min(rs):
            out[t] = "all_right" if rs[0] >= 1.0 else "all_wrong" if rs[0] <= 0.0 else "no_variance"
    return out


def compute_advantages(
    rewards: Sequence[float],
    task_ids: Sequence[Hashable],
    env_ids: Sequence[Hashable],
    valid: Sequence[bool] | None = None,
    level: AdvantageLevel = "env",
    eps: float = 1e-6,
    mask_user_errors: bool = True,
    dynamic_sampling: bool = True,
) -> list[float | None]:
    """One advantage per rollout; None where the rollout is masked or its task dropped.

    ``rewards[k]``, ``task_ids[k]``, ``env_ids[k]``, ``valid[k]`` describe rollout k.
    ``valid[k]`` is False when the user-error judge flagged rollout k (MEU). With
    ``mask_user_errors=False`` every rollout counts as valid (the "no masking" ablation).
    ``level="env"`` is ERPO (paper Eq. 4); ``level="task"`` is GRPO (Eq. 3).
    """
    if not mask_user_errors:
        valid = None
    return advantages_with_info(rewards, task_ids, env_ids, valid, level, eps, dynamic_sampling).advantages


# --------------------------------------------------------------------------- loss


def erpo_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    loss_mask: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    ref_logprobs: torch.Tensor | None = None,
    beta: float = 0.0,
    num_tokens: float | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO clipped objective per agent token, token-level mean over the batch (DAPO).

    Shapes (B rollouts, T target positions; position t scores token t of the rollout):
      logprobs      [B, T]  log pi_theta(token_t | prefix), with grad
      old_logprobs  [B, T]  log pi_old(token_t | prefix) recorded at rollout time (token-in/token-out)
      advantages    [B]     one advantage per rollout, broadcast to all its tokens
      loss_mask     [B, T]  1 on agent-generated tokens; 0 on prompt, tool output, user turns, padding
      ref_logprobs  [B, T]  frozen reference policy (only used when beta > 0)

    Per token: ratio r = exp(logprobs - old_logprobs);
      pg = max(-A * r, -A * clip(r, 1 - clip_low, 1 + clip_high))   (clip-higher: DAPO)
      kl = exp(ref - logprobs) - (ref - logprobs) - 1                (k3 estimator, >= 0)
    loss = sum(mask * (pg + beta * kl)) / num_tokens, where num_tokens defaults to
    mask.sum() — pass the whole batch's token count when calling this per micro-batch, so the
    summed gradients equal the token-level mean over the full batch.
    """
    if logprobs.shape != old_logprobs.shape or logprobs.shape != loss_mask.shape:
        raise ConfigError(
            f"erpo_loss: logprobs {tuple(logprobs.shape)}, old_logprobs {tuple(old_logprobs.shape)} and "
            f"loss_mask {tuple(loss_mask.shape)} must all be [B, T]"
        )
    if advantages.shape != logprobs.shape[:1]:
        raise ConfigError(f"erpo_loss: advantages must be [B]={tuple(logprobs.shape[:1])}, got {tuple(advantages.shape)}")
    mask = loss_mask.to(logprobs.dtype)
    denom = float(num_tokens) if num_tokens is not None else float(mask.sum().item())
    denom = max(denom, 1.0)  # an empty batch gives loss 0, never NaN

    adv = advantages.to(logprobs.dtype).unsqueeze(1)  # [B, 1] -> broadcast over T
    log_ratio = (logprobs - old_logprobs) * mask  # zero off-mask so exp() cannot overflow on padding
    ratio = torch.exp(log_ratio)  # [B, T]
    pg_unclipped = -adv * ratio
    pg_clipped = -adv * torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(pg_unclipped, pg_clipped)  # pessimistic bound (PPO)
    per_token = pg

    kl = None
    if beta > 0.0:
        if ref_logprobs is None:
            raise ConfigError("erpo_loss: beta > 0 needs ref_logprobs from a frozen reference policy")
        d = (ref_logprobs - logprobs) * mask
        kl = torch.exp(d) - d - 1.0  # k3: unbiased, non-negative estimate of KL(pi_theta || pi_ref)
        per_token = pg + beta * kl

    loss = (per_token * mask).sum() / denom

    with torch.no_grad():
        n_tok = mask.sum().clamp(min=1.0)
        clipped = (pg_clipped > pg_unclipped) & (mask > 0)  # tokens where the clip is the active branch
        stats = {
            "pg_loss": float((pg * mask).sum() / n_tok),
            "clip_frac": float(clipped.to(mask.dtype).sum() / n_tok),
            "ratio_mean": float((ratio * mask).sum() / n_tok),
            "approx_kl_old": float((-log_ratio * mask).sum() / n_tok),  # k1 estimate of KL(old || new)
            "kl": float((kl * mask).sum() / n_tok) if kl is not None else 0.0,
            "tokens": float(mask.sum()),
        }
    return loss, stats


def _log_softmax_f32(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """log softmax(logits / temperature) in (at least) float32. bf16/fp16 logits are upcast inside
    the softmax kernel (``dtype=``): at temperature 1 no float32 copy of the [B, T, V] logits is made."""
    dt = torch.promote_types(logits.dtype, torch.float32)
    if temperature and temperature != 1.0:
        logits = logits.to(dt) / temperature  # divide in float32: a bf16 quotient would round the logits again
    return torch.log_softmax(logits, dim=-1, dtype=dt)


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log softmax(logits / temperature) gathered at ``targets``, in float32.

    logits [B, T, V], targets [B, T] -> [B, T]. The same temperature must be used at rollout
    and at update, or the ratio is not 1 on-policy.
    """
    if logits.dtype in (torch.float32, torch.float64):  # gather - logsumexp: no [B, T, V] output at all
        if temperature and temperature != 1.0:
            logits = logits / temperature
        return torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
    return _log_softmax_f32(logits, temperature).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def token_entropy(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy of softmax(logits / temperature) per position: [B, T, V] -> [B, T]."""
    logp = _log_softmax_f32(logits, temperature)
    return -(logp.exp() * logp).sum(-1)


def token_logprobs_and_entropy(logits: torch.Tensor, targets: torch.Tensor,
                               temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`token_logprobs` (differentiable) and :func:`token_entropy` (detached) from one log-softmax pass."""
    logp = _log_softmax_f32(logits, temperature)
    lp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        d = logp.detach()
        ent = -(d.exp() * d).sum(-1)
    return lp, ent
