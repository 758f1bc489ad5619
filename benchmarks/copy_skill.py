"""Can a policy of this size learn to COPY in the time we have? The skill every real task needs.

A task is solved by copying values — the email the user gave, the id a lookup returned — into
tool calls. benchmarks/learning_evidence.py found the tiny CPU policy never does: after SFT it
writes the most frequent train-set value instead. This script measures the two copy skills
on their own, from a freshly built tiny policy, on synthetic data that no memorising can fit:

1. induction — random token sequences repeated once (``A B C ... | A B C ...``); the loss is on
   the repeat, so it can only fall by attending back and copying. Accuracy on the repeat.
2. recall — the copy warm-up's data (autoforge.rl.warmup): the user lists facts
   (``- first name: Zorb``, ``- email: quo.tas52@lim.com``, ...) and the assistant calls
   ``submit`` with every fact as an argument (``{"first_name": "Zorb", ...}``), keys sorted.
   Keys and values are random words of the tokenizer's vocabulary, so each value must be found
   by its key in the context (associative recall). Exact-match rate of the whole call on
   held-out dialogues (greedy, teacher-forced).

    python benchmarks/copy_skill.py                      # ~15 min on 2 CPU cores
    python benchmarks/copy_skill.py --recall-steps 6000 --device cuda --hidden 256

Prints loss and accuracy every --every steps, and the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def induction(policy, steps: int, batch: int, half: int, lr: float, every: int) -> list[dict]:
    import torch

    model, V = policy.model, len(policy.tokenizer)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    g = torch.Generator().manual_seed(0)
    rows, t0 = [], time.perf_counter()
    model.train()
    for s in range(1, steps + 1):
        a = torch.randint(10, V, (batch, half), generator=g)
        x = torch.cat([a, a], 1).to(policy.device)
        logits = model(input_ids=x).logits[:, half:-1]
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, half + 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s % every == 0 or s == steps:
            acc = float((logits.argmax(-1) == x[:, half + 1:]).float().mean())
            rows.append({"step": s, "loss": round(loss.item(), 3), "repeat accuracy": round(acc, 3),
                         "wall s": round(time.perf_counter() - t0, 1)})
            print(f"  induction {rows[-1]}", flush=True)
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--induction-steps", type=int, default=300)
    ap.add_argument("--recall-steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default=None, help="where the policy is built (default: a temporary folder)")
    args = ap.parse_args(argv)

    import torch

    from autoforge.rl.config import TrainConfig
    from autoforge.rl.policy import build_tiny_policy, count_parameters, load_policy
    from autoforge.rl.trainer import sft
    from autoforge.rl.warmup import exact_rate, recall_examples

    torch.set_num_threads(args.threads)
    out = Path(args.out or tempfile.mkdtemp(prefix="copy_skill_"))
    # the tokenizer is trained on the bundled tool documentation (real words), like the default policy's
    from autoforge.tooldocs.ingest import bundled_corpus_path
    corpus = [p.read_text(encoding="utf-8", errors="replace") for p in sorted(bundled_corpus_path().rglob("*"))
              if p.is_file()]
    results: dict = {}
    for name in ("induction", "recall"):
        steps = args.induction_steps if name == "induction" else args.recall_steps
        if steps <= 0:
            continue
        base = build_tiny_policy(out / f"{name}_base", corpus, vocab_size=args.vocab, hidden_size=args.hidden,
                                 num_layers=args.layers, num_heads=args.heads)
        pol = load_policy(base, device=args.device)
        print(f"== {name}: {count_parameters(pol.model) / 1e6:.2f}M parameters, {steps} steps x {args.batch}", flush=True)
        if name == "induction":
            results[name] = induction(pol, steps, args.batch, 32, args.lr, args.every)
            continue
        train = recall_examples(pol.tokenizer, steps * args.batch, seed=0)  # autoforge.rl.warmup
        test = recall_examples(pol.tokenizer, 200, seed=1)
        rows, t0 = [], time.perf_counter()

        def log(step, phase, m, rows=rows, test=test, pol=pol, t0=t0):
            if step % args.every == 0 or step == steps:
                rows.append({"step": step, "loss": round(m["loss"], 3), "held-out exact": round(exact_rate(pol, test), 3),
                             "tokens/s": round(m["tokens_per_s"]), "wall s": round(time.perf_counter() - t0, 1)})
                print(f"  recall {rows[-1]}", flush=True)

        cfg = TrainConfig(sft_epochs=1, sft_batch_size=args.batch, sft_lr=args.lr, checkpoint_dir=str(out / "ckpt"),
                          checkpoint_every=10**9, seed=0, device=args.device)
        sft(pol, train, cfg, log)
        results[name] = rows
    return results


if __name__ == "__main__":
    main()
