"""The seam between the episode engine and the trainer: trajectories and token-exact sampling.

An episode is ONE growing token sequence (prompt + every turn; interleaved thinking stays in
it). The engine appends context tokens (system/user/tool turns, role headers) with mask 0 and
the policy's sampled tokens with mask 1 and their log-probs, exactly as generated — nothing
is decoded and re-tokenized between rollout and update (token-in/token-out).

``rollout_fn(policy, tasks, n_per_task) -> list[Trajectory]`` is what the trainer calls.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from autoforge.errors import ConfigError


@dataclass
class Trajectory:
    """One rollout as the trainer needs it. Lists are aligned position by position.

    token_ids[t]      the t-th token of the sequence the policy saw/generated
    loss_mask[t]      1 iff token t was sampled by the policy (never tool output, user turns, headers)
    old_logprobs[t]   log pi_old(token_t | tokens_<t) recorded at sampling time; 0.0 where mask is 0
    reward            outcome reward (1.0 if final state == gold, else 0.0)
    valid             False when the user-error judge flagged the episode (MEU: it leaves the batch)
    """

    task_id: str
    env_id: str
    token_ids: list[int]
    loss_mask: list[int]
    old_logprobs: list[float]
    reward: float
    valid: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)  # episode_id, termination, n_turns, judge verdict, ...

    def __post_init__(self):
        n = len(self.token_ids)
        if len(self.loss_mask) != n or len(self.old_logprobs) != n:
            raise ConfigError(
                f"Trajectory {self.task_id}: token_ids ({n}), loss_mask ({len(self.loss_mask)}) and old_logprobs "
                f"({len(self.old_logprobs)}) must be aligned one per token"
            )
        if n and self.loss_mask[0]:
            raise ConfigError(f"Trajectory {self.task_id}: the first token cannot be generated (it has no prefix)")

    @property
    def n_generated(self) -> int:
        return int(sum(self.loss_mask))


class TrajectoryBuilder:
    """Grow a trajectory turn by turn; the episode engine's only way to touch token ids."""

    def __init__(self, prompt_ids: Sequence[int]):
        self.token_ids: list[int] = list(prompt_ids)
        self.loss_mask: list[int] = [0] * len(self.token_ids)
        self.old_logprobs: list[float] = [0.0] * len(self.token_ids)

    def add_context(self, ids: Sequence[int]) -> None:
        """Tool output, user turns, role headers: seen by the policy, never trained on."""
        self.token_ids += list(ids)
        self.loss_mask += [0] * len(ids)
        self.old_logprobs += [0.0] * len(ids)

    def add_generated(self, ids: Sequence[int], logprobs: Sequence[float]) -> None:
        """Tokens the policy sampled, with their sampling log-probs."""
        if len(ids) != len(logprobs):
            raise ConfigError(f"add_generated: {len(ids)} ids but {len(logprobs)} log-probs")
        self.token_ids += list(ids)
        self.loss_mask += [1] * len(ids)
        self.old_logprobs += [float(x) for x in logprobs]

    def __len__(self) -> int:
        return len(self.token_ids)

    def build(self, task_id: str, env_id: str, reward: float, valid: bool = True, **metadata) -> Trajectory:
        return Trajectory(task_id, env_id, list(self.token_ids), list(self.loss_mask), list(self.old_logprobs),
                          float(reward), bool(valid), dict(metadata))


