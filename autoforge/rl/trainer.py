"""The training loop: SFT cold start, then ERPO. Read top to bottom.

    for each ERPO step:
        sample tasks -> rollout_fn (the episode engine) -> rewards + judge verdicts
        -> refill: more tasks until the batch has enough groups with mixed rewards  refill_groups
        -> advantages (MEU masking, dynamic sampling, env-level std)       erpo.advantages_with_info
        -> loss on the exact token ids the policy generated                 erpo.erpo_loss
        -> AdamW step with gradient clipping -> log_fn -> checkpoint

``rollout_fn(policy, tasks, n_per_task) -> list[Trajectory]`` is the plug-in point for the
episode engine (autoforge.rollout); ``log_fn(step, phase, metrics)`` is where the driver
hands TrainingStep rows over to be stored. Nothing here knows about the warehouse or Prefect.
"""

from __future__ import annotations

import copy
import inspect
import math
import random
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from autoforge.errors import ConfigError
from autoforge.rl import checkpoint as ckpt
from autoforge.rl.config import TrainConfig
from autoforge.rl.erpo import advantages_with_info, erpo_loss, group_drop_reasons, token_logprobs, token_logprobs_and_entropy
from autoforge.rl.policy import Policy, build_tiny_policy, load_model, load_policy
from autoforge.rl.trajectory import Trajectory, collate

RolloutFn = Callable[[Policy, Sequence[Any], int], list[Trajectory]]
LogFn = Callable[[int, str, dict], None]


@dataclass
class TrainResult:
    history: list[dict] = field(default_factory=list)  # one row per optimizer step: {"phase", "step", metrics...}
    last_checkpoint: Path | None = None
    resumed_from: Path | None = None
    cleaned: list[str] = field(default_factory=list)  # what a killed save had left in checkpoint_dir (clean_staging)


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _step_seed(seed: int, phase: str, step: int) -> int:
    """A seed per (run seed, phase, step): a resumed run samples the same tasks and tokens."""
    return (seed * 1_000_003 + {"sft": 17, "erpo": 31}[phase] * 7919 + step) % (2**31 - 1)


