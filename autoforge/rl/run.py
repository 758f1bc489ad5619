"""The training driver: curated data in, trained policy + metric records + curve + before/after table out.

``train_curated(data, config, on_records=...)`` is the whole run over records; reading the
curated tasks and storing what it hands to ``on_records`` (TrainingRun / TrainingStep rows,
evaluation episodes and eval_results) is :func:`autoforge.pipeline.train.run_training`'s job,
which ``autoforge train --config FILE`` and the ``train-erpo`` Prefect flow call. Read top to bottom:

    curated tasks (v_curated_tasks; train split trained on, test split held out)   pipeline.train.load_curated
    gold replays: the oracle plays each train task with the offline user            data.gold_episodes
    policy: cfg.model_path, or the tiny one built on the run's own text             trainer.policy_from_config
    eval "start": held-out pass^1 of the base policy (HF agent, error-free user)     evaluate_policy
    copy warm-up: synthetic associative-recall dialogues (optional)                  trainer.copy_warmup
    SFT on gold replays (+ stored successful rollouts, + value-substituted copies),
          agent tokens only                                                         trainer.sft, augment
    eval "sft"
    pass rates: k rollouts of each train task as ERPO plays them; ERPO keeps the
          learnable ones (0 < rate < 1), stored as task_pass_rates rows            curriculum
    ERPO: rollouts through the episode engine (HF agent, offline user with injected
          errors, rule judge -> MEU masking), env-level advantages, clipped loss     trainer.train_erpo, agent
    eval "end"; TrainingRun / TrainingStep records, learning-curve PNG, before/after table

A killed run started again with the same config resumes from its last checkpoint: finished
SFT/ERPO steps are not redone and finished evaluations are read back from ``evals.json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from autoforge.errors import CheckpointError, ConfigError
from autoforge import atomic
from autoforge.rl.augment import augmented_episodes
from autoforge.rl.config import TrainConfig
from autoforge.rl.data import CuratedData, corpus_texts, gold_episodes, sample_ids, sft_examples
from autoforge.types import Episode, TrainingRun, content_id, utcnow

# progress(phase, step, total, metrics): phase is "warmup" | "sft" | "learnable" | "erpo" | "eval:start" | "eval:sft" |
# "eval:end" | "setup"
Progress = Callable[[str, int, int, dict], None]
# on_records(records): the run's rows to store (TrainingRun, TrainingStep, evaluation Episode / EvalResult, TaskPassRate)
OnRecords = Callable[[list], None]

# Fields that may change between a killed run and its resumption (they do not change what was trained).
RESUMABLE_CHANGES = {"steps", "checkpoint_every", "keep_checkpoints", "eval_at", "eval_trials", "eval_temperature",
                     "max_eval_tasks", "device", "rollout_concurrency"}


def as_config(config: TrainConfig | str | Path | dict | None) -> TrainConfig:
    """A TrainConfig from itself, a dict of its fields, a YAML/JSON file, or None (the defaults)."""
    if config is None:
        return TrainConfig()
    if isinstance(config, TrainConfig):
        return config
    if isinstance(config, dict):
        return TrainConfig.from_dict(config)
    return TrainConfig.from_file(config)


def train_run_id(cfg: TrainConfig, data: CuratedData) -> str:
    keep = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in RESUMABLE_CHANGES}
    return content_id("train", keep, sorted(t.task_id for t in data.train))


def check_resumable(cfg: TrainConfig) -> None:
    """Refuse to resume a checkpoint folder that holds a run with a different config, or whose last
    checkpoint is damaged or foreign (checked whole here, before the run replays and evaluates)."""
    from autoforge.rl import checkpoint as ckpt

    last = ckpt.latest_checkpoint(cfg.checkpoint_dir)
    if last is None:
        return
    old = ckpt.verify_checkpoint(last).get("config") or {}
    new = cfg.model_dump(mode="json")
    diff = sorted(k for k in new if k not in RESUMABLE_CHANGES and old.get(k, new[k]) != new[k])
    if diff:
        raise ConfigError(f"checkpoint folder {cfg.checkpoint_dir} holds a run with a different config ({', '.join(diff)} "
                          "differ); point checkpoint_dir at a new folder or delete it to start over")


def read_evals(path: Path) -> dict[str, dict]:
    """The finished evaluations of a resumed run (``evals.json``: point -> summary), {} when there is
    none; a damaged file is one CheckpointError line (it is written atomically, so only a hand edit
    or a foreign file gets here)."""
    if not path.is_file():
        return {}
    fix = f"delete {path} to evaluate those points again"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not UTF-8 text, so not the JSON it should be; {fix}") from None
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {fix}") from None
    if not isinstance(doc, dict) or not all(isinstance(v, dict) for v in doc.values()):
        raise CheckpointError(f"{path}: expected a JSON object of evaluation point -> summary; {fix}")
    return doc


# --------------------------------------------------------------------------- evaluation


def evaluate_policy(policy, data: CuratedData, cfg: TrainConfig, point: str, *, on_records: OnRecords | None = None,
                    run_id: str | None = None, tasks=None, checkpoint: str | None = None) -> dict[str, Any]:
    """Held-out pass^k of ``policy`` as the HF agent with an error-free offline user (no judge).

    Returns ``{"point", "success_rate", "n_tasks", "n_episodes", "per_env": {env: pass^1}, "gen_tokens",
    "wall_s", "eval_id", "terminations"}``; hands the episodes and eval_results rows to
    ``on_records`` when given (agent name ``hf:<run>:<point>``), and with ``run_id`` (the training
    run) one TaskPassRate row per task (source "eval", from the weights of ``checkpoint``).
    """
    from collections import Counter

    from autoforge.rl.agent import BatchedGenerator, HFAgent
    from autoforge.rollout.engine import EpisodeConfig
    from autoforge.rollout.evaluate import evaluate_tasks
    from autoforge.rollout.users import OfflineUser

    tasks = data.test if tasks is None else tasks
    if not tasks:
        return {"point": point, "success_rate": None, "n_tasks": 0, "n_episodes": 0, "per_env": {}, "gen_tokens": 0,
                "wall_s": 0.0, "eval_id": None, "terminations": {}}
    agent_name = f"hf:{run_id or 'policy'}:{point}"
    gen = BatchedGenerator(policy, max_batch=cfg.rollout_concurrency)
    try:
        rep = evaluate_tasks(
            list(tasks), data.dags, data.tools_by_env,
            agent_factory=lambda: HFAgent(policy, temperature=cfg.eval_temperature, max_new_tokens=cfg.max_new_tokens,
                                          generator=gen, name=agent_name),
            user_factory=lambda task, plan, s: OfflineUser(task, plan, seed=s), agent_name=agent_name,
            user_name="offline", trials=cfg.eval_trials, concurrency=cfg.rollout_concurrency,
            config=EpisodeConfig(max_turns=cfg.max_turns, max_tokens=cfg.max_episode_tokens, tool_schema=cfg.tool_schema), seed=cfg.seed,
            run_id=run_id, n_boot=200, rules_by_env=getattr(data, "judged", None))
    finally:
        gen.close()
    eps = rep.episodes
    per_env = {r.env_id: r.pass_hat_k for r in rep.results if r.k == 1 and r.env_id is not None}
    out = {"point": point, "success_rate": sum(e.reward == 1.0 for e in eps) / len(eps), "n_tasks": len(tasks),
           "n_episodes": len(eps), "per_env": per_env,
           "gen_tokens": sum(int(e.diagnostics.get("agent_tokens") or 0) for e in eps),
           "wall_s": round(rep.wall_s, 2), "eval_id": rep.eval_id,
           "terminations": dict(Counter(e.termination for e in eps))}
    if on_records is not None:
        rates = []
        if run_id is not None and point in ("start", "sft", "end"):
            from autoforge.rl.curriculum import eval_pass_rate_records

            rates = eval_pass_rate_records(run_id, point, eps, tasks, data.dags, cfg.eval_trials, checkpoint=checkpoint)
        on_records([*eps, *rep.results, *rates])
    return out


def before_after_table(evals: dict[str, dict], env_names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per evaluation point: overall pass^1 and pass^1 per environment."""
    env_names = env_names or {}
    rows = []
    for point in ("start", "sft", "end"):
        ev = evals.get(point)
        if not ev:
            continue
        label = {"start": "before training", "sft": "after SFT", "end": "after ERPO"}[point]
        row: dict[str, Any] = {"point": label, "pass^1": ev["success_rate"], "tasks": ev["n_tasks"]}
        for env, v in sorted(ev["per_env"].items()):
            row[env_names.get(env, env)] = round(v, 3)
        rows.append(row)
    return rows