def collate(trajs: Sequence[Trajectory], pad_id: int, advantages: Sequence[float] | None = None,
            device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Right-pad a batch into tensors (B rollouts, L = longest sequence).

    input_ids      [B, L] long    token ids, pad_id after each sequence's end
    attention_mask [B, L] long    1 on real tokens
    loss_mask      [B, L] float   1 on agent-generated tokens (0 on padding too)
    old_logprobs   [B, L] float   rollout-time log-probs (0 off-mask)
    advantages     [B]    float   (only when given)
    """
    if not trajs:
        raise ConfigError("collate: empty batch")
    B, L = len(trajs), max(len(t.token_ids) for t in trajs)
    ids = torch.full((B, L), int(pad_id), dtype=torch.long)
    att = torch.zeros((B, L), dtype=torch.long)
    mask = torch.zeros((B, L), dtype=torch.float32)
    old = torch.zeros((B, L), dtype=torch.float32)
    for b, t in enumerate(trajs):
        n = len(t.token_ids)
        ids[b, :n] = torch.tensor(t.token_ids, dtype=torch.long)
        att[b, :n] = 1
        mask[b, :n] = torch.tensor(t.loss_mask, dtype=torch.float32)
        old[b, :n] = torch.tensor(t.old_logprobs, dtype=torch.float32)
    out = {"input_ids": ids, "attention_mask": att, "loss_mask": mask, "old_logprobs": old}
    if advantages is not None:
        out["advantages"] = torch.tensor([float(a) for a in advantages], dtype=torch.float32)
    return {k: v.to(device) for k, v in out.items()}


# --------------------------------------------------------------------------- sampling


def _cache_kwarg(model) -> str:
    """transformers >= 5.2x names the KV cache ``cache``; earlier versions ``past_key_values``."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


@torch.no_grad()
def generate_turn(
    model,
    tokenizer,
    input_ids: Sequence[Sequence[int]],
    max_new_tokens: int,
    temperature: float = 1.0,
    stop_ids: Sequence[int] | None = None,
    stop_strings: Sequence[str] | None = None,
    generator: torch.Generator | Sequence[torch.Generator | None] | None = None,
) -> tuple[list[list[int]], list[list[float]]]:
    """Sample one turn for each of B sequences; return the exact new ids and their log-probs.

    Batched with left padding and a KV cache. ``logprobs[b][k]`` is
    log softmax(logits / temperature)[new_ids[b][k]] — the distribution actually sampled from
    (for temperature 0, greedy, it is the temperature-1 log-prob). The trainer recomputes with
    the same temperature, so on-policy the PPO ratio is 1. A sequence stops after emitting a
    token in ``stop_ids`` (kept: the policy must learn to end its turn) or once its decoded
    new text contains a stop string; the others keep going.

    ``generator``: one ``torch.Generator`` for the whole batch, or one per sequence (None: the
    global one). With one per sequence, each sequence draws its tokens from its own stream, so what
    it samples does not depend on which other sequences share its batch (an episode seeded alike
    samples alike however the concurrent episodes were batched).
    """
    if not input_ids or any(len(s) == 0 for s in input_ids):
        raise ConfigError("generate_turn: every sequence needs at least one prompt token")
    per_row = isinstance(generator, (list, tuple))
    if per_row and len(generator) != len(input_ids):
        raise ConfigError(f"generate_turn: {len(generator)} generators for {len(input_ids)} sequences; give one per "
                          "sequence, or one for the batch")
    dev = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if stop_ids is None:
        stop_ids = [i for i in {tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")} if i is not None]
    stop = torch.tensor(sorted(set(int(i) for i in stop_ids)), dtype=torch.long, device=dev)

    B, L = len(input_ids), max(len(s) for s in input_ids)
    ids = torch.full((B, L), int(pad), dtype=torch.long, device=dev)  # [B, L] left-padded prompts
    att = torch.zeros((B, L), dtype=torch.long, device=dev)
    for b, s in enumerate(input_ids):
        ids[b, L - len(s):] = torch.tensor(list(s), dtype=torch.long, device=dev)
        att[b, L - len(s):] = 1
    pos = (att.cumsum(-1) - 1).clamp(min=0)  # positions count real tokens only, so padding does not shift RoPE

    was_training = model.training
    model.eval()
    cache_kw = _cache_kwarg(model)
    out = model(input_ids=ids, attention_mask=att, position_ids=pos, use_cache=True)
    past, logits = getattr(out, cache_kw), out.logits[:, -1, :].float()  # [B, V]
    next_pos = pos[:, -1:] + 1  # [B, 1]

    new_ids: list[list[int]] = [[] for _ in range(B)]
    new_lps: list[list[float]] = [[] for _ in range(B)]
    rows = list(range(B))  # batch row -> sequence index; finished sequences leave the batch
    finished = torch.zeros(B, dtype=torch.bool, device=dev)  # rows kept only when the cache cannot drop them
    for _ in range(max_new_tokens):
        if temperature > 0:
            logp = torch.log_softmax(logits / temperature, dim=-1)
            if per_row:  # each sequence from its own stream; a finished row (kept in the batch) draws nothing
                probs, fin = logp.exp(), finished.tolist()
                tok = torch.cat([probs[r].argmax(-1, keepdim=True) if fin[r] else
                                 torch.multinomial(probs[r], 1, generator=generator[b]) for r, b in enumerate(rows)])
            else:
                tok = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(1)  # [b]
        else:
            logp = torch.log_softmax(logits, dim=-1)
            tok = logp.argmax(-1)
        lp = logp.gather(1, tok[:, None]).squeeze(1)  # [b]
        # one device->host copy per step (indexing a GPU tensor row by row would sync per row)
        done_l = (torch.isin(tok, stop) | finished).tolist()
        for r, (b, t, l, f) in enumerate(zip(rows, tok.tolist(), lp.tolist(), finished.tolist())):
            if f:
                continue
            new_ids[b].append(int(t))
            new_lps[b].append(float(l))
            if stop_strings and not done_l[r]:
                tail = tokenizer.decode(new_ids[b][-16:], skip_special_tokens=False)
                if any(s in tail for s in stop_strings):
                    done_l[r] = True
        if all(done_l):
            break
        done = torch.tensor(done_l, dtype=torch.bool, device=dev)
        if bool(done.any()) and hasattr(past, "batch_select_indices"):
            # Drop finished rows (KV cache, mask, positions): later steps cost only what is still generating.
            keep = torch.nonzero(~done).flatten()
            past.batch_select_indices(keep)
            rows = [rows[i] for i in keep.tolist()]
            tok, att, next_pos, finished = tok[keep], att[keep], next_pos[keep], finished[keep]
        else:  # a cache that cannot drop rows: finished rows run on (pad tokens), their output ignored
            finished = done
            tok = torch.where(done, torch.full_like(tok, int(pad)), tok)
        att = torch.cat([att, att.new_ones(att.shape[0], 1)], dim=1)
        out = model(input_ids=tok[:, None], attention_mask=att, position_ids=next_pos, use_cache=True, **{cache_kw: past})
        past, logits = getattr(out, cache_kw), out.logits[:, -1, :].float()
        next_pos = next_pos + 1
    if was_training:
        model.train()
    return new_ids, new_lps