def make_optimizer(model, lr: float, cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    fused = bool(params) and all(p.is_cuda and p.is_floating_point() for p in params)  # one kernel for all tensors
    return torch.optim.AdamW(params, lr=lr, betas=tuple(cfg.adam_betas), weight_decay=cfg.weight_decay,
                             **({"fused": True} if fused else {}))


def _chunks(xs: Sequence, n: int):
    for i in range(0, len(xs), n):
        yield xs[i:i + n]


def _forward_logprobs(model, batch: dict, temperature: float, want_entropy: bool = False, all_positions: bool = False,
                      shared_prefix: int = 0):
    """Log-probs of each token given its prefix.

    batch["input_ids"] [B, L] -> logprobs [B, L-1] (position t scores token t+1), entropy [B, L-1] or None.
    Logits are only materialised from the first position any row trains on (``logits_to_keep``):
    the prompt's [B, P, V] logits are never needed, which matters with 150k-token vocabularies.
    Positions before it are returned as 0 (the loss mask is 0 there).

    ``shared_prefix`` = P > 0: every row starts with the same P tokens (one environment's system
    prompt and tool list) and no row trains on them (:func:`_untrained_head`). The prefix is run
    once, as one row, with grad; its KV cache is repeated over the B rows and the B suffixes run on
    it. Same log-probs and gradient as the plain pass (float order aside; a test compares them),
    for (P + B(L-P)) / BL of the tokens (:func:`_micro_batches` chooses the groups).
    """
    ids = batch["input_ids"]
    L = ids.size(1)
    cols = torch.nonzero(batch["loss_mask"][:, 1:].sum(0)).flatten()
    first = int(cols[0]) if len(cols) and not all_positions else 0  # first target column (in [0, L-1)) any row trains on
    params = inspect.signature(model.forward).parameters
    kw = {"logits_to_keep": L - first} if "logits_to_keep" in params else {}
    if shared_prefix > 0:
        if not kw or all_positions or first < shared_prefix:
            raise ConfigError(f"shared_prefix {shared_prefix}: rows train from column {first}, inside the prefix "
                              "(or the model cannot keep only some logits); run without a shared prefix")
        logits = _suffix_logits(model, ids, batch["attention_mask"], shared_prefix, L - first)  # [B, L-first, V]
    else:
        # use_cache=False: a training pass needs no KV cache (building one costs copies on every layer)
        logits = model(input_ids=ids, attention_mask=batch["attention_mask"], use_cache=False, **kw).logits  # [B, L-first, V]
    logits = logits[:, -(L - first):-1] if kw else logits[:, first:-1]  # [B, L-1-first, V]: scores tokens first+1..L-1
    if want_entropy:  # one log-softmax pass for both
        lp, ent = token_logprobs_and_entropy(logits, ids[:, first + 1:], temperature)
    else:
        lp, ent = token_logprobs(logits, ids[:, first + 1:], temperature), None
    if first:  # left-pad back to [B, L-1] so positions line up with the masks
        lp = torch.cat([lp.new_zeros(lp.size(0), first), lp], dim=1)
        ent = torch.cat([ent.new_zeros(ent.size(0), first), ent], dim=1) if ent is not None else None
    return lp, ent


def _suffix_logits(model, ids: torch.Tensor, attention_mask: torch.Tensor, P: int, keep: int) -> torch.Tensor:
    """The last ``keep`` positions' logits of rows that share their first ``P`` tokens: the prefix
    runs once as one row (with grad), its KV cache is repeated over the rows, the suffixes run on it."""
    from autoforge.rl.trajectory import _cache_kwarg

    B, L = ids.shape
    cache_kw = _cache_kwarg(model)
    out = model(input_ids=ids[:1, :P], use_cache=True, logits_to_keep=1)
    cache = getattr(out, cache_kw)
    cache.batch_repeat_interleave(B)  # [1, H, P, D] -> [B, H, P, D] on every layer; grad flows back to the one row
    positions = torch.arange(P, L, device=ids.device).unsqueeze(0).expand(B, -1)
    return model(input_ids=ids[:, P:], attention_mask=attention_mask, position_ids=positions, use_cache=False,
                 logits_to_keep=min(keep, L - P), **{cache_kw: cache}).logits


MIN_SHARED_PREFIX = 64  # tokens: below this a shared first pass costs more than it saves


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _untrained_head(t: Trajectory) -> int:
    """How many leading tokens a shared prefix of ``t`` may cover: a row's first trained token at t
    is scored by position t-1, which must lie after the prefix (P <= t-1), and every row keeps a suffix."""
    first = t.loss_mask.index(1) if 1 in t.loss_mask else len(t.loss_mask)
    return max(0, min(first - 1, len(t.token_ids) - 1))


def _micro_batches(trajs: Sequence[Trajectory], size: int, share: bool) -> list[tuple[list[Trajectory], int]]:
    """``(micro-batch, shared prefix length)`` for one optimizer step, at most ``size`` rows each.

    Plain plan: rows by length, cut into micro-batches of similar length (less padding). With
    ``share``, rows ordered by their tokens (rows of one environment, with the same system prompt and
    tool list, sit together) are also cut into runs that each run their shared prefix once, choosing
    the cuts that cost the fewest token positions (P + rows x (longest - P) per micro-batch, by
    dynamic programming; in token order a run's shared prefix is the least of its neighbours'); the
    cheaper of the two plans is used."""
    by_len = sorted(trajs, key=lambda t: len(t.token_ids))  # stable: the order of the batch within a length
    plain = [(list(mb), 0) for mb in _chunks(by_len, size)]
    if not share or len(trajs) < 2:
        return plain
    rows = sorted(trajs, key=lambda t: t.token_ids)
    n = len(rows)
    heads = [_untrained_head(t) for t in rows]
    nbr = [_common_prefix(rows[k].token_ids, rows[k + 1].token_ids) for k in range(n - 1)]

    def prefix(i: int, j: int) -> int:  # rows[i:j]
        if j - i < 2:
            return 0
        p = min(min(nbr[i:j - 1]), min(heads[i:j]))
        return p if p >= MIN_SHARED_PREFIX else 0

    best, cut = [0] + [math.inf] * n, [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(max(0, j - size), j):
            p, longest = prefix(i, j), max(len(t.token_ids) for t in rows[i:j])
            cost = best[i] + p + (j - i) * (longest - p)
            if cost < best[j]:
                best[j], cut[j] = cost, i
    shared, j = [], n
    while j > 0:
        shared.append((rows[cut[j]:j], prefix(cut[j], j)))
        j = cut[j]
    plain_cost = sum(len(mb) * max(len(t.token_ids) for t in mb) for mb, _ in plain)
    return shared[::-1] if best[n] < plain_cost else plain


# --------------------------------------------------------------------------- SFT cold start


def _as_example(x) -> tuple[list[int], list[int]]:
    if isinstance(x, Trajectory):
        return x.token_ids, x.loss_mask
    ids, mask = x
    if len(ids) != len(mask):
        raise ConfigError(f"SFT example: {len(ids)} token ids but {len(mask)} mask entries")
    return list(ids), list(mask)


def sft_lr_at(cfg: TrainConfig, step: int, total: int) -> float:
    """SFT learning rate at optimizer step ``step`` (0-based) of ``total`` (a function of the step: resumable)."""
    if cfg.sft_schedule == "constant" or total <= 1:
        return cfg.sft_lr
    warm = int(round(cfg.sft_warmup_frac * total))
    if step < warm:
        return cfg.sft_lr * (step + 1) / warm
    frac = (step - warm) / max(1, total - warm - 1)
    return cfg.sft_lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def sft(policy: Policy, examples: Sequence, cfg: TrainConfig, log_fn: LogFn | None = None,
        history: list[dict] | None = None, resume_state: dict | None = None) -> list[dict]:
    """Supervised cold start: next-token cross-entropy on masked-in (agent) tokens only.

    ``examples``: Trajectory objects or ``(token_ids, loss_mask)`` pairs (gold replays rendered
    with :func:`autoforge.rl.policy.encode_dialogue`, successful rollouts). Loss = mean over all
    masked-in tokens of the optimizer step's batch. Checkpoints as phase "sft".
    """
    model, history = policy.model, history if history is not None else []
    if getattr(examples, "lazy", False):  # generated on demand (warmup.RecallExamples): every one trains
        data = examples
    else:
        data = [_as_example(x) for x in examples]
        data = [d for d in data if sum(d[1][1:]) > 0]
    if not data or cfg.sft_epochs == 0:
        return history
    per_epoch = math.ceil(len(data) / cfg.sft_batch_size)
    total = per_epoch * cfg.sft_epochs
    opt = make_optimizer(model, cfg.sft_lr, cfg)
    start = 0
    if resume_state is not None:
        ckpt.restore_optimizer(opt, resume_state["optimizer"], resume_state.get("source"))
        start = resume_state["step"]
    model.train()
    order_epoch, order = -1, []
    for step in range(start, total):
        t0 = time.perf_counter()
        lr = sft_lr_at(cfg, step, total)
        for g in opt.param_groups:
            g["lr"] = lr
        epoch, i = divmod(step, per_epoch)
        if order_epoch != epoch:  # shuffled once per epoch, from the epoch's seed: the same order on resume
            order_epoch, order = epoch, list(range(len(data)))
            random.Random(_step_seed(cfg.seed, "sft", epoch)).shuffle(order)
        batch_ex = [data[j] for j in order[i * cfg.sft_batch_size:(i + 1) * cfg.sft_batch_size]]
        trajs = [Trajectory("sft", "sft", ids, m, [0.0] * len(ids), 0.0) for ids, m in batch_ex]
        w_ctx = cfg.sft_context_weight
        n_tok = sum(sum(t.loss_mask[1:]) for t in trajs)
        norm = n_tok + w_ctx * sum(len(t.loss_mask) - 1 - sum(t.loss_mask[1:]) for t in trajs)
        opt.zero_grad(set_to_none=True)
        loss_sum, seq_tokens = 0.0, 0
        # rows of one environment run their shared prompt once; the rest by length (less padding)
        for mb, prefix in _micro_batches(trajs, cfg.micro_batch_size, share=w_ctx == 0 and cfg.sft_share_prefix):
            b = collate(mb, policy.pad_id, device=policy.device)
            lp, _ = _forward_logprobs(model, b, 1.0, all_positions=w_ctx > 0, shared_prefix=prefix)  # [b, L-1]
            mask = b["loss_mask"][:, 1:]  # the label of position t is token t+1: mask of the target token
            weight = mask + w_ctx * (1 - mask) * b["attention_mask"][:, 1:].float()
            loss = -(lp * weight).sum() / norm  # token-level mean over the whole step's batch
            loss.backward()
            loss_sum += loss.item()
            seq_tokens += int(b["attention_mask"].sum())
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
        opt.step()
        dt = time.perf_counter() - t0
        metrics = {"loss": loss_sum, "grad_norm": grad_norm, "tokens": n_tok, "tokens_per_s": seq_tokens / dt,
                   "epoch": epoch, "lr": lr, "step_s": dt}
        history.append({"phase": "sft", "step": step + 1, **metrics})
        if log_fn:
            log_fn(step + 1, "sft", metrics)
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == total:
            ckpt.save_checkpoint(cfg.checkpoint_dir, "sft", step + 1, model, policy.tokenizer, opt,
                                 cfg.model_dump(mode="json"), history, sft_done=step + 1 == total,
                                 keep=cfg.keep_checkpoints)
    return history


def copy_warmup(policy: Policy, cfg: TrainConfig, log_fn: LogFn | None = None) -> list[dict]:
    """The copy warm-up (:mod:`autoforge.rl.warmup`) before SFT; returns its history.

    ``cfg.copy_warmup_steps`` steps of ``cfg.copy_warmup_batch_size`` recall dialogues, trained like
    SFT (agent tokens only, ``sft_lr`` with its schedule), checkpointed under
    ``<checkpoint_dir>/warmup``. Skipped when the run already has a checkpoint (its weights
    include the warm-up); a finished warm-up is loaded, an interrupted one resumes.
    """
    from autoforge.rl.warmup import recall_examples

    if cfg.copy_warmup_steps <= 0 or ckpt.latest_checkpoint(cfg.checkpoint_dir) is not None:
        return []
    wdir = Path(cfg.checkpoint_dir) / "warmup"
    ckpt.clean_staging(wdir)
    wcfg = cfg.model_copy(update={"sft_epochs": 1, "sft_batch_size": cfg.copy_warmup_batch_size,
                                  "checkpoint_dir": str(wdir), "sft_context_weight": 0.0})
    state, last = None, ckpt.latest_checkpoint(wdir)
    if last is not None:
        state = ckpt.load_trainer_state(last)
        ckpt.load_weights(last, policy.model)
        if state["sft_done"]:
            return list(state["history"])
    examples = recall_examples(policy.tokenizer, cfg.copy_warmup_steps * cfg.copy_warmup_batch_size, cfg.seed)
    return sft(policy, examples, wcfg, log_fn, list(state["history"]) if state else [], resume_state=state)


# --------------------------------------------------------------------------- ERPO


def erpo_update(policy: Policy, trajs: Sequence[Trajectory], advantages: Sequence[float], optimizer,
                cfg: TrainConfig, ref_model=None) -> dict[str, float]:
    """``updates_per_batch`` optimizer steps of the clipped token-level loss on kept rollouts."""
    model = policy.model
    total_tok = sum(t.n_generated for t in trajs)  # DAPO: normalise by ALL agent tokens in the batch
    mbs = [(list(t), list(a)) for t, a in zip(_chunks(list(trajs), cfg.micro_batch_size),
                                              _chunks(list(advantages), cfg.micro_batch_size))]
    batches = [collate(t, policy.pad_id, a, device=policy.device) for t, a in mbs]

    with torch.no_grad():
        for b in batches:
            if cfg.recompute_old_logprobs:  # pi_old = weights before this update, on the same token ids
                b["old_logprobs"][:, 1:] = _forward_logprobs(model, b, cfg.temperature)[0] * b["loss_mask"][:, 1:]
            if cfg.beta > 0:
                b["ref_logprobs"] = _forward_logprobs(ref_model, b, cfg.temperature)[0]

    agg: dict[str, float] = defaultdict(float)
    seq_tokens = 0
    t0 = time.perf_counter()
    model.train()
    for u in range(cfg.updates_per_batch):
        optimizer.zero_grad(set_to_none=True)
        for b in batches:
            lp, ent = _forward_logprobs(model, b, cfg.temperature, want_entropy=(u == 0))  # [b, L-1]
            mask = b["loss_mask"][:, 1:]  # target token t+1 is trained iff the policy generated it
            loss, st = erpo_loss(lp, b["old_logprobs"][:, 1:], b["advantages"], mask, cfg.clip_eps_low,
                                 cfg.clip_eps_high, b.get("ref_logprobs"), cfg.beta, num_tokens=total_tok)
            loss.backward()
            seq_tokens += int(b["attention_mask"].sum())
            if u == 0:  # statistics of the first pass: the policy that produced the rollouts
                w = st["tokens"]
                agg["loss"] += loss.item()
                for k in ("pg_loss", "clip_frac", "ratio_mean", "approx_kl_old", "kl"):
                    agg[k] += st[k] * w / max(total_tok, 1)
                agg["entropy"] += float((ent * mask).sum()) / max(total_tok, 1)
        agg["grad_norm"] = float(torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_grad_norm))
        optimizer.step()
    dt = time.perf_counter() - t0
    agg.update(update_s=dt, trained_tokens=total_tok, tokens_per_s=seq_tokens / max(dt, 1e-9))
    return dict(agg)


def _json_safe(metrics: dict) -> dict:
    """NaN/inf -> None so a metrics dict stores as JSON (TrainingStep.metrics)."""
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in metrics.items()}


