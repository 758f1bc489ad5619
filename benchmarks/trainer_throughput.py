"""Throughput of one policy-update step (forward + backward + AdamW) in tokens/s.

    python benchmarks/trainer_throughput.py                      # tiny default policy, 16 x (128 + 128) tokens
    python benchmarks/trainer_throughput.py --hidden 768 --layers 12 --vocab 32000 --device cuda --dtype bfloat16
    python benchmarks/trainer_throughput.py --model path/to/model_dir
    PYTHONPATH=/path/to/trl_site python benchmarks/trainer_throughput.py --trl   # side by side with TRL GRPOTrainer

Both sides get the same model weights and the same batch: B sequences of P prompt tokens and C
completion tokens, loss on the completion only, one rollout advantage each, beta = 0, clip
0.2/0.28, token-level mean over the batch (ours: ERPO/DAPO; TRL: loss_type="bnpo", the same
aggregation within one batch). TRL's side calls ``GRPOTrainer.compute_loss`` on prepared inputs —
its own update path, without its generation — then the same backward, clip and AdamW step.
TRL is a benchmark-only dependency (``pip install autoforge[bench]``); without it the TRL
column is skipped with a note. Figures print; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from autoforge.rl.config import TrainConfig  # noqa: E402
from autoforge.rl.policy import Policy, build_tiny_policy, count_parameters, load_policy, resolve_device  # noqa: E402
from autoforge.rl.trainer import erpo_update, make_optimizer  # noqa: E402
from autoforge.rl.trajectory import Trajectory  # noqa: E402

CORPUS = [f"Update order O{i:04d} for customer C{i % 13}: set status {['open', 'paid', 'shipped'][i % 3]}." for i in range(500)]


def _sync(dev: torch.device) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def build_model_dir(args, root: Path) -> Path:
    if args.model:
        return Path(args.model)
    return build_tiny_policy(root / "policy", CORPUS, vocab_size=args.vocab, hidden_size=args.hidden,
                             num_layers=args.layers, num_heads=args.heads, max_positions=max(4096, args.prompt + args.completion),
                             model_vocab_size=args.vocab)


def make_batch(vocab: int, B: int, P: int, C: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(10, vocab, (B, P + C), generator=g)
    adv = [(-1.0) ** b * 0.7 for b in range(B)]  # mixed signs, like a real group
    return ids, adv


def time_steps(fn, n: int, warmup: int, dev: torch.device) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(n):
        _sync(dev)
        t = time.perf_counter()
        fn()
        _sync(dev)
        times.append(time.perf_counter() - t)
    return times


def ours_step(policy: Policy, ids, adv, P: int, args):
    B, L = ids.shape
    cfg = TrainConfig(micro_batch_size=args.micro_batch or B, lr=1e-6, recompute_old_logprobs=True,
                      clip_eps_low=0.2, clip_eps_high=0.28, beta=0.0, device=str(policy.device))
    trajs = [Trajectory("t", "e", ids[b].tolist(), [0] * P + [1] * (L - P), [0.0] * L, 0.0) for b in range(B)]
    opt = make_optimizer(policy.model, cfg.lr, cfg)
    # recompute_old_logprobs=True: pi_old from a no-grad pass on the same ids (what TRL does when
    # num_iterations > 1). Time it separately to report the pure update too.
    return lambda: erpo_update(policy, trajs, adv, opt, cfg)


def trl_step(model_dir: Path, ids, adv, P: int, args, dev: torch.device):
    try:
        import trl
        from datasets import IterableDataset
        from trl import GRPOConfig, GRPOTrainer
    except ImportError as e:
        return None, f"TRL not importable ({e}); pip install 'autoforge[bench]'"
    pol = load_policy(model_dir, device=dev, dtype=args.dtype)
    B, L = ids.shape
    C = L - P
    with tempfile.TemporaryDirectory() as out:
        gcfg = GRPOConfig(
            output_dir=out, per_device_train_batch_size=B, num_generations=2, max_completion_length=C,
            loss_type="bnpo", beta=0.0, epsilon=0.2, epsilon_high=0.28, report_to="none", logging_steps=10**6,
            use_cpu=dev.type == "cpu", bf16=args.dtype == "bfloat16", save_strategy="no", max_steps=1,
            gradient_checkpointing=args.trl_grad_ckpt,  # TRL 1.x defaults to True; ours does not checkpoint
        )
        # IterableDataset: datasets 5.2's Dataset fingerprinting fails to pickle with pyarrow 26 (dill error);
        # the dataset is never read here, compute_loss gets our prepared inputs.
        ds = IterableDataset.from_generator(lambda: iter([{"prompt": "hello"}] * B))
        trainer = GRPOTrainer(model=pol.model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                              args=gcfg, train_dataset=ds, processing_class=pol.tokenizer)
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = 1
    d = dev
    inputs = {
        "prompt_ids": ids[:, :P].to(d), "prompt_mask": torch.ones(B, P, dtype=torch.long, device=d),
        "completion_ids": ids[:, P:].to(d), "completion_mask": torch.ones(B, C, dtype=torch.long, device=d),
        "advantages": torch.tensor(adv, device=d), "num_items_in_batch": torch.tensor(float(B * C), device=d),
    }
    with torch.no_grad():  # same pi_old as our side: a no-grad pass on the same ids
        old, _, _ = trainer._get_per_token_logps_and_entropies(model, ids.to(d), torch.ones_like(ids, device=d), C)
    inputs["old_per_token_logps"] = old
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def step():
        with torch.no_grad():
            trainer._get_per_token_logps_and_entropies(model, ids.to(d), torch.ones_like(ids, device=d), C)
        opt.zero_grad(set_to_none=True)
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    return step, f"trl {trl.__version__}"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="an existing model directory (default: build one from the size flags)")
    ap.add_argument("--vocab", type=int, default=2048, help="model vocabulary (embedding rows)")
    ap.add_argument("--hidden", type=int, default=192)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16, help="rollouts in the batch")
    ap.add_argument("--micro-batch", type=int, default=0, help="rollouts per forward/backward (0 = whole batch)")
    ap.add_argument("--prompt", type=int, default=128, help="context tokens per rollout (not trained)")
    ap.add_argument("--completion", type=int, default=128, help="generated tokens per rollout (trained)")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--trl", action="store_true", help="also time TRL GRPOTrainer's loss on the same batch")
    ap.add_argument("--trl-grad-ckpt", action="store_true", help="keep TRL's default gradient checkpointing (off = like ours)")
    args = ap.parse_args(argv)

    dev = resolve_device(args.device)
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = build_model_dir(args, Path(tmp))
        pol = load_policy(model_dir, device=dev, dtype=args.dtype)
        n_params = count_parameters(pol.model)
        vocab = pol.model.config.vocab_size
        ids, adv = make_batch(vocab, args.batch, args.prompt, args.completion)
        B, L = ids.shape
        print(f"device={dev} dtype={args.dtype} params={n_params / 1e6:.2f}M vocab={vocab} torch={torch.__version__} "
              f"batch={B}x({args.prompt}+{args.completion}) threads={torch.get_num_threads()}")
        steps = {"autoforge erpo_update": (ours_step(pol, ids, adv, args.prompt, args), "")}
        if args.trl:
            fn, note = trl_step(model_dir, ids, adv, args.prompt, args, dev)
            if fn is None:
                print(f"  TRL skipped: {note}")
            else:
                steps["TRL GRPOTrainer.compute_loss"] = (fn, note + (" (grad ckpt)" if args.trl_grad_ckpt else ""))
        # Interleave the two (A B A B ...) so load from other processes hits both alike.
        times: dict[str, list[float]] = {k: [] for k in steps}
        for name, (fn, _) in steps.items():
            time_steps(fn, 0, args.warmup, dev)
        for _ in range(args.steps):
            for name, (fn, _) in steps.items():
                times[name] += time_steps(fn, 1, 0, dev)
        if dev.type == "cuda":
            print(f"  peak GPU memory (both models): {torch.cuda.max_memory_allocated(dev) / 2**30:.2f} GiB")
        rows = [(name, times[name], note) for name, (_, note) in steps.items()]
    print(f"{'update step':34s} {'median s':>9s} {'tokens/s':>10s} {'trained tok/s':>14s}")
    for name, t, note in rows:
        med = statistics.median(t)
        print(f"{name:34s} {med:9.3f} {B * L / med:10.0f} {B * args.completion / med:14.0f}  {note}")
    print("(both include a no-grad pass for pi_old log-probs, then forward+backward+clip+AdamW)")


if __name__ == "__main__":
    sys.exit(main())
