"""``autoforge eval``, ``train`` and ``base-checkpoint``: roll agents out on curated tasks, train a policy."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from autoforge.cli.args import assignment, default, number, quiet_hf, share, wh
from autoforge.errors import ConfigError

# The EvalParams fields `autoforge eval` has a flag for (the flag is the field's name, dashed).
EVAL_FLAGS = ("agent", "user", "trials", "split", "env", "limit", "concurrency", "user_error_rate", "seed", "judge",
              "max_turns", "max_tokens", "max_new_tokens", "temperature", "tool_schema", "recorded_tasks", "agent_card")


class Given(argparse.Action):
    """Store the flag's value and note that it was given (``args.given``): for an hf:<checkpoint> agent,
    the settings its agent.json records fill in the flags that were not."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def cmd_eval(args: argparse.Namespace) -> int:
    from autoforge.pipeline import evaluate as stage

    if str(args.agent).startswith("hf:"):
        quiet_hf()  # a damaged model folder is our one error line, not transformers' load report before it
    given = getattr(args, "given", set())
    # a setting an agent card can give is passed only when its flag was given (EvalParams.model_fields_set)
    fields = {k: getattr(args, k) for k in EVAL_FLAGS if k in given or k not in stage.CARD_FIELDS}
    summary = stage.run(wh(args), stage.EvalParams(**fields))
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        if summary.get("agent_card"):
            print(card_line(summary["agent_card"]))
        print(stage.format_report(with_env_names(wh(args), summary)))
    return 0


def card_line(info: dict) -> str:
    """What an evaluation took from a checkpoint's agent.json, in one line."""
    ck = info.get("checkpoint") or {}
    where = f", {ck.get('phase')}-{int(ck.get('step', 0)):06d}" if ck else ""
    took = ", ".join(f"{k}={v}" for k, v in info["applied"].items()) or "nothing"
    kept = f"; from the command line: {', '.join(info['explicit'])}" if info.get("explicit") else ""
    tasks = f"; its {info['recorded_tasks']} recorded held-out tasks" if info.get("recorded_tasks") else ""
    return f"as recorded in {info['path']} (training run {info['train_run_id']}{where}): {took}{kept}{tasks}"


def progress_line(phase: str, metrics: dict) -> str:
    """The headline metrics of one progress call; an ERPO step says whether it updated the weights, how
    many task groups it kept (after the refill) and why it dropped the others."""
    fmt = lambda k: f"{k}={metrics[k]:.4g}" if isinstance(metrics[k], float) else f"{k}={metrics[k]}"  # noqa: E731
    if phase == "erpo":
        parts = ["skipped (no group with mixed rewards)" if metrics.get("skipped") else "updated"]
        if metrics.get("kept_groups") is not None:
            parts.append(f"groups kept {metrics['kept_groups']} of {metrics.get('n_tasks')}")
        if metrics.get("refill_rounds"):
            parts.append(f"refilled x{metrics['refill_rounds']} (+{metrics.get('extra_rollouts')} rollouts)")
        dropped = {k.split("/", 1)[1]: v for k, v in metrics.items() if k.startswith("dropped/") and v}
        if dropped:
            parts.append("dropped " + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in dropped.items()))
        parts += [fmt(k) for k in ("reward_mean", "pass_rate", "loss", "kl_ref") if metrics.get(k) is not None]
        return "; ".join(parts)
    keys = ("message", "loss", "reward_mean", "masked_frac", "tokens_per_s", "pass_hat_1", "success_rate")
    return ", ".join(fmt(k) for k in keys if metrics.get(k) is not None)


def train_progress(console):
    """A progress callback for training: one line per step with the headline metrics."""

    def progress(phase: str, step: int, total: int, metrics: dict) -> None:
        console.print(f"  {phase} {step}/{total}: {progress_line(phase, metrics)}", markup=False, highlight=False)

    return progress


def cmd_train(args: argparse.Namespace) -> int:
    from rich.console import Console

    from autoforge.pipeline.train import run_training, train_config

    console = Console()
    quiet_hf()
    config = train_config(args.config, dict(args.set or []), where="--set")
    out = run_training(wh(args), config, progress=train_progress(console), out_dir=args.out)
    console.print(out["table_markdown"])
    console.print(f"learning curve: {out['curve']}   checkpoint: {out['checkpoint']}   run: {out['train_run_id']}")
    return 0