def _reward_metrics(trajs: Sequence[Trajectory]) -> dict[str, float]:
    by_env: dict[str, list[float]] = defaultdict(list)
    for t in trajs:
        by_env[t.env_id].append(t.reward)
    valid = [t.reward for t in trajs if t.valid]
    out = {"reward_mean": sum(t.reward for t in trajs) / len(trajs),
           "reward_mean_valid": sum(valid) / len(valid) if valid else float("nan")}
    out.update({f"reward/{e}": sum(r) / len(r) for e, r in sorted(by_env.items())})
    return out


def sample_tasks(tasks: Sequence[Any], k: int, seed: int, env_weights: dict[str, float] | None = None) -> list[Any]:
    """The ``k`` tasks of one ERPO step (deterministic in ``seed``).

    Without ``env_weights``: a uniform sample without replacement (each environment in
    proportion to its task count). With them (TrainConfig.env_weights, keys = env ids): each
    task weighs ``w_env / n_env`` so an environment's expected share of the batch is in
    proportion to its weight (an environment missing from the mapping weighs 1, weight 0 leaves
    it out); weighted sampling without replacement by Efraimidis-Spirakis keys ``u ** (1 / w)``.
    """
    tasks = list(tasks)
    if not env_weights:
        return random.Random(seed).sample(tasks, min(k, len(tasks)))
    env_of = lambda t: t["env_id"] if isinstance(t, dict) else t.env_id  # noqa: E731
    count: dict[str, int] = defaultdict(int)
    for t in tasks:
        count[env_of(t)] += 1
    rng = random.Random(seed)
    keyed = []
    for i, t in enumerate(tasks):
        w = float(env_weights.get(env_of(t), 1.0)) / count[env_of(t)]
        u = rng.random()
        if w > 0:
            keyed.append((u ** (1.0 / w), i))
    keyed.sort(reverse=True)
    return [tasks[i] for _, i in keyed[:k]]


