"""SFT step time with and without running each environment's shared prompt once per micro-batch
(``TrainConfig.sft_share_prefix``), side by side on the demo's own SFT data.

    .venv/bin/autoforge demo                                        # leaves ./autoforge.duckdb
    .venv/bin/python benchmarks/sft_prefix.py                       # its SFT data, 12 steps per arm, x2
    .venv/bin/python benchmarks/sft_prefix.py --warehouse W.duckdb --steps 20 --repeat 3 --threads 2

The data is what the demo's training stage trains on (``pipeline/train.py: demo_config``: the
short tasks of the demo's three environments, gold replays plus value-substituted copies, the
``brief`` tool prompt), a fixed random sample of ``--steps`` x 8 dialogues. Each arm runs the same
steps from the shipped base checkpoint; the arms alternate ``--repeat`` times and the best run of
each is reported (wall and CPU seconds per step: the machine is shared, CPU time moves less), with
the token positions each plan computes and the first steps' losses (equal up to float order).
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def demo_examples(warehouse: str, policy, cfg):
    """The demo's SFT examples, as ``rl/run.py`` builds them."""
    from autoforge.pipeline.train import load_curated
    from autoforge.rl.augment import augmented_episodes
    from autoforge.rl.data import gold_episodes, sft_examples

    data = load_curated(warehouse, cfg)
    episodes = list(gold_episodes(data, data.train))
    episodes += augmented_episodes(episodes, data.train, cfg.sft_augment_copies, cfg.seed)
    return sft_examples(policy.tokenizer, episodes, data.schemas(cfg.tool_schema), cfg.sft_max_examples, cfg.seed)


def positions(examples, cfg, share: bool) -> int:
    """Token positions one epoch of ``examples`` computes under the micro-batch plan (prefix once + padded suffixes)."""
    from autoforge.rl.trainer import Trajectory, _micro_batches

    rows = [Trajectory("b", "b", ids, m, [0.0] * len(ids), 0.0) for ids, m in examples]
    total = 0
    for i in range(0, len(rows), cfg.sft_batch_size):
        for mb, p in _micro_batches(rows[i:i + cfg.sft_batch_size], cfg.micro_batch_size, share):
            total += p + len(mb) * (max(len(t.token_ids) for t in mb) - p)
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("--warehouse", default=os.environ.get("AUTOFORGE_WAREHOUSE", "autoforge.duckdb"),
                    help="a warehouse `autoforge demo` has filled (default: $AUTOFORGE_WAREHOUSE or ./autoforge.duckdb)")
    ap.add_argument("--steps", type=int, default=12, help="SFT steps per arm (default 12)")
    ap.add_argument("--repeat", type=int, default=2, help="alternate the arms this many times (default 2)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1, as the demo)")
    args = ap.parse_args()

    import torch

    from autoforge.pipeline.train import demo_config, demo_envs
    from autoforge.rl.base import ensure_base_checkpoint
    from autoforge.rl.policy import load_policy
    from autoforge.rl.trainer import sft
    from autoforge.pipeline.corpus import has_relation

    if not has_relation(args.warehouse, "v_curated_tasks") or not demo_envs(args.warehouse):
        raise SystemExit(f"{args.warehouse}: no curated short tasks; run `autoforge demo` (or give --warehouse)")
    torch.set_num_threads(args.threads)
    base = ensure_base_checkpoint(say=print)
    cfg = demo_config(args.warehouse, tempfile.mkdtemp(prefix="af_sft_prefix_"), base=base)
    examples = demo_examples(args.warehouse, load_policy(base, device="cpu"), cfg)
    sample = random.Random(0).sample(examples, min(len(examples), args.steps * cfg.sft_batch_size))
    lens = sorted(len(e[0]) for e in sample)
    print(f"{args.warehouse}: {len(examples)} demo SFT dialogues over {cfg.envs}; timing {len(sample)} of them "
          f"(median {lens[len(lens) // 2]} tokens), batches of {cfg.sft_batch_size}, {args.threads} thread(s)")
    best: dict[bool, tuple[float, float]] = {}
    losses: dict[bool, list[float]] = {}
    for _ in range(args.repeat):
        for share in (False, True):
            policy = load_policy(base, device="cpu")
            run_cfg = cfg.model_copy(update={"sft_epochs": 1, "sft_share_prefix": share, "checkpoint_every": 10**9,
                                             "checkpoint_dir": tempfile.mkdtemp(prefix="af_sft_prefix_")})
            t, c = time.perf_counter(), time.process_time()
            hist = sft(policy, sample, run_cfg)
            wall, cpu = (time.perf_counter() - t) / len(hist), (time.process_time() - c) / len(hist)
            best[share] = min(best.get(share, (wall, cpu)), (wall, cpu))
            losses[share] = [round(h["loss"], 4) for h in hist[:4]]
            print(f"  {'shared prompt' if share else 'full pass per row':<18} {wall:.3f} s/step wall, {cpu:.3f} s CPU", flush=True)
    pos = {share: positions(sample, cfg, share) for share in (False, True)}
    print(f"\n{'':<28}{'full pass per row':>20}{'shared prompt':>16}{'ratio':>8}")
    print(f"{'s/step wall (best)':<28}{best[False][0]:>20.3f}{best[True][0]:>16.3f}{best[False][0] / best[True][0]:>7.2f}x")
    print(f"{'s/step CPU (best)':<28}{best[False][1]:>20.3f}{best[True][1]:>16.3f}{best[False][1] / best[True][1]:>7.2f}x")
    print(f"{'token positions per step':<28}{pos[False] / args.steps:>20,.0f}{pos[True] / args.steps:>16,.0f}"
          f"{pos[False] / pos[True]:>7.2f}x")
    print(f"first losses: full {losses[False]}  shared {losses[True]}")


if __name__ == "__main__":
    main()