def cmd_base_checkpoint(args: argparse.Namespace) -> int:
    import tempfile

    from autoforge.rl.base import BASE_DIR, BaseSpec, build_base_checkpoint, estimated_build_s, read_manifest

    quiet_hf()
    spec = BaseSpec(**{k: v for k, v in (("steps", args.steps), ("seed", args.seed), ("toolbox", args.toolbox))
                       if v is not None})
    out = Path(args.out) if args.out else BASE_DIR
    eta = estimated_build_s(spec)
    last = [time.perf_counter()]

    def progress(step: int, total: int, m: dict) -> None:
        if time.perf_counter() - last[0] >= 30 or step == total:
            last[0] = time.perf_counter()
            print(f"  copy warm-up {step}/{total}: loss {m['loss']:.3f}", flush=True)

    if args.check:
        shipped = read_manifest(out)
        if shipped is None:
            raise ConfigError(f"base-checkpoint --check: {out} holds no base_manifest.json; build it first with "
                              f"`autoforge base-checkpoint{' --out ' + str(out) if args.out else ''}`")
        spec = BaseSpec(**shipped["spec"])
        print(f"rebuilding {out}'s spec in a temp folder to compare weights (about {estimated_build_s(spec) / 60:.0f} "
              "min on one CPU core) ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="autoforge-base-check-") as tmp:
            man = build_base_checkpoint(Path(tmp) / "base", spec, progress=progress)
        same = man["weights_sha256"] == shipped["weights_sha256"]
        print(f"weights sha256: shipped {shipped['weights_sha256'][:16]}..., rebuilt {man['weights_sha256'][:16]}... "
              f"-> {'identical' if same else 'DIFFERENT'}")
        return 0 if same else 1
    print(f"building the base checkpoint into {out}: tokenizer from the bundled tool docs, {spec.steps} copy warm-up "
          f"steps of {spec.batch_size} synthetic recall dialogues (about {eta / 60:.0f} min on one CPU core) ...",
          flush=True)
    man = build_base_checkpoint(out, spec, progress=progress)
    print(f"done in {man['build_s']:.0f} s: {man['parameters']:,} parameters, held-out recall exact "
          f"{man['heldout_recall_exact']:.3f}, weights sha256 {man['weights_sha256']}")
    return 0


def with_env_names(warehouse: str | None, summary: dict) -> dict:
    """The summary with environment names in place of env ids, for people reading the table."""
    from autoforge.pipeline.corpus import env_names

    names = env_names(warehouse)
    rows = [{**r, "env_id": names.get(r["env_id"], r["env_id"])} if r.get("env_id") else r for r in summary["results"]]
    return {**summary, "results": rows}


# each command's one-line help in the `autoforge --help` list (add_parsers below gives it, or parser.py's
# stub when this group is not built)
HELP = {
    "eval": "roll out an agent with a simulated user on curated tasks: pass^k",
    "train": "SFT cold start then ERPO on curated tasks (torch + transformers)",
    "base-checkpoint": "(re)build the shipped base policy the demo starts from",
}
COMMANDS = {"eval": cmd_eval, "train": cmd_train, "base-checkpoint": cmd_base_checkpoint}


def add_parsers(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    from autoforge.pipeline.evaluate import SPLITS, EvalParams
    from autoforge.rollout.judge import JUDGES

    card = "; for hf:CKPT with agent.json, its recorded value unless given"

    s = sub.add_parser("eval", parents=[common], help=HELP["eval"],
                       description="Evaluate an agent on curated tasks (v_curated_tasks) with a simulated user; prints "
                                   "pass^k for k = 1..trials with 95% confidence intervals, per environment and overall, "
                                   "and stores episodes and results (view v_eval_results). A checkpoint a training run "
                                   "wrote (hf:CKPT) holds agent.json: it is played as the run evaluated it (tools "
                                   "shown, prompt, token and turn limits, temperature, trials, seed, user, judge) "
                                   "except for the flags given; --recorded-tasks plays the run's own held-out tasks, "
                                   "so its per-environment pass^1 is the run's.")
    s.add_argument("--agent", default=default(EvalParams, "agent"),
                   help="oracle | random | openai[:MODEL] | hf:MODEL_DIR (a local transformers model directory); "
                        "default %(default)s")
    s.add_argument("--user", action=Given, default=default(EvalParams, "user"),
                   help="offline (scripted) | llm[:MODEL] (OpenAI-compatible); default %(default)s" + card)
    s.add_argument("--trials", action=Given, type=number("trials"), default=default(EvalParams, "trials"),
                   help="trials per task (K of pass^k; default %(default)s" + card + ")")
    s.add_argument("--split", choices=SPLITS, default=default(EvalParams, "split"),
                   help="only this split (test = held-out; default both)")
    s.add_argument("--env", metavar="NAME", default=default(EvalParams, "env"), help="only this environment")
    s.add_argument("--limit", type=number("limit"), default=default(EvalParams, "limit"), help="at most this many tasks")
    s.add_argument("--concurrency", action=Given, type=number("concurrency"),
                   default=default(EvalParams, "concurrency"),
                   help="episodes run at once (threads; default %(default)s" + card + ")")
    s.add_argument("--user-error-rate", action=Given, type=number("user_error_rate"),
                   default=default(EvalParams, "user_error_rate"),
                   help="rate of injected user errors (wrong fact, withheld fact, premature stop; split evenly; "
                        "default %(default)s" + card + ")")
    s.add_argument("--judge", action=Given, choices=JUDGES, default=default(EvalParams, "judge"),
                   help="user-error judge (default %(default)s" + card + ")")
    s.add_argument("--max-turns", action=Given, type=number("max_turns"), default=default(EvalParams, "max_turns"),
                   help="turn limit per episode (default %(default)s" + card + ")")
    s.add_argument("--seed", action=Given, type=number("seed"), default=default(EvalParams, "seed"),
                   help="seed of injected errors and sampling agents (default %(default)s" + card + ")")
    s.add_argument("--max-tokens", action=Given, type=number("max_tokens"), default=default(EvalParams, "max_tokens"),
                   help="agent tokens per episode (default %(default)s" + card + ")")
    s.add_argument("--max-new-tokens", action=Given, type=number("max_new_tokens"),
                   default=default(EvalParams, "max_new_tokens"),
                   help="agent tokens per turn (default %(default)s" + card + ")")
    s.add_argument("--temperature", action=Given, type=number("temperature"),
                   default=default(EvalParams, "temperature"),
                   help="sampling temperature of the agent and of an LLM user (default %(default)s: greedy" + card
                        + ")")
    s.add_argument("--tool-schema", action=Given, choices=("full", "compact", "brief"),
                   default=default(EvalParams, "tool_schema"),
                   help="how the tools are shown to the agent: full JSON Schemas, compact, or brief (a small "
                        "policy's shorthand; default %(default)s" + card + ")")
    s.add_argument("--recorded-tasks", action="store_true",
                   help="hf:CKPT only: evaluate exactly the held-out tasks its agent.json records (eval_task_ids: "
                        "those its training run evaluated; --env, --split and --limit still filter them), so the "
                        "run's per-environment pass^1 comes out again (`autoforge demo` prints this command)")
    s.add_argument("--no-agent-card", dest="agent_card", action="store_false",
                   help="evaluate hf:CKPT as a plain model directory, ignoring its agent.json")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")

    s = sub.add_parser("train", parents=[common], help=HELP["train"],
                       description="Trains a policy on the warehouse's curated tasks: SFT on gold dialogues, then ERPO "
                                   "(environment-level advantage, user-error masking, dynamic sampling). Evaluates the "
                                   "held-out split before and after, writes training_runs/training_steps, a learning-curve "
                                   "PNG and a before/after table. A killed run resumes from its last checkpoint.")
    s.add_argument("--config", metavar="FILE", default=None,
                   help="YAML/JSON TrainConfig (default: the built-in defaults; every field documented in "
                        "autoforge/rl/config.py)")
    s.add_argument("--set", action="append", type=assignment, metavar="FIELD=VALUE", help="override one config field (repeatable)")
    s.add_argument("--out", default=None, metavar="DIR", help="where the curve and table go (default: checkpoint dir)")

    s = sub.add_parser("base-checkpoint", help=HELP["base-checkpoint"],
                       description="Builds autoforge/data/base_policy/: a tiny Llama policy whose tokenizer is trained "
                                   "on the bundled tool docs and whose weights are trained only on synthetic recall "
                                   "dialogues (the copy warm-up, autoforge/rl/warmup.py): it can copy a value from its "
                                   "context into a tool call and knows no task. Seeded, one CPU thread: the same spec "
                                   "gives the same weights (base_manifest.json records their SHA-256). The spec is "
                                   "autoforge/rl/base.py: BaseSpec.")
    s.add_argument("--out", default=None, metavar="DIR", help="where to write it (default: the package's "
                   "autoforge/data/base_policy, what `autoforge demo` uses)")
    s.add_argument("--steps", type=number("train_steps", "--steps"), default=None,
                   help="copy warm-up steps (default: BaseSpec.steps; fewer = quicker, copies worse)")
    s.add_argument("--seed", type=number("seed"), default=None, help="seed of the weights and dialogues (default 0)")
    s.add_argument("--toolbox", type=share, default=None, metavar="SHARE",
                   help="share of warm-up dialogues with a tool list to pick from, 0..1 (default: BaseSpec.toolbox, 0; "
                        "0.5 makes the warm-up ~1.6x slower; not yet measured)")
    s.add_argument("--check", action="store_true", help="rebuild the checkpoint at --out from its manifest's spec in "
                   "a temp folder and compare the weights hash (exit 1 when they differ); writes nothing")