def env_group_metrics(trajs: Sequence[Trajectory], info, cfg: TrainConfig) -> dict[str, float]:
    """Per-environment bookkeeping of one ERPO step: the advantage scale (the std that divided the
    advantages: the pooled std for level env, the mean of the kept tasks' stds for level task),
    the rollouts masked (judge-flagged, when masking is on) and the share of tasks dropped."""
    env_of_task = {t.task_id: t.env_id for t in trajs}
    out: dict[str, float] = {}
    for env in sorted(set(env_of_task.values())):
        tasks = [tid for tid, e in env_of_task.items() if e == env]
        kept = [tid for tid in info.kept_tasks if env_of_task.get(tid) == env]
        if cfg.advantage_level == "env":
            scale = info.scale.get(env)
        else:
            stds = [info.scale[tid] for tid in kept if tid in info.scale]
            scale = sum(stds) / len(stds) if stds else None
        if scale is not None:
            out[f"adv_scale/{env}"] = scale
        rolls = [t for t in trajs if t.env_id == env]
        out[f"masked_frac/{env}"] = (sum(not t.valid for t in rolls) / len(rolls)) if cfg.mask_user_errors else 0.0
        out[f"dropped_frac/{env}"] = 1.0 - len(kept) / len(tasks)
    return out


def rollout_env_metrics(trajs: Sequence[Trajectory], ref_model, policy: Policy, cfg: TrainConfig) -> dict[str, float]:
    """Per environment, over every rollout of the step (kept or not, so a step without an update still
    draws its points): ``pass/<env>`` (share of rollouts with reward 1), ``entropy/<env>`` (mean
    surprisal -log pi(token) of the sampled tokens: the Monte Carlo estimate of the per-token entropy
    of the sampling policy) and, with ``ref_model``, ``kl_ref/<env>`` (per-token KL(pi || pi_ref) to the
    policy at the start of ERPO, k3 estimator on the sampled tokens) and their all-environment means
    ``pass_rate``, ``entropy_sampled``, ``kl_ref``."""
    by_env: dict[str, list[Trajectory]] = defaultdict(list)
    for t in trajs:
        by_env[t.env_id].append(t)
    out: dict[str, float] = {}
    tok = {e: sum(t.n_generated for t in ts) for e, ts in by_env.items()}
    for e, ts in sorted(by_env.items()):
        out[f"pass/{e}"] = sum(t.reward >= 1.0 for t in ts) / len(ts)
        if tok[e]:
            out[f"entropy/{e}"] = -sum(lp for t in ts for lp, m in zip(t.old_logprobs, t.loss_mask) if m) / tok[e]
    out["pass_rate"] = sum(t.reward >= 1.0 for t in trajs) / max(1, len(trajs))
    total = sum(tok.values())
    if total:
        out["entropy_sampled"] = sum(out.get(f"entropy/{e}", 0.0) * tok[e] for e in by_env) / total
    if ref_model is None or not total:
        return out
    kl_sum: dict[str, float] = defaultdict(float)
    with torch.no_grad():
        for chunk in _chunks([t for t in trajs if t.n_generated], cfg.micro_batch_size):
            b = collate(chunk, policy.pad_id, device=policy.device)
            ref = _forward_logprobs(ref_model, b, cfg.temperature)[0]
            cur, mask = b["old_logprobs"][:, 1:], b["loss_mask"][:, 1:]
            d = (ref - cur) * mask  # log pi_ref - log pi on the sampled tokens
            k3 = (torch.exp(d) - d - 1.0) * mask
            for row, t in zip(k3.sum(1).tolist(), chunk):
                kl_sum[t.env_id] += row
    for e in by_env:
        if tok[e]:
            out[f"kl_ref/{e}"] = kl_sum[e] / tok[e]
    out["kl_ref"] = sum(kl_sum.values()) / total
    return out


