"""Numbers and plots of ``benchmarks/learning_evidence.py``: held-out gold-replay NLL, pass^1 with a
bootstrap CI over tasks, per-step series of training metrics, and the PNGs of its results."""

from __future__ import annotations

from pathlib import Path

from autoforge.rl.config import TrainConfig


def heldout_nll(model_dir: str, wh: str, cfg: TrainConfig) -> float:
    """Mean per-token NLL of the agent turns of held-out gold replays (the SFT objective on unseen tasks)."""
    import torch

    from autoforge.pipeline.train import load_curated
    from autoforge.rl.data import gold_episodes, sft_examples
    from autoforge.rl.policy import load_policy
    from autoforge.rl.trainer import _forward_logprobs
    from autoforge.rl.trajectory import Trajectory, collate

    data = load_curated(wh, cfg)
    pol = load_policy(model_dir, device=cfg.device)
    ex = sft_examples(pol.tokenizer, gold_episodes(data, data.test), data.schemas(cfg.tool_schema))
    tot, n = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(ex), 8):
            b = collate([Trajectory("t", "e", ids, m, [0.0] * len(ids), 0.0) for ids, m in ex[i:i + 8]], pol.pad_id)
            lp, _ = _forward_logprobs(pol.model, b, 1.0)
            mask = b["loss_mask"][:, 1:]
            tot -= float((lp * mask).sum())
            n += int(mask.sum())
    return tot / max(n, 1)


def pass_ci(per_task: dict[str, list[float]], n_boot: int = 2000) -> dict:
    """Mean pass^1 over tasks (each task's success averaged over seeds) with a 95% bootstrap CI over tasks."""
    from autoforge.rollout.passk import bootstrap_ci

    vals = [sum(v) / len(v) for v in per_task.values()]
    if not vals:
        return {"pass^1": None, "ci": [None, None], "n_tasks": 0}
    lo, hi = bootstrap_ci(vals, n_boot=n_boot, seed=0)
    return {"pass^1": round(sum(vals) / len(vals), 3), "ci": [round(lo, 3), round(hi, 3)], "n_tasks": len(vals)}


def group_outcomes(outcome_lists: list[list[tuple[str, str, float]]], env_id: str | None) -> dict[str, list[float]]:
    per_task: dict[str, list[float]] = {}
    for outs in outcome_lists:
        for tid, env, r in outs:
            if env_id is None or env == env_id:
                per_task.setdefault(tid, []).append(r)
    return per_task


def mean_of(xs) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float))]
    return sum(xs) / len(xs) if xs else None


def series(histories: list[list[dict]], key: str, steps: int) -> list[float | None]:
    """``key`` per ERPO step, averaged over runs (None where no run logged it)."""
    out = []
    for s in range(1, steps + 1):
        out.append(mean_of([h.get(key) for hist in histories for h in hist if h["phase"] == "erpo" and h["step"] == s]))
    return [None if v is None else round(v, 4) for v in out]


def plot_lines(path: Path, title: str, panels: list[tuple[str, dict[str, list]]], ylabel: str) -> str:
    """One PNG: a panel per (subtitle, {line label: values per step})."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * len(panels), 3.4), dpi=110)
    FigureCanvasAgg(fig)
    for i, (sub, lines) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), i + 1)
        for label, ys in lines.items():
            xs = [k + 1 for k, y in enumerate(ys) if y is not None]
            ax.plot(xs, [y for y in ys if y is not None], marker="o", ms=3, label=label)
        ax.set_title(sub, fontsize=9)
        ax.set_xlabel("ERPO step")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def plot_heldout(path: Path, rows: list[dict], envs: list[str], labels: list[str]) -> str:
    """Grouped bars: held-out pass^1 per environment (and overall) per arm, with 95% CIs."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.6), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    groups = envs + ["all"]
    width = 0.8 / len(labels)
    for j, label in enumerate(labels):
        ys, err_lo, err_hi = [], [], []
        for g in groups:
            r = next(x for x in rows if x["arm"] == label and x["env"] == g)
            ys.append(r["pass^1"] or 0.0)
            err_lo.append((r["pass^1"] or 0.0) - (r["ci"][0] or 0.0))
            err_hi.append((r["ci"][1] or 0.0) - (r["pass^1"] or 0.0))
        ax.bar([i + j * width for i in range(len(groups))], ys, width, yerr=[err_lo, err_hi], capsize=2, label=label)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(groups))], groups)
    ax.set_ylabel("held-out pass^1 (95% CI)")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    fig.savefig(path)
    return str(path)


def round3(x):
    """``x`` to 3 decimals (None stays None)."""
    return None if x is None else round(x, 3)
