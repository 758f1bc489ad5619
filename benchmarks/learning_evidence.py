"""Does ERPO learn, and do environment-level std and user-error masking help, across environments?

Default (multi-environment; results committed under benchmarks/results/learning/):

1. the shipped base checkpoint (autoforge/data/base_policy: copies values, knows no task;
   ``autoforge base-checkpoint``) is fine-tuned ONCE by SFT on the gold replays of >= 3
   environments' train splits (each ``NAME:MIN-MAX`` gold tool calls, no reasoning node: slices
   of clearly different difficulty, ranked by the measured after-SFT pass rate);
2. from that one SFT checkpoint, three arms under 20% injected user errors, the same seeds and the
   same budget: ERPO (environment-level std + MEU masking), GRPO (per-task std + masking), ERPO
   without masking;
3. per arm and environment: held-out pass^1 (greedy, error-free user) with a 95% bootstrap CI over
   tasks (each task's success averaged over seeds), the training reward per step, the advantage
   scale (the std dividing the advantages) per environment over steps, and the masked / dropped
   fractions; one PNG per comparison next to results.json, table.md and manifest.json (the exact
   command, both configs, the seeds and the task ids of every split);
4. a controlled ablation where a tiny policy CAN learn in seconds: three synthetic environments whose
   learnable rewards differ in base rate (3%, 15%, 50% of first tokens rewarded), the same 20% user
   errors flipping the observed reward and flagged by the judge, scored on the clean reward.

    python benchmarks/learning_evidence.py --warehouse W.duckdb      # W: the factory run on the --envs

``--single`` runs the earlier one-environment recipe (retail, its own copy warm-up; ~1 h).

Single-environment recipe (``--single``):

Does ERPO learn? SFT then ERPO on the offline corpus with the tiny policy, on the CPU.

Prints held-out pass^1 (test split of v_curated_tasks, error-free user, greedy) before SFT,
after SFT and after ERPO, and an ablation under injected user errors (default 20%): ERPO
(environment-level std + user-error masking) vs GRPO (per-task std) vs ERPO without masking —
the same SFT checkpoint, the same seeds, the same budget. Also the training reward per step.

Task subset (a curriculum a ~1-3M-parameter policy can act on): gold DAGs with
``n_tool_calls <= 2`` and no reasoning node — look an id up from a fact the user gives, then
one write call whose arguments are copied from the user's facts and the lookup's output. The
system prompt lists only the tools those tasks use (``prompt_tools="used"``). Longer tasks
need reasoning over tool outputs (argmax, date arithmetic) that a model this size does not
learn in minutes on a CPU.

A second, controlled ablation runs the same three arms where a tiny policy CAN learn in
seconds: the trainer's synthetic rollout (real sampling; reward = a learnable first-token
rule) with the same injected-error rate, each error flipping the observed reward and flagged
by the judge. It isolates what MEU masking and the std level do to the update.

    python benchmarks/learning_evidence.py                   # builds its own warehouse (factory: ~1 min)
    python benchmarks/learning_evidence.py --warehouse W.duckdb --erpo-seeds 0,1,2
    python benchmarks/learning_evidence.py --warehouse W.duckdb --sft-from OUT --lr 1.5e-4   # ERPO arms only

The defaults are the run quoted in the issue's notes (2-core CPU, ~1 h for the copy warm-up and
SFT, ~7 min per ERPO arm and seed): held-out pass^1 0.000 before SFT, 0.661 after the warm-up
and SFT, ~0.75 after ERPO. ``--sft-from`` reuses an earlier run's warm-up + SFT checkpoint.
Budget knobs: --copy-warmup-steps, --sft-epochs, --erpo-steps, --tasks-per-batch, --rollouts,
--hidden/--layers. Everything is written under --out (curves, checkpoints, results.json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autoforge.pipeline.train import run_training  # noqa: E402
from autoforge.rl.config import TrainConfig  # noqa: E402
from autoforge.rl.run import table_markdown  # noqa: E402
from learning_helpers import (group_outcomes, heldout_nll, mean_of, pass_ci, plot_heldout, plot_lines,  # noqa: E402
                              round3, series)

ARMS = (  # name, advantage level, MEU masking
    ("ERPO (env std + masking)", "env", True),
    ("GRPO (per-task std + masking)", "task", True),
    ("ERPO without masking", "env", False),
)


def arm_row(name: str, seed: int, r: dict, wall: float) -> dict:
    """One ERPO arm's result row (held-out pass^1 after it, training reward, masking, speed)."""
    hist = [h for h in r["history"] if h["phase"] == "erpo"]
    rewards = [h.get("reward_mean_valid") for h in hist]
    q = max(1, len(hist) // 4)
    mean = lambda xs: (sum(x for x in xs if x is not None) / max(1, sum(x is not None for x in xs)))  # noqa: E731
    return {
        "arm": name, "seed": seed, "held-out pass^1": r["evals"]["end"]["success_rate"],
        "train reward first 1/4": round(mean(rewards[:q]), 3), "train reward last 1/4": round(mean(rewards[-q:]), 3),
        "masked": round(mean([h.get("masked_frac") for h in hist]), 3),
        "judge flagged": round(mean([h.get("judge_flagged_frac") for h in hist]), 3),
        "updated steps": sum(1 for h in hist if not h.get("skipped")),
        "wall s": round(wall, 1),
        "rollout gen tok/s": r["throughput"]["rollout_gen_tokens_per_s"],
        "update tok/s": r["throughput"]["erpo_update_tokens_per_s"],
        "reward per step": [None if x is None else round(x, 3) for x in rewards],
        "curve": r["curve"],
    }


def per_arm(results: list[dict]) -> list[dict]:
    """Held-out pass^1 per arm over seeds: mean and each seed's value."""
    out = []
    for arm in dict.fromkeys(r["arm"] for r in results):
        vals = [r["held-out pass^1"] for r in results if r["arm"] == arm]
        out.append({"arm": arm, "seeds": len(vals), "held-out pass^1 mean": round(sum(vals) / len(vals), 3),
                    "per seed": [round(v, 3) for v in vals]})
    return out


SFT_KEYS = ("evals", "checkpoint", "data", "sft_examples", "warmup", "timings", "throughput")


def reuse_sft(prev: Path) -> tuple[dict, dict]:
    """The SFT phase of an earlier run of this script (its ``sft_summary.json``)."""
    path = prev / "sft_summary.json"
    if not path.is_file():
        raise SystemExit(f"--sft-from {prev}: no sft_summary.json there (written once a run's SFT phase ends)")
    s = json.loads(path.read_text())
    return {k: s.get(k) for k in SFT_KEYS}, s["nll"]


def controlled_ablation(out: Path, steps: int, error_rate: float, seeds: list[int], threads: int) -> list[dict]:
    """ERPO vs GRPO vs no masking where the reward is learnable by a tiny policy in minutes.

    The trainer's synthetic rollout (real sampling on the tiny policy; reward 1 when the first
    generated token is one of a fixed ~6% of the vocabulary) in 3 environments x 4 tasks, 8
    rollouts each. A user error (probability ``error_rate`` per rollout, seeded) FLIPS the
    observed reward, and the judge flags it (valid=False). The score is the CLEAN reward (what
    the policy really achieved), averaged over the last quarter of the steps.
    """
    import random

    import torch

    from autoforge.rl.policy import build_tiny_policy, load_policy
    from autoforge.rl.synthetic import make_synthetic_rollout_fn, make_token_reward, synthetic_tasks
    from autoforge.rl.trainer import train

    torch.set_num_threads(threads)
    corpus = [f"Please update record R{i % 97} in environment {i % 7}; set status {i % 5}." for i in range(400)]
    base = build_tiny_policy(out / "synthetic_base", corpus, vocab_size=512, hidden_size=64, num_layers=2, num_heads=4)
    tok = load_policy(base, device="cpu").tokenizer
    targets = set(range(40, 40 + max(1, len(tok) // 16)))
    tasks = synthetic_tasks(n_envs=3, tasks_per_env=4)
    rows = []
    for name, level, mask in ARMS:
        first, last, t = [], [], time.perf_counter()
        for sd in seeds:
            pol = load_policy(base, device="cpu")
            inner = make_synthetic_rollout_fn(max_new_tokens=4, reward_fn=make_token_reward(targets), turns=1)
            clean: list[float] = []

            def rollout_fn(policy, batch, n, inner=inner, clean=clean, sd=sd):
                trajs = inner(policy, batch, n)
                rng = random.Random(f"{sd}:{len(clean)}")  # the same corruption pattern in every arm
                clean.append(sum(t.reward for t in trajs) / len(trajs))
                for t in trajs:
                    if rng.random() < error_rate:  # a user error: the outcome is wrong, the judge flags it
                        t.reward, t.valid = 1.0 - t.reward, False
                return trajs

            cfg = TrainConfig(steps=steps, tasks_per_batch=12, rollouts_per_task=8, micro_batch_size=32, lr=3e-3,
                              max_new_tokens=4, advantage_level=level, mask_user_errors=mask, device="cpu", seed=sd,
                              sft_epochs=0, checkpoint_dir=str(out / f"synthetic_{level}_{mask}_{sd}"),
                              checkpoint_every=10_000)
            train(pol, tasks, rollout_fn, cfg)
            q = max(1, steps // 4)
            first.append(sum(clean[:q]) / q)
            last.append(sum(clean[-q:]) / q)
            print(f"  {name} seed {sd}: clean reward per step {[round(x, 2) for x in clean]}", flush=True)
        rows.append({"arm": name, "seeds": len(seeds), "clean reward first 1/4": round(sum(first) / len(first), 3),
                     "clean reward last 1/4": round(sum(last) / len(last), 3),
                     "last 1/4 per seed": [round(x, 3) for x in last], "wall s": round(time.perf_counter() - t, 1)})
    return rows


def build_warehouse(path: str, tasks_per_env: int, seed: int, envs: list[str]) -> None:
    """The offline factory into ``path``: only the one environment trained on, when there is one."""
    from autoforge.pipeline import run_factory

    t = time.perf_counter()
    out = run_factory(warehouse=path, tasks_per_env=tasks_per_env, seed=seed, env=envs[0] if len(envs) == 1 else None)
    print(f"factory: {out.get('stages', {}).get('verify', {})} in {time.perf_counter() - t:.0f} s", flush=True)


def printer(t0: float):
    def progress(phase, step, total, m):
        if phase == "warmup" and m.get("done"):
            print(f"  [{time.perf_counter() - t0:7.1f}s] copy warm-up done: {m}", flush=True)
        elif phase == "erpo" or (phase in ("sft", "warmup") and (step % (100 if phase == "warmup" else 20) == 0
                                                                  or step == total)):
            keys = ("loss", "reward_mean", "reward_mean_valid", "masked_frac", "kept_rollouts", "tokens_per_s")
            show = {k: round(v, 3) if isinstance(v, float) else v for k, v in m.items() if k in keys}
            print(f"  [{time.perf_counter() - t0:7.1f}s] {phase} {step}/{total} {show}", flush=True)
        elif phase.startswith("eval:") and "success_rate" in m:
            print(f"  [{time.perf_counter() - t0:7.1f}s] {phase} held-out pass^1 = {m['success_rate']:.3f}", flush=True)
        elif phase == "setup":
            print(f"  data: {m.get('train_tasks')} train / {m.get('test_tasks')} held-out tasks, "
                  f"{len(m.get('environments', []))} environments", flush=True)
    return progress


def main_single(argv=None) -> dict:
    """The single-environment run (retail): copy warm-up + SFT + three ERPO arms (``--single``)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--warehouse", help="an existing factory warehouse (default: build one under --out)")
    ap.add_argument("--tasks-per-env", type=int, default=4000,
                    help="factory candidates per environment when building (retail: ~670 tasks with <= 2 calls)")
    ap.add_argument("--out", default="/tmp/autoforge_learning_evidence")
    ap.add_argument("--max-tool-calls", type=int, default=2)
    ap.add_argument("--max-reasoning-nodes", type=int, default=0)
    ap.add_argument("--envs", default="retail", help="comma-separated environment names/ids ('' = all); one "
                    "environment gives a tiny policy one tool set to learn")
    ap.add_argument("--tool-schema", choices=("full", "compact"), default="compact",
                    help="tool schemas in the prompt (TrainConfig.tool_schema); compact = ~half the context")
    ap.add_argument("--max-train-tasks", type=int, default=400)
    ap.add_argument("--max-eval-tasks", type=int, default=59)
    ap.add_argument("--hidden", type=int, default=128)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=2048)
    ap.add_argument("--sft-epochs", type=int, default=2)
    ap.add_argument("--sft-lr", type=float, default=3e-3)
    ap.add_argument("--sft-batch", type=int, default=4, help="sequences per SFT step (small: more steps per epoch)")
    ap.add_argument("--copy-warmup-steps", type=int, default=3000,
                    help="copy warm-up steps before SFT (TrainConfig.copy_warmup_steps; benchmarks/copy_skill.py)")
    ap.add_argument("--copy-warmup-batch", type=int, default=32)
    ap.add_argument("--sft-augment", type=int, default=2,
                    help="value-substituted copies per gold replay (TrainConfig.sft_augment_copies)")
    ap.add_argument("--max-new-tokens", type=int, default=96, help="per agent turn (the longest gold turn is ~80)")
    ap.add_argument("--sft-context-weight", type=float, default=0.0,
                    help="SFT loss weight of non-agent tokens (TrainConfig.sft_context_weight)")
    ap.add_argument("--sft-from", help="reuse the SFT phase (checkpoint, evals) of an earlier run's --out")
    ap.add_argument("--erpo-steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=5e-5, help="ERPO learning rate (1.5e-4 and 5e-4 undid SFT gains here)")
    ap.add_argument("--tasks-per-batch", type=int, default=8)
    ap.add_argument("--rollouts", type=int, default=4)
    ap.add_argument("--error-rate", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--erpo-seeds", default="", help="comma-separated seeds for the ERPO arms (default: --seed); "
                    "each arm runs once per seed from the same SFT checkpoint, and a per-arm mean is printed")
    ap.add_argument("--concurrency", type=int, default=8, help="episodes whose turns are sampled as one batch")
    ap.add_argument("--device", default="cpu", help="cpu | cuda | auto (the issue's figures are CPU figures)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (1 is fastest on a shared 2-core box)")
    ap.add_argument("--arms", default="0,1,2", help="which ablation arms to run (indices into ARMS)")
    ap.add_argument("--controlled-steps", type=int, default=40, help="steps of the controlled ablation (0 = skip)")
    ap.add_argument("--controlled-seeds", type=int, default=3)
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    wh = args.warehouse or str(out / "factory.duckdb")
    if not args.warehouse and not Path(wh).exists():
        build_warehouse(wh, args.tasks_per_env, args.seed, [e for e in args.envs.split(",") if e])
    t_factory = time.perf_counter() - t0

    common = dict(
        tiny_vocab_size=args.vocab, tiny_hidden_size=args.hidden, tiny_num_layers=args.layers,
        tiny_num_heads=max(2, args.hidden // 32), device=args.device, seed=args.seed, torch_threads=args.threads,
        max_tool_calls=args.max_tool_calls, max_reasoning_nodes=args.max_reasoning_nodes, prompt_tools="used",
        tool_schema=args.tool_schema,
        max_train_tasks=args.max_train_tasks, max_eval_tasks=args.max_eval_tasks,
        envs=[e for e in args.envs.split(",") if e] or None,
        max_turns=8, max_new_tokens=args.max_new_tokens, max_episode_tokens=600, temperature=1.0, rollout_concurrency=args.concurrency,
        micro_batch_size=4, sft_batch_size=args.sft_batch, sft_lr=args.sft_lr, sft_epochs=args.sft_epochs,
        sft_context_weight=args.sft_context_weight, sft_augment_copies=args.sft_augment,
        copy_warmup_steps=args.copy_warmup_steps, copy_warmup_batch_size=args.copy_warmup_batch,
        checkpoint_every=1000)

    # ---- phase 1: base policy -> SFT on gold replays (evaluated before and after)
    t = time.perf_counter()
    if args.sft_from:  # the SFT phase of an earlier run (its --out), e.g. to give the ERPO arms more steps
        sft_out, nll = reuse_sft(Path(args.sft_from))
        print(f"== SFT cold start: reusing {sft_out['checkpoint']}", flush=True)
    else:
        print(f"== SFT cold start ({args.sft_epochs} epochs)", flush=True)
        sft_cfg = TrainConfig(**common, steps=0, eval_at=["start", "sft"], checkpoint_dir=str(out / "sft"))
        sft_out = run_training(wh, sft_cfg, progress=printer(t0), out_dir=out / "sft")
        nll = {"base": heldout_nll(str(out / "sft" / "base"), wh, sft_cfg), "sft": heldout_nll(sft_out["checkpoint"], wh, sft_cfg)}
    sft_wall = time.perf_counter() - t
    sft_ckpt = sft_out["checkpoint"] or str(out / "sft" / "base")  # --sft-epochs 0: the arms start from the tiny base built there
    print(f"  held-out gold-dialogue NLL per agent token: base {nll['base']:.3f} -> after SFT {nll['sft']:.3f}", flush=True)
    # what a run killed later keeps (and what --sft-from reads); partial.json gains each finished arm
    (out / "sft_summary.json").write_text(json.dumps({**{k: v for k, v in sft_out.items() if k in SFT_KEYS}, "nll": nll},
                                                     indent=1, default=str))

    # ---- phase 2: the same SFT policy, three ERPO variants under injected user errors
    arms = [ARMS[int(i)] for i in args.arms.split(",")]
    seeds = [int(x) for x in args.erpo_seeds.split(",")] if args.erpo_seeds else [args.seed]
    results = []
    for seed in seeds:
        for name, level, mask in arms:
            print(f"== {name}, seed {seed}: {args.erpo_steps} steps x {args.tasks_per_batch} tasks x {args.rollouts} "
                  f"rollouts, user error rate {args.error_rate}", flush=True)
            slug = f"{level}_{'mask' if mask else 'nomask'}" + (f"_s{seed}" if len(seeds) > 1 else "")
            cfg = TrainConfig(**{**common, "sft_epochs": 0, "copy_warmup_steps": 0, "seed": seed}, model_path=sft_ckpt,
                              steps=args.erpo_steps, lr=args.lr, tasks_per_batch=args.tasks_per_batch,
                              rollouts_per_task=args.rollouts, user_error_rate=args.error_rate, advantage_level=level,
                              mask_user_errors=mask, eval_at=["end"], checkpoint_dir=str(out / slug))
            t = time.perf_counter()
            r = run_training(wh, cfg, progress=printer(t0), out_dir=out / slug)
            results.append(arm_row(name, seed, r, time.perf_counter() - t))
            (out / "partial.json").write_text(json.dumps([{k: v for k, v in x.items() if k != "curve"} for x in results],
                                                         indent=1))

    controlled = []
    if args.controlled_steps:
        print(f"== controlled ablation: synthetic learnable reward, {args.error_rate:.0%} user errors flip it", flush=True)
        t = time.perf_counter()
        controlled = controlled_ablation(out, args.controlled_steps, args.error_rate,
                                         [args.seed + i for i in range(args.controlled_seeds)], args.threads)
        print(f"  ({time.perf_counter() - t:.0f} s)", flush=True)

    ev = sft_out["evals"]
    main_rows = [{"point": "before SFT (base policy)", "pass^1": ev["start"]["success_rate"]},
                 {"point": "after SFT", "pass^1": ev["sft"]["success_rate"]}]
    if results:
        first = per_arm(results)[0]
        main_rows.append({"point": f"after {first['arm']}" + (f" (mean of {first['seeds']} seeds)" if first["seeds"] > 1 else ""),
                          "pass^1": first["held-out pass^1 mean"]})
    n_test = ev["start"]["n_tasks"]
    print(f"\n== held-out pass^1 ({n_test} test-split tasks, greedy, error-free user)")
    print(table_markdown(main_rows))
    print(f"held-out gold-dialogue NLL per agent token: base {nll['base']:.3f}, after SFT {nll['sft']:.3f}")
    print(f"\n== ablation under {args.error_rate:.0%} injected user errors (same SFT start, seeds and budget)")
    print(table_markdown([{k: v for k, v in r.items() if k not in ("reward per step", "curve")} for r in results]))
    if len(seeds) > 1:
        print(f"\n== held-out pass^1 per arm over seeds {seeds} (after SFT: {ev['sft']['success_rate']:.3f})")
        print(table_markdown(per_arm(results)))
    print("\n== training reward (valid rollouts) per ERPO step")
    for r in results:
        print(f"  {r['arm']:<32} seed {r['seed']} {r['reward per step']}")
    if controlled:
        print(f"\n== controlled ablation (synthetic learnable reward, {args.error_rate:.0%} of rollouts flipped by a "
              "user error and flagged by the judge; clean reward = what the policy achieved)")
        print(table_markdown(controlled))
    summary = {"data": sft_out["data"], "sft_examples": sft_out["sft_examples"], "warmup": sft_out.get("warmup"), "main": main_rows, "nll": nll,
               "controlled": controlled,
               "ablation": results, "per_arm": per_arm(results) if results else [], "timings": {"factory_s": round(t_factory, 1), "sft_phase_s": round(sft_wall, 1),
                                                **sft_out["timings"]},
               "sft_throughput": sft_out["throughput"], "total_s": round(time.perf_counter() - t0, 1),
               "args": vars(args)}
    print(f"\ntimings: {summary['timings']}  total {summary['total_s']} s")
    print(f"SFT tokens/s: {sft_out['throughput']['sft_tokens_per_s']}")
    (out / "results.json").write_text(json.dumps(summary, indent=1))
    return summary


# ============================================================================ many environments (the default)

MULTI_ARMS = ARMS  # ERPO (env std + masking), GRPO (per-task std + masking), ERPO without masking


def multi_data(wh: str, cfg: TrainConfig, envs: list[str], train_per_env: int, test_per_env: int):
    """Train / held-out tasks per environment (a seeded sample of each), the data and the id manifest."""
    from autoforge.pipeline.corpus import env_names
    from autoforge.pipeline.evaluate import load_eval_inputs
    from autoforge.pipeline.train import curated_task_ids
    from autoforge.rl.data import curated_data, sample_ids

    names = env_names(wh)
    ids_of = {v: k for k, v in names.items()}
    manifest, train_ids, test_ids = {}, [], []
    for spec in envs:
        env, _, calls = spec.partition(":")  # NAME or NAME:MIN-MAX gold tool calls (a harder slice of an environment)
        lo, _, hi = calls.partition("-")
        one = cfg.model_copy(update={"envs": [env], "min_tool_calls": int(lo) if lo else None,
                                     "max_tool_calls": int(hi or lo) if calls else cfg.max_tool_calls})
        tr = sample_ids(curated_task_ids(wh, one, "train"), train_per_env, cfg.seed, f"train:{env}")
        te = sample_ids(curated_task_ids(wh, one, "test"), test_per_env, cfg.seed, f"test:{env}")
        if not tr or not te:
            raise SystemExit(f"environment {env}: {len(tr)} train / {len(te)} held-out tasks match the filters; build a "
                             "bigger warehouse (--tasks-per-env) or relax --max-tool-calls")
        manifest[env] = {"env_id": ids_of.get(env, env), "tool_calls": [one.min_tool_calls, one.max_tool_calls],
                         "max_reasoning_nodes": one.max_reasoning_nodes, "train": tr, "test": te}
        train_ids += tr
        test_ids += te
    tasks, dags, tools, specs = load_eval_inputs(wh, task_ids=set(train_ids) | set(test_ids))
    return curated_data(tasks, train_ids, test_ids, dags, tools, specs, cfg), manifest, names


def run_phase(data, cfg: TrainConfig, names: dict, t0: float) -> tuple[dict, dict[str, list[tuple[str, str, float]]]]:
    """One training run over ``data`` (no warehouse writes); the result and each evaluation's per-task
    outcomes ``{point: [(task_id, env_id, reward)]}``."""
    from autoforge.rl.run import train_curated
    from autoforge.types import Episode

    records: list = []
    out = train_curated(data, cfg, env_names=names, on_records=records.extend, progress=printer(t0),
                        out_dir=cfg.checkpoint_dir)
    outcomes: dict[str, list] = {}
    for r in records:
        if isinstance(r, Episode) and r.agent and r.agent.startswith("hf:"):
            outcomes.setdefault(r.agent.rsplit(":", 1)[1], []).append((r.task_id, r.env_id, float(r.reward == 1.0)))
    return out, outcomes


def controlled_multi(out: Path, steps: int, error_rate: float, seeds: list[int], fractions: list[float]) -> dict:
    """ERPO vs GRPO vs no masking where a tiny policy CAN learn in minutes, over environments of different
    difficulty: the trainer's synthetic rollout (real sampling), reward 1 when the first generated token is in
    the environment's own target set (``fractions`` of the vocabulary: hard -> easy). A user error (probability
    ``error_rate``, seeded, the same in every arm) flips the observed reward and the judge flags it. Scored on
    the CLEAN reward (what the policy achieved) per environment."""
    import random

    from autoforge.rl.policy import build_tiny_policy, load_policy
    from autoforge.rl.synthetic import make_synthetic_rollout_fn
    from autoforge.rl.trainer import train

    corpus = [f"Please update record R{i % 97} in environment {i % 7}; set status {i % 5}." for i in range(400)]
    base = build_tiny_policy(out / "synthetic_base", corpus, vocab_size=512, hidden_size=64, num_layers=2, num_heads=4)
    n_vocab = len(load_policy(base, device="cpu").tokenizer)
    envs = [f"env{e}" for e in range(len(fractions))]
    rng0 = random.Random(0)
    targets = {env: set(rng0.sample(range(40, n_vocab), max(1, int(f * (n_vocab - 40))))) for env, f in zip(envs, fractions)}
    tasks = [{"task_id": f"t{e}{i}", "env_id": env, "request": f"Please update record R{e}{i} in environment {e}."}
             for e, env in enumerate(envs) for i in range(4)]

    def reward(task, j, turns):
        return float(bool(turns and turns[0] and turns[0][0] in targets[task["env_id"]]))

    res: dict = {"fractions": dict(zip(envs, fractions)), "arms": {}}
    for name, level, mask in MULTI_ARMS:
        per_seed = []
        for sd in seeds:
            pol = load_policy(base, device="cpu")
            inner = make_synthetic_rollout_fn(max_new_tokens=4, reward_fn=reward, turns=1)
            clean: list[dict] = []

            def rollout_fn(policy, batch, n, inner=inner, clean=clean, sd=sd):
                trajs = inner(policy, batch, n)
                rng = random.Random(f"{sd}:{len(clean)}")  # the same corruption pattern in every arm
                by_env: dict[str, list[float]] = {}
                for t in trajs:
                    by_env.setdefault(t.env_id, []).append(t.reward)
                clean.append({e: sum(v) / len(v) for e, v in by_env.items()})
                for t in trajs:
                    if rng.random() < error_rate:
                        t.reward, t.valid = 1.0 - t.reward, False
                return trajs

            cfg = TrainConfig(steps=steps, tasks_per_batch=len(tasks), rollouts_per_task=8, micro_batch_size=48, lr=3e-3,
                              max_new_tokens=4, advantage_level=level, mask_user_errors=mask, device="cpu", seed=sd,
                              sft_epochs=0, checkpoint_dir=str(out / f"synthetic_{level}_{mask}_{sd}"),
                              checkpoint_every=10_000)
            hist = train(pol, tasks, rollout_fn, cfg).history
            per_seed.append({"clean": clean, "adv_scale": {e: [h.get(f"adv_scale/{e}") for h in hist] for e in envs}})
        q = max(1, steps // 4)
        res["arms"][name] = {
            "clean_last_quarter": {e: round(mean_of([mean_of([c[e] for c in s["clean"][-q:]]) for s in per_seed]), 3) for e in envs},
            "clean_first_quarter": {e: round(mean_of([mean_of([c[e] for c in s["clean"][:q]]) for s in per_seed]), 3) for e in envs},
            "clean_per_step": {e: [round(mean_of([s["clean"][k][e] for s in per_seed]), 3) for k in range(steps)] for e in envs},
            "adv_scale_per_step": {e: [None if (v := mean_of([s["adv_scale"][e][k] for s in per_seed])) is None else round(v, 3)
                                       for k in range(steps)] for e in envs},
            "last_quarter_per_seed": [round(mean_of([mean_of([c[e] for c in s["clean"][-q:]]) for e in envs]), 3) for s in per_seed],
        }
        print(f"  controlled {name}: clean reward last quarter {res['arms'][name]['clean_last_quarter']}", flush=True)
    return res


def main_multi(argv=None) -> dict:
    """The multi-environment benchmark (see the module docstring)."""
    from autoforge.rl.base import BASE_DIR, ensure_base_checkpoint

    ap = argparse.ArgumentParser(description="Multi-environment ERPO ablation from the shipped base checkpoint")
    ap.add_argument("--warehouse", required=True, help="a factory warehouse holding the --envs (autoforge factory --env X)")
    ap.add_argument("--warehouse-recipe", default="", help="how --warehouse was built (recorded in manifest.json)")
    ap.add_argument("--envs", default="retail:2-3,telecom:3-4,hr:2-4",
                    help="comma-separated environment names, each optionally :MIN-MAX gold tool calls of its tasks")
    ap.add_argument("--out", default="benchmarks/results/learning")
    ap.add_argument("--base", default=str(BASE_DIR), help="the policy SFT starts from (default: the shipped base "
                    "checkpoint, built first when absent); with --sft-epochs 0 the arms start from it as it is, e.g. "
                    "the demo's SFT checkpoint runs/demo/checkpoints/sft-000258")
    ap.add_argument("--max-tool-calls", type=int, default=4, help="for environments given without :MIN-MAX")
    ap.add_argument("--max-reasoning-nodes", type=int, default=0)
    ap.add_argument("--train-per-env", type=int, default=60)
    ap.add_argument("--test-per-env", type=int, default=12)
    ap.add_argument("--sft-epochs", type=int, default=3)
    ap.add_argument("--sft-lr", type=float, default=2e-3)
    ap.add_argument("--sft-augment", type=int, default=2)
    ap.add_argument("--erpo-steps", type=int, default=6)
    ap.add_argument("--lr", type=float, default=1e-4, help="ERPO learning rate")
    ap.add_argument("--tasks-per-batch", type=int, default=6)
    ap.add_argument("--rollouts", type=int, default=4, help="rollouts per task (TrainConfig.rollouts_per_task)")
    ap.add_argument("--temperature", type=float, default=1.0, help="rollout temperature (TrainConfig.temperature)")
    ap.add_argument("--env-weights", default="", help="per-environment sampling weights, NAME=W,... "
                    "(TrainConfig.env_weights; default: equal weights, each environment a third of every batch)")
    ap.add_argument("--error-rate", type=float, default=0.2)
    ap.add_argument("--pass-rate-samples", type=int, default=4, help="rollouts per train task of the pass-rate "
                    "estimate before ERPO (TrainConfig.pass_rate_samples; 0 = no estimate, ERPO on every task)")
    ap.add_argument("--pass-rate-max-tasks", type=int, default=64, help="train tasks estimated per arm "
                    "(TrainConfig.pass_rate_max_tasks); ERPO trains on the learnable ones among them")
    ap.add_argument("--refill", type=float, default=2.0, help="dynamic-sampling refill cap, x the base rollouts "
                    "(TrainConfig.refill_max_rollouts; 0 = the earlier no-refill filter)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tool-schema", choices=("full", "compact", "brief"), default="brief",
                    help="how tools are rendered in the policy's prompt (TrainConfig.tool_schema; brief: the demo's)")
    ap.add_argument("--eval-base", action="store_true", help="also evaluate the base checkpoint before SFT "
                    "(it knows no task: 0 in every run so far; costs an evaluation of babbling episodes)")
    ap.add_argument("--controlled-steps", type=int, default=30, help="steps of the controlled synthetic ablation (0 = skip)")
    ap.add_argument("--controlled-fractions", default="0.03,0.15,0.5",
                    help="share of the vocabulary rewarded per synthetic environment (hard, medium, easy)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(os.environ.get("AUTOFORGE_BENCH_WORK", "/tmp/autoforge_learning_multi"))
    if work.exists():  # scratch of an earlier run: its checkpoints and evals.json would be resumed as this run's
        foreign = [p.name for p in work.iterdir() if not re.fullmatch(r"sft|synthetic_.+|(env|task)_(mask|nomask)_s\d+", p.name)]
        if foreign:  # AUTOFORGE_BENCH_WORK may point anywhere: delete only what this script writes there
            raise SystemExit(f"{work} holds {foreign[:5]}, not this benchmark's scratch; set AUTOFORGE_BENCH_WORK "
                             "to an empty or new directory")
        print(f"removing the previous run's scratch {work}", flush=True)
        shutil.rmtree(work)
    specs = [e for e in args.envs.split(",") if e]
    envs = [e.partition(":")[0] for e in specs]
    seeds = [int(s) for s in args.seeds.split(",")]
    base = ensure_base_checkpoint(args.base, say=lambda t: print(t, flush=True)) if Path(args.base) == BASE_DIR else Path(args.base)
    weights = {k: float(v) for k, v in (kv.split("=") for kv in args.env_weights.split(",") if kv)} or {e: 1.0 for e in envs}
    common = dict(model_path=str(base), device="cpu", seed=0, torch_threads=args.threads, envs=envs,
                  max_tool_calls=args.max_tool_calls, max_reasoning_nodes=args.max_reasoning_nodes, prompt_tools="used",
                  tool_schema=args.tool_schema, max_turns=6, max_new_tokens=args.max_new_tokens, max_episode_tokens=400,
                  temperature=args.temperature, rollout_concurrency=8, micro_batch_size=8, sft_batch_size=8,
                  sft_lr=args.sft_lr, sft_epochs=args.sft_epochs, sft_augment_copies=args.sft_augment,
                  checkpoint_every=1000, env_weights=weights)
    cfg0 = TrainConfig(**common, steps=0, eval_at=["start", "sft"] if args.eval_base else ["sft"],
                       checkpoint_dir=str(work / "sft"))
    data, manifest, names = multi_data(args.warehouse, cfg0, specs, args.train_per_env, args.test_per_env)
    print(f"data: {len(data.train)} train / {len(data.test)} held-out tasks over {envs}", flush=True)

    # ---- 0. the controlled ablation first (minutes; its table stands even if the real runs are cut short)
    controlled = {}
    if args.controlled_steps:
        print("== controlled ablation: synthetic learnable rewards of three difficulties", flush=True)
        fr = [float(x) for x in args.controlled_fractions.split(",")]
        controlled = controlled_multi(work, args.controlled_steps, args.error_rate, seeds, fr)

    # ---- 1. the base checkpoint -> SFT on the gold replays of every environment (one checkpoint for all arms)
    print(f"== SFT ({args.sft_epochs} epochs) from {base}", flush=True)
    t = time.perf_counter()
    sft_out, sft_outcomes = run_phase(data, cfg0, names, t0)
    sft_s = time.perf_counter() - t
    sft_ckpt = sft_out["checkpoint"] or str(base)  # --sft-epochs 0: the arms start from --base (an SFT checkpoint made elsewhere)
    sft_rows: list[dict] = []
    for point, arm in (("start", "base checkpoint"), ("sft", "after SFT")):
        if point not in cfg0.eval_at:
            continue
        for env in envs + ["all"]:
            eid = None if env == "all" else manifest[env]["env_id"]
            sft_rows.append({"arm": arm, "env": env, **pass_ci(group_outcomes([sft_outcomes.get(point, [])], eid)),
                             "seeds": 1})
    sft_by_env = {r["env"]: r["pass^1"] for r in sft_rows if r["arm"] == "after SFT" and r["env"] != "all"}
    order = sorted(envs, key=lambda e: -(sft_by_env[e] or 0))
    difficulty = {e: lvl for e, lvl in zip(order, ["easy", "medium", "hard"] + ["harder"] * len(order))}
    if len(set(sft_by_env.values())) < len(envs):  # a tie in the measured SFT pass rate ranks nothing
        difficulty = {e: f"SFT {sft_by_env[e]} (tied)" for e in envs}
    print(f"  after SFT, per environment: {sft_by_env} -> {difficulty}", flush=True)

    def finish(runs: dict[str, list[dict]], final: bool) -> dict:
        """Tables, plots, results.json, table.md and manifest.json from the runs so far."""
        rows = list(sft_rows)
        seeds_done = [x["seed"] for x in runs[MULTI_ARMS[0][0]]]
        # ---- 3. the tables
        for name, _, _ in MULTI_ARMS:
            hs = [x["history"] for x in runs[name]]
            for env in envs + ["all"]:
                eid = None if env == "all" else manifest[env]["env_id"]
                row = {"arm": name, "env": env, **pass_ci(group_outcomes([x["outcomes"] for x in runs[name]], eid)),
                       "seeds": len(runs[name]),
                       "per seed": [pass_ci(group_outcomes([x["outcomes"]], eid), n_boot=1)["pass^1"] for x in runs[name]]}
                if eid:
                    rew = series(hs, f"reward/{eid}", args.erpo_steps)
                    q = max(1, args.erpo_steps // 3)
                    row.update({"train reward first 1/3": round3(mean_of(rew[:q])), "train reward last 1/3": round3(mean_of(rew[-q:])),
                                "adv scale": round3(mean_of(series(hs, f"adv_scale/{eid}", args.erpo_steps))),
                                "masked": round3(mean_of(series(hs, f"masked_frac/{eid}", args.erpo_steps))),
                                "dropped": round3(mean_of(series(hs, f"dropped_frac/{eid}", args.erpo_steps)))})
                else:  # all environments: how many steps updated the weights, the refill, the learnable tasks
                    steps = [h for hist in hs for h in hist]
                    row.update({"steps updated": f"{sum(not h.get('skipped') for h in steps)}/{len(steps)}",
                                "extra rollouts/step": round3(mean_of([h.get("extra_rollouts") for h in steps])),
                                "dropped all wrong/right/few valid per step": "/".join(
                                    str(round3(mean_of([h.get(f"dropped/{w}") for h in steps])))
                                    for w in ("all_wrong", "all_right", "few_valid")),
                                "learnable tasks": "/".join(str(x["learnable"].get("kept", "-")) for x in runs[name])})
                rows.append(row)
        arms = [a for a, _, _ in MULTI_ARMS]
        curves = {name: {"reward": {e: series([x["history"] for x in runs[name]], f"reward/{manifest[e]['env_id']}", args.erpo_steps) for e in envs},
                         "adv_scale": {e: series([x["history"] for x in runs[name]], f"adv_scale/{manifest[e]['env_id']}", args.erpo_steps) for e in envs},
                         "masked": series([x["history"] for x in runs[name]], "masked_frac", args.erpo_steps),
                         "dropped": series([x["history"] for x in runs[name]], "dropped_frac", args.erpo_steps)}
                  for name in arms}
        plots = {
            "heldout": plot_heldout(out / "heldout_pass1.png", rows, envs, ["after SFT", *arms]),
            "reward": plot_lines(out / "train_reward.png", "training reward (all rollouts) per environment, mean of seeds",
                                 [(f"{e} ({difficulty[e]})", {a: curves[a]["reward"][e] for a in arms}) for e in envs], "reward"),
            "adv_scale": plot_lines(out / "advantage_scale.png", "advantage scale (std dividing the advantages) per environment",
                                    [(f"{e} ({difficulty[e]})", {a: curves[a]["adv_scale"][e] for a in arms}) for e in envs], "std"),
            "masking": plot_lines(out / "masked_dropped.png", "rollouts masked (judge-flagged) and tasks dropped (no variance)",
                                  [("masked fraction", {a: curves[a]["masked"] for a in arms}),
                                   ("dropped task fraction", {a: curves[a]["dropped"] for a in arms})], "fraction"),
        }
        if controlled:
            ce = list(controlled["fractions"])
            plots["controlled"] = plot_lines(
                out / "controlled_clean_reward.png", "controlled ablation: clean reward per step (mean of seeds)",
                [(f"{e} (rewarded share {controlled['fractions'][e]})", {a: controlled["arms"][a]["clean_per_step"][e] for a in arms})
                 for e in ce], "clean reward")

        table = table_markdown([{k: (f"[{v[0]:.3f}, {v[1]:.3f}]" if k == "ci" and v[0] is not None else v)
                                 for k, v in r.items() if k != "per seed"} | {"difficulty": difficulty.get(r["env"], "")}
                                for r in rows])
        summary = {"rows": rows, "difficulty": difficulty, "curves": curves, "controlled": controlled, "plots": plots,
                   "timings": {"sft_phase_s": round(sft_s, 1), "total_s": round(time.perf_counter() - t0, 1),
                               "erpo_run_s": {a: [x["wall_s"] for x in runs[a]] for a in arms}},
                   "sft_data": {"sft_examples": sft_out["sft_examples"], **sft_out["data"]}}
        (out / "results.json").write_text(json.dumps(summary, indent=1))
        (out / "table.md").write_text(table + "\n")
        (out / "manifest.json").write_text(json.dumps({
            "command": "python benchmarks/learning_evidence.py " + " ".join(sys.argv[1:] if argv is None else argv),
            "args": vars(args), "seeds": seeds, "base_checkpoint": str(base),
            "base_manifest": json.loads((Path(base) / "base_manifest.json").read_text()) if (Path(base) / "base_manifest.json").is_file() else None,
            "sft_config": cfg0.model_dump(mode="json"),
            "erpo_config": {k: v for k, v in TrainConfig(**{**common, "sft_epochs": 0}, steps=args.erpo_steps, lr=args.lr,
                                                       tasks_per_batch=args.tasks_per_batch, rollouts_per_task=args.rollouts,
                                                       user_error_rate=args.error_rate).model_dump(mode="json").items()},
            "arms": [{"arm": a, "advantage_level": lvl, "mask_user_errors": m} for a, lvl, m in MULTI_ARMS],
            "splits": manifest, "env_names": {manifest[e]["env_id"]: e for e in envs}}, indent=1))
        print("\n== held-out pass^1 per arm and environment (mean over seeds; 95% bootstrap CI over tasks)")
        print(table)
        if controlled:
            print("\n== controlled ablation: clean reward, last quarter of the steps, per environment")
            print(table_markdown([{"arm": a, **controlled["arms"][a]["clean_last_quarter"],
                                   "per seed (mean of envs)": controlled["arms"][a]["last_quarter_per_seed"]} for a in arms]))
        print(f"\nwritten: {out}/results.json, table.md, manifest.json, {', '.join(Path(p).name for p in plots.values())}")
        print(f"total {summary['timings']['total_s']} s")
        summary["complete"] = final
        summary["seeds_done"] = seeds_done
        (out / "results.json").write_text(json.dumps(summary, indent=1))
        return summary

    # ---- 2. three ERPO variants x seeds from the same SFT checkpoint, same budget, 20% injected user errors
    # (seed by seed, every arm once per seed: a run stopped early still compares the arms; tables after each seed)
    runs: dict[str, list[dict]] = {}
    for sd in seeds:
        for name, level, mask in MULTI_ARMS:
            print(f"== {name}, seed {sd}: {args.erpo_steps} steps x {args.tasks_per_batch} tasks x {args.rollouts} "
                  f"rollouts, user error rate {args.error_rate}", flush=True)
            cfg = TrainConfig(**{**common, "model_path": sft_ckpt, "sft_epochs": 0, "sft_gold": False, "seed": sd},
                              steps=args.erpo_steps, lr=args.lr, tasks_per_batch=args.tasks_per_batch,
                              rollouts_per_task=args.rollouts, user_error_rate=args.error_rate, advantage_level=level,
                              mask_user_errors=mask, eval_at=["end"], pass_rate_samples=args.pass_rate_samples,
                              pass_rate_max_tasks=args.pass_rate_max_tasks, refill_max_rollouts=args.refill,
                              checkpoint_dir=str(work / f"{level}_{'mask' if mask else 'nomask'}_s{sd}"))
            t = time.perf_counter()
            r, outcomes = run_phase(data, cfg, names, t0)
            runs.setdefault(name, []).append({"seed": sd, "history": [h for h in r["history"] if h["phase"] == "erpo"],
                                              "outcomes": outcomes.get("end", []), "wall_s": round(time.perf_counter() - t, 1),
                                              "learnable": r.get("learnable") or {}})
        summary = finish(runs, final=sd == seeds[-1])
    return summary


if __name__ == "__main__":
    if "--single" in sys.argv:
        sys.argv.remove("--single")
        main_single()
    else:
        main_multi()