def train_erpo(policy: Policy, tasks: Sequence[Any], rollout_fn: RolloutFn, cfg: TrainConfig,
               log_fn: LogFn | None = None, history: list[dict] | None = None,
               resume_state: dict | None = None, sft_done: bool = True, ref_model=None,
               env_weights: dict[str, float] | None = None) -> list[dict]:
    """``cfg.steps`` ERPO steps. ``tasks`` are whatever ``rollout_fn`` understands (Task records).
    ``env_weights`` (env id -> weight) overrides ``cfg.env_weights`` (the driver resolves names to ids)."""
    if not tasks:
        raise ConfigError("train_erpo: no tasks to train on; make curated tasks first (autoforge factory)")
    model, history = policy.model, history if history is not None else []
    opt = make_optimizer(model, cfg.lr, cfg)
    start = 0
    if resume_state is not None:
        ckpt.restore_optimizer(opt, resume_state["optimizer"], resume_state.get("source"))
        start = resume_state["step"]
    if (cfg.beta > 0 or cfg.log_reference_kl) and ref_model is None:
        ref_model = _reference_model(policy, cfg)

    for step in range(start, cfg.steps):
        t0 = time.perf_counter()
        seed = _step_seed(cfg.seed, "erpo", step)
        # 1. sample: tasks for this step (deterministic per step, so a resumed run picks the same ones)
        weights = env_weights if env_weights is not None else cfg.env_weights
        batch_tasks = sample_tasks(tasks, cfg.tasks_per_batch, seed, weights)
        torch.manual_seed(seed)
        trajs = rollout_fn(policy, batch_tasks, cfg.rollouts_per_task)
        if not trajs:
            raise ConfigError(f"rollout_fn returned no trajectories at ERPO step {step + 1}")
        # 1b. dynamic sampling refill: more tasks until tasks_per_batch groups have mixed rewards (capped)
        trajs, refill = refill_groups(policy, tasks, trajs, rollout_fn, cfg, seed, weights)
        t_roll = time.perf_counter() - t0

        # 2. score: rewards come with the trajectories; MEU verdicts in .valid (ignored if masking is off)
        valid = [t.valid for t in trajs] if cfg.mask_user_errors else [True] * len(trajs)

        # 3. advantages: masking -> dynamic sampling -> per-task mean / env-level (or task-level) std
        info = advantages_with_info([t.reward for t in trajs], [t.task_id for t in trajs], [t.env_id for t in trajs],
                                    valid, cfg.advantage_level, cfg.adv_eps, cfg.dynamic_sampling)
        kept = [(t, a) for t, a in zip(trajs, info.advantages) if a is not None and t.n_generated > 0]

        metrics = _reward_metrics(trajs)
        metrics.update(n_rollouts=len(trajs), n_tasks=len({t.task_id for t in trajs}),
                       masked_frac=info.masked / len(trajs) if cfg.mask_user_errors else 0.0,
                       judge_flagged_frac=sum(not t.valid for t in trajs) / len(trajs),
                       dropped_tasks=len(info.dropped_tasks), kept_rollouts=len(kept),
                       dropped_frac=len(info.dropped_tasks) / max(1, len({t.task_id for t in trajs})),
                       gen_tokens=sum(t.n_generated for t in trajs), rollout_s=t_roll, lr=cfg.lr,
                       kept_groups=len(info.kept_tasks), **refill)
        if cfg.dynamic_sampling:
            reasons = group_drop_reasons([t.reward for t in trajs], [t.task_id for t in trajs], valid)
            for why in ("all_right", "all_wrong", "few_valid", "no_variance"):
                metrics[f"dropped/{why}"] = sum(r == why for r in reasons.values())
        metrics.update(env_group_metrics(trajs, info, cfg))
        metrics.update(rollout_env_metrics(trajs, ref_model if cfg.log_reference_kl else None, policy, cfg))

        # 4-5. loss on the exact generated token ids, AdamW step (skipped when nothing survives filtering)
        if kept:
            metrics.update(erpo_update(policy, [t for t, _ in kept], [a for _, a in kept], opt, cfg, ref_model))
        else:
            metrics.update(skipped=1.0)
        metrics["step_s"] = time.perf_counter() - t0

        # 6. log and checkpoint
        metrics = _json_safe(metrics)
        history.append({"phase": "erpo", "step": step + 1, **metrics})
        if log_fn:
            log_fn(step + 1, "erpo", metrics)
        if (step + 1) % cfg.checkpoint_every == 0 or step + 1 == cfg.steps:
            ckpt.save_checkpoint(cfg.checkpoint_dir, "erpo", step + 1, model, policy.tokenizer, opt,
                                 cfg.model_dump(mode="json"), history, sft_done=sft_done, keep=cfg.keep_checkpoints)
    return history