def table_markdown(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no evaluation)"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    fmt = lambda v: "" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))  # noqa: E731
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c)) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def unseen_ids(data: CuratedData, cfg: TrainConfig) -> set[str]:
    """The train tasks kept out of SFT for ERPO (``cfg.erpo_unseen_tasks``: a seeded sample, at most half of them;
    none when the run has no ERPO step). The same seed and tasks keep the same ones apart, so an ERPO run from
    the SFT checkpoint of another run (``sft_epochs`` 0) draws from the tasks that run kept out."""
    if not cfg.erpo_unseen_tasks or not cfg.steps:
        return set()
    ids = sorted(t.task_id for t in data.train)
    return set(sample_ids(ids, min(cfg.erpo_unseen_tasks, len(ids) // 2), cfg.seed, "erpo_unseen"))


def resolve_env_weights(cfg: TrainConfig, data: CuratedData, env_names: dict[str, str] | None = None
                        ) -> dict[str, float] | None:
    """``cfg.env_weights`` keyed by env id (keys may be ids or names); a key naming no environment of the
    run is a ConfigError listing the ones there are."""
    if not cfg.env_weights:
        return None
    ids = sorted({t.env_id for t in data.train})
    by_name = {env_names.get(e, e): e for e in ids} if env_names else {}
    out: dict[str, float] = {}
    for key, w in cfg.env_weights.items():
        env = key if key in ids else by_name.get(key)
        if env is None:
            known = ", ".join(f"{(env_names or {}).get(e, e)} ({e})" for e in ids)
            raise ConfigError(f"env_weights: {key!r} is not an environment of this run's train tasks; use one of: {known}")
        out[env] = float(w)
    return out


# --------------------------------------------------------------------------- the driver


def train_curated(data: CuratedData, config: TrainConfig | str | Path | dict | None = None, *,
                  extra_sft_episodes: Sequence[Episode] = (), env_names: dict[str, str] | None = None,
                  on_records: OnRecords | None = None, progress: Progress | None = None, run_id: str | None = None,
                  out_dir: str | Path | None = None) -> dict[str, Any]:
    """Train a policy on curated ``data`` (see the module docstring); resumable.

    ``config``: a TrainConfig, a dict of its fields, or a YAML/JSON file. ``extra_sft_episodes``:
    successful episodes to SFT on besides the gold replays (used when ``cfg.sft_successful_rollouts``).
    ``env_names`` label the before/after table's columns. ``on_records(records)`` receives the
    TrainingRun row (started, then failed or completed), a TrainingStep row per optimizer step,
    and each evaluation's episodes and eval_results. ``out_dir`` receives ``learning_curve.png``
    and ``before_after.md`` (default: ``cfg.checkpoint_dir``). Returns ``{"train_run_id", "evals",
    "table", "table_markdown", "curve", "history", "timings", "throughput", "data", "checkpoint",
    "resumed_from"}``.
    """
    from autoforge.rl import agent_card
    from autoforge.rl import curriculum
    from autoforge.rl.agent import make_rollout_fn
    from autoforge.rl.checkpoint import clean_staging, latest_checkpoint
    from autoforge.rl.curves import plot_learning_curve
    from autoforge.rl.trainer import copy_warmup, policy_from_config, train, training_step_record
    from autoforge.rl.warmup import exact_rate, recall_examples
    from autoforge.rollout.engine import EpisodeConfig
    from autoforge.rollout.judge import RuleJudge
    from autoforge.rollout.users import ErrorRates

    cfg = as_config(config)
    if cfg.torch_threads is not None:
        import torch

        torch.set_num_threads(cfg.torch_threads)
    write = on_records or (lambda records: None)
    say = progress or (lambda phase, step, total, metrics: None)
    out = Path(out_dir or cfg.checkpoint_dir)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}

    cleaned = clean_staging(cfg.checkpoint_dir)  # what a kill mid-save left (a replaced folder is put back)
    check_resumable(cfg)
    if cleaned:
        say("setup", 0, 0, {"message": "after an interrupted run: " + "; ".join(cleaned)})
    say("setup", 0, 0, {"message": "loaded curated tasks", **data.summary()})

    t = time.perf_counter()
    gold = gold_episodes(data, concurrency=min(cfg.rollout_concurrency, 4), seed=cfg.seed) if cfg.sft_gold else []
    timings["gold_replays_s"] = time.perf_counter() - t

    t = time.perf_counter()
    policy = policy_from_config(cfg, corpus_texts(data, gold, cfg.tool_schema))
    timings["policy_s"] = time.perf_counter() - t
    rid = train_run_id(cfg, data)
    run_row = TrainingRun(train_run_id=rid, config={**cfg.model_dump(mode="json"), "data": data.summary()}, run_id=run_id)
    write([run_row])
    # agent.json: how this run plays and evaluates its policy; save_checkpoint copies it into each checkpoint
    card = agent_card.build_agent_card(cfg, data, rid, chat_template=getattr(policy.tokenizer, "chat_template", None),
                                       device=getattr(policy.device, "type", None))
    agent_card.write_agent_card(cfg.checkpoint_dir, card)

    # ERPO's own tasks, kept out of SFT (cfg.erpo_unseen_tasks); without them ERPO draws from every train task
    unseen = unseen_ids(data, cfg)
    rl_pool = [t for t in data.train if t.task_id in unseen] or list(data.train)
    if unseen:
        say("setup", 0, 0, {"message": f"{len(unseen)} of {len(data.train)} train tasks kept out of SFT for ERPO"})

    evals_path = Path(cfg.checkpoint_dir) / "evals.json"
    evals = read_evals(evals_path)

    def evaluate(point: str) -> None:
        if point not in cfg.eval_at or point in evals:
            return
        say(f"eval:{point}", 0, len(data.test), {})
        ev = evaluate_policy(policy, data, cfg, point, on_records=write, run_id=rid, checkpoint=checkpoint_name())
        evals[point] = ev
        timings[f"eval_{point}_s"] = ev["wall_s"]
        atomic.write_text(evals_path, json.dumps(evals, indent=1))  # a kill leaves the previous evals.json whole
        say(f"eval:{point}", len(data.test), len(data.test), {"success_rate": ev["success_rate"]})

    def log_fn(step: int, phase: str, metrics: dict) -> None:
        write([training_step_record(rid, step, phase, metrics)])
        total = cfg.steps if phase == "erpo" else sft_total
        say(phase, step, total, metrics)

    marks: dict[str, float] = {}
    warmup: dict[str, Any] = {}
    learnable: dict[str, Any] = {}
    saved = curriculum.read_learnable(cfg.checkpoint_dir, rid)  # a resumed run trains on the list it chose

    def checkpoint_name() -> str | None:
        last = latest_checkpoint(cfg.checkpoint_dir)
        return last.name if last is not None else None

    def kept_tasks(payload: dict) -> list:
        learnable.update({k: v for k, v in payload.items() if k != "task_ids"})
        ids = set(payload["task_ids"])
        return [t for t in data.train if t.task_id in ids] or list(rl_pool)

    def choose_tasks(pol) -> list | None:
        """Pass rates before ERPO and the learnable filter (module curriculum); None: ERPO on every train task."""
        if cfg.steps == 0 or cfg.pass_rate_samples == 0:
            return None
        if saved is not None:  # chosen before the run was killed (its rows are stored)
            return kept_tasks(saved)
        import torch

        t0 = time.perf_counter()
        ids = set(sample_ids(sorted(t.task_id for t in rl_pool), cfg.pass_rate_max_tasks, cfg.seed, "pass_rate"))
        todo = [t for t in rl_pool if t.task_id in ids]
        k = cfg.pass_rate_samples
        say("learnable", 0, len(todo), {"message": f"pass rates before ERPO: {k} rollouts of each of {len(todo)} "
                                                   "train tasks"})
        torch.manual_seed(cfg.seed)
        rates = curriculum.estimate_pass_rates(pol, todo, make_rollout(cfg.seed + 7919), k,
                                               progress=lambda done, total: say("learnable", done, total, {}))
        kept, fallback = curriculum.select_learnable(rl_pool, rates, cfg.tasks_per_batch, cfg.learnable_filter)
        kept_ids = {t.task_id for t in kept}
        ckpt_name = checkpoint_name()
        write(curriculum.pass_rate_records(rid, rates, {t.task_id: t for t in data.train}, data.dags, kept_ids,
                                           point="sft", checkpoint=ckpt_name, run_id=run_id))
        per_env = curriculum.summarize(rates, kept_ids, env_names)
        wall = time.perf_counter() - t0
        timings["pass_rates_s"] = wall
        payload = curriculum.learnable_payload(
            rid, kept, fallback, per_env, enabled=cfg.learnable_filter, checkpoint=ckpt_name, k=k,
            n_estimated=len(todo), episodes=sum(r.n_episodes for r in rates.values()), wall_s=wall)
        curriculum.write_learnable(cfg.checkpoint_dir, payload)
        msg = curriculum.summary_message(per_env, len(kept), len(data.train), fallback, cfg.learnable_filter)
        say("learnable", len(todo), len(todo), {"message": msg, "learnable": per_env, "kept": len(kept),
                                                "fallback": fallback})
        return kept_tasks(payload)

    def before_erpo(pol) -> list | None:
        marks["sft_end"] = time.perf_counter()
        evaluate("sft")
        chosen = choose_tasks(pol)
        marks["erpo_start"] = time.perf_counter()
        return chosen

    try:
        evaluate("start")
        if cfg.copy_warmup_steps:
            t = time.perf_counter()
            warm = copy_warmup(policy, cfg, lambda step, phase, m: say("warmup", step, cfg.copy_warmup_steps, m))
            timings["warmup_s"] = time.perf_counter() - t
            if warm:
                warmup = {"steps": len(warm), "final_loss": round(float(warm[-1]["loss"]), 4),
                          "heldout_exact": round(exact_rate(policy, recall_examples(policy.tokenizer, 200,
                                                                                    cfg.seed + 1)), 3)}
                say("warmup", len(warm), cfg.copy_warmup_steps, {"done": True, **warmup})
        t = time.perf_counter()
        examples = []
        if cfg.sft_epochs > 0:
            episodes = [e for e in gold if e.task_id not in unseen] + \
                [e for e in extra_sft_episodes if cfg.sft_successful_rollouts and e.task_id not in unseen]
            episodes += augmented_episodes(episodes, data.train, cfg.sft_augment_copies, cfg.seed)
            examples = sft_examples(policy.tokenizer, episodes, data.schemas(cfg.tool_schema), cfg.sft_max_examples, cfg.seed)
        sft_total = -(-len(examples) // cfg.sft_batch_size) * cfg.sft_epochs

        def make_rollout(seed: int):  # ERPO's rollouts; the pass-rate estimate plays its own, seeded apart
            return make_rollout_fn(
                data.dags, data.tools_by_env, error_rates=ErrorRates.uniform(cfg.user_error_rate),
                judge=RuleJudge() if cfg.judge == "rule" else None,
                config=EpisodeConfig(max_turns=cfg.max_turns, max_tokens=cfg.max_episode_tokens, tool_schema=cfg.tool_schema),
                temperature=cfg.temperature, max_new_tokens=cfg.max_new_tokens, concurrency=cfg.rollout_concurrency,
                seed=seed, rules_by_env=data.judged)

        rollout_fn = make_rollout(cfg.seed)
        # resumed inside ERPO (before_erpo is not called again): the tasks chosen before the kill
        erpo_tasks = kept_tasks(saved) if saved is not None and cfg.steps and cfg.pass_rate_samples else rl_pool
        result = train(policy, erpo_tasks, rollout_fn, cfg, sft_examples=examples, log_fn=log_fn,
                       before_erpo=before_erpo, env_weights=resolve_env_weights(cfg, data, env_names))
        t_end = time.perf_counter()
        if "sft_end" in marks:
            timings["sft_s"] = marks["sft_end"] - t
            timings["erpo_s"] = t_end - marks["erpo_start"]
        else:  # resumed inside ERPO
            timings["erpo_s"] = t_end - t
        evaluate("end")
    except BaseException:
        write([run_row.model_copy(update={"status": "failed", "finished_at": utcnow()})])
        raise

    if result.last_checkpoint is not None:  # the card of this run's evaluation, also when resumed past its last save
        agent_card.stamp_checkpoint(result.last_checkpoint, card)
    history = result.history
    curve = plot_learning_curve(history, out / "learning_curve.png", title=f"{rid}", evals=evals, env_names=env_names)
    table = before_after_table(evals, env_names)
    md = table_markdown(table)
    atomic.write_text(out / "before_after.md", md + "\n")
    config = {**run_row.config, **({"learnable": learnable} if learnable else {})}
    write([run_row.model_copy(update={"status": "completed", "finished_at": utcnow(), "config": config})])
    return {"train_run_id": rid, "evals": evals, "table": table, "table_markdown": md, "curve": str(curve),
            "history": history, "timings": {k: round(v, 2) for k, v in timings.items()}, "warmup": warmup,
            "throughput": throughput(history), "data": data.summary(), "sft_examples": len(examples),
            "erpo_unseen_tasks": len(unseen),
            "learnable": learnable,
            "checkpoint": str(result.last_checkpoint) if result.last_checkpoint else None,
            "resumed_from": str(result.resumed_from) if result.resumed_from else None}


def throughput(history: list[dict]) -> dict[str, float | None]:
    """Mean tokens/s of SFT steps, ERPO update passes, and rollout generation (generated tokens / rollout time)."""
    def mean(xs):
        xs = [x for x in xs if isinstance(x, (int, float))]
        return round(sum(xs) / len(xs), 1) if xs else None

    sft = [r for r in history if r["phase"] == "sft"]
    erpo = [r for r in history if r["phase"] == "erpo"]
    gen = sum(r.get("gen_tokens") or 0 for r in erpo)
    roll = sum(r.get("rollout_s") or 0 for r in erpo)
    return {"sft_tokens_per_s": mean(r.get("tokens_per_s") for r in sft),
            "erpo_update_tokens_per_s": mean(r.get("tokens_per_s") for r in erpo),
            "rollout_gen_tokens_per_s": round(gen / roll, 1) if roll else None}
