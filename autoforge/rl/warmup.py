"""Copy warm-up: synthetic associative-recall dialogues that teach a small policy to copy values.

Every task is solved by copying: the email the user gave, the id a lookup returned, into a
tool call's arguments. A policy built from nothing and trained only on gold replays fits them
by memorising the values it saw, and on a held-out task writes a train-set email
(benchmarks/learning_evidence.py). The skill it lacks is *associative recall*: find a value by
its key in the context and copy it. This warm-up trains exactly that, before SFT, in the
policy's own dialogue format:

    <|im_start|>user
    Sure, here you go:
    - cabin class: Zorb
    - email: quo.tas52@lim.com<|im_end|>
    <|im_start|>assistant
    <tool_call>
    {"name": "submit", "arguments": {"cabin_class": "Zorb", "email": "quo.tas52@lim.com"}}
    </tool_call><|im_end|>

Keys and values are random words of the tokenizer's own vocabulary (values shaped like
emails, ids, names and street addresses), the call lists every fact with keys sorted, so
nothing but recall lowers the loss (only the assistant turn is trained on). Measured on the
CPU (benchmarks/copy_skill.py): held-out exact recall goes from 0 to ~0.37 in 1,500 steps of
32 dialogues. Synthetic recall curricula are standard in the study of in-context copying
(associative recall / MQAR); using one as a warm-up for ERPO is ours
(``TrainConfig.copy_warmup_steps``).
"""

from __future__ import annotations

import random
import re

from autoforge.types import Message, ToolCall


def _vocab_words(tokenizer) -> tuple[list[str], list[str]]:
    vocab = [tokenizer.decode([i]) for i in range(len(tokenizer))]
    words = [w for w in vocab if re.fullmatch(r"[a-z]{2,}", w)]
    caps = [w for w in vocab if re.fullmatch(r"[A-Z][a-z]+", w)]
    if len(words) < 8:  # a tokenizer with few whole-word tokens: fall back to letter pairs
        words = [a + b for a in "abcdefghij" for b in "klmnopqrst"]
    return words, caps or [w.title() for w in words]


def recall_dialogue(rng: random.Random, words: list[str], caps: list[str], max_facts: int = 5) -> list[Message]:
    """One fact list -> ``submit`` call dialogue (see the module docstring)."""

    def value() -> str:
        kind = rng.random()
        if kind < 0.3:
            return f"{rng.choice(words)}.{rng.choice(words)}{rng.randint(10, 99)}@{rng.choice(words)}.com"
        if kind < 0.6:
            return f"{rng.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}{rng.choice(['', 'M', 'X'])}{rng.randint(0, 9999):04d}"
        if kind < 0.8:
            return rng.choice(caps)
        return f"{rng.randint(1, 999)} {rng.choice(caps)} {rng.choice(['St', 'Ave', 'Rd'])}"

    n = rng.randint(1, max_facts)
    keys: list[str] = []
    while len(keys) < n:
        k = "_".join(rng.choice(words) for _ in range(rng.randint(1, 2)))
        if k not in keys:
            keys.append(k)
    facts = {k: value() for k in keys}
    lines = "\n".join(f"- {k.replace('_', ' ')}: {v}" for k, v in facts.items())
    return [Message(role="user", content=f"Sure, here you go:\n{lines}"),
            Message(role="assistant", content="",
                    tool_calls=[ToolCall(name="submit", arguments={k: facts[k] for k in sorted(keys)})])]


def recall_examples(tokenizer, n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """``n`` warm-up dialogues as ``(token_ids, loss_mask)`` in the policy's layout (mask on the call only)."""
    from autoforge.rl.policy import encode_episode

    words, caps = _vocab_words(tokenizer)
    rng = random.Random(f"copy-warmup:{seed}")
    return [encode_episode(tokenizer, recall_dialogue(rng, words, caps), None) for _ in range(n)]


def exact_rate(policy, examples, batch: int = 50) -> float:
    """Share of examples whose every trained token is the greedy prediction (teacher-forced)."""
    import torch

    from autoforge.rl.trajectory import Trajectory, collate

    was_training = policy.model.training
    policy.model.eval()
    ok = 0
    with torch.no_grad():
        for i in range(0, len(examples), batch):
            b = collate([Trajectory("t", "e", ids, m, [0.0] * len(ids), 0.0) for ids, m in examples[i:i + batch]],
                        policy.pad_id, device=policy.device)
            pred = policy.model(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).logits[:, :-1].argmax(-1)
            tgt, mask = b["input_ids"][:, 1:], b["loss_mask"][:, 1:].bool()
            ok += int(((pred == tgt) | ~mask).all(-1).sum())
    if was_training:
        policy.model.train()
    return ok / max(1, len(examples))