def refill_groups(policy: Policy, tasks: Sequence[Any], trajs: list[Trajectory], rollout_fn: RolloutFn,
                  cfg: TrainConfig, seed: int, env_weights: dict[str, float] | None = None
                  ) -> tuple[list[Trajectory], dict[str, int]]:
    """DAPO-style dynamic sampling: while fewer than ``cfg.tasks_per_batch`` task groups of ``trajs``
    have mixed rewards (after MEU masking), roll out tasks not yet tried this step, twice the groups
    missing at a time, until ``cfg.refill_max_rollouts`` x the base rollouts were added or no task is
    left. Deterministic in ``seed``. Returns the grown list and ``{"refill_rounds", "extra_rollouts"}``."""
    base = cfg.tasks_per_batch * cfg.rollouts_per_task
    cap = int(cfg.refill_max_rollouts * base) if cfg.dynamic_sampling else 0
    rounds = extra = 0
    task_key = lambda t: t["task_id"] if isinstance(t, dict) else t.task_id  # noqa: E731

    def mixed() -> int:
        valid = [t.valid for t in trajs] if cfg.mask_user_errors else [True] * len(trajs)
        dropped = group_drop_reasons([t.reward for t in trajs], [t.task_id for t in trajs], valid)
        return len({t.task_id for t in trajs}) - len(dropped)

    while cap > 0 and extra < cap and (missing := cfg.tasks_per_batch - mixed()) > 0:
        tried = {t.task_id for t in trajs}
        pool = [t for t in tasks if task_key(t) not in tried]
        room = (cap - extra) // cfg.rollouts_per_task
        if not pool or room < 1:
            break
        rounds += 1
        more = sample_tasks(pool, min(2 * missing, room), seed + 7919 * rounds, env_weights)
        new = rollout_fn(policy, more, cfg.rollouts_per_task)
        if not new:
            break
        trajs = [*trajs, *new]
        extra += len(new)
    return trajs, {"refill_rounds": rounds, "extra_rollouts": extra}


def _reference_model(policy: Policy, cfg: TrainConfig):
    """Frozen pi_ref for the KL term: the policy at the start of ERPO, kept on disk for resumes."""
    ref_dir = Path(cfg.checkpoint_dir) / "reference"
    if (ref_dir / "config.json").is_file():
        ref = load_model(ref_dir).to(policy.device)
    else:
        ref = copy.deepcopy(policy.model)
        ckpt.save_model_dir(ref_dir, ref)
    ref.eval().requires_grad_(False)
    return ref


# --------------------------------------------------------------------------- both phases, resumable


def train(policy: Policy, tasks: Sequence[Any], rollout_fn: RolloutFn, cfg: TrainConfig,
          sft_examples: Sequence | None = None, log_fn: LogFn | None = None,
          before_erpo: Callable[[Policy], Sequence[Any] | None] | None = None,
          env_weights: dict[str, float] | None = None) -> TrainResult:
    """SFT cold start (if examples and ``sft_epochs``) then ERPO, resuming from ``cfg.checkpoint_dir``.

    ``before_erpo(policy)`` runs when ERPO starts from its first step (after SFT; e.g. the
    driver's after-SFT evaluation) — not when a run resumes in the middle of ERPO. It may return
    the tasks ERPO trains on instead of ``tasks`` (the driver's learnable filter), or None to keep
    them; a run resumed inside ERPO is given that list as ``tasks`` by its caller.

    A killed run started again with the same config continues after its last checkpoint: the
    weights, optimizer and history come back, finished steps are not redone, and steps are
    seeded per step so the continuation samples what the uninterrupted run would have.
    """
    set_seed(cfg.seed)
    result = TrainResult(cleaned=ckpt.clean_staging(cfg.checkpoint_dir))  # a save the kill cut short
    state = None
    last = ckpt.latest_checkpoint(cfg.checkpoint_dir)
    if last is not None:
        state = ckpt.load_trainer_state(last)
        ckpt.load_weights(last, policy.model)
        ckpt.set_rng_state(state["rng"], last)
        result.resumed_from = last
    history = list(state["history"]) if state else []

    sft_done = bool(state and (state["sft_done"] or state["phase"] == "erpo"))
    if sft_examples and cfg.sft_epochs > 0 and not sft_done:
        sft(policy, sft_examples, cfg, log_fn, history, resume_state=state if state and state["phase"] == "sft" else None)
    if before_erpo is not None and not (state and state["phase"] == "erpo"):
        chosen = before_erpo(policy)
        if chosen is not None:
            if not chosen:
                raise ConfigError("before_erpo returned an empty task list: ERPO needs at least one task")
            tasks = chosen
    history = train_erpo(policy, tasks, rollout_fn, cfg, log_fn, history, sft_done=True,
                         resume_state=state if state and state["phase"] == "erpo" else None, env_weights=env_weights)
    result.history = history
    result.last_checkpoint = ckpt.latest_checkpoint(cfg.checkpoint_dir)
    return result


# --------------------------------------------------------------------------- glue for the flow / CLI


def policy_from_config(cfg: TrainConfig, corpus_texts=None) -> Policy:
    """The policy a run starts from: ``cfg.model_path``, or the tiny offline policy built (once) into
    ``<checkpoint_dir>/base`` from ``corpus_texts`` (e.g. the warehouse's task requests and tool docs)."""
    path = cfg.model_path
    if path is None:
        base = Path(cfg.checkpoint_dir) / "base"
        if not (base / "config.json").is_file():
            if corpus_texts is None:
                raise ConfigError("policy_from_config: model_path is unset and no corpus was given to build the tiny "
                                  "policy's tokenizer; pass corpus_texts (task texts) or set model_path")
            build_tiny_policy(base, corpus_texts, vocab_size=cfg.tiny_vocab_size, hidden_size=cfg.tiny_hidden_size,
                              num_layers=cfg.tiny_num_layers, num_heads=cfg.tiny_num_heads,
                              max_positions=cfg.tiny_max_positions, seed=cfg.seed)
        path = str(base)
    return load_policy(path, device=cfg.device, dtype=cfg.dtype, allow_download=cfg.allow_download)


def training_step_record(train_run_id: str, step: int, phase: str, metrics: dict):
    """A ``TrainingStep`` row from a ``log_fn`` call (the flow persists these)."""
    from autoforge.types import TrainingStep

    return TrainingStep(train_run_id=train_run_id, step=step, phase=phase, metrics=_json_safe(dict(metrics)))
