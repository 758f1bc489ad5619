"""Learning-curve PNG from the per-step metrics (matplotlib's Agg canvas; no global backend switch)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

DEFAULT_PANELS = (
    ("reward", ("reward_mean", "reward_mean_valid")),
    ("loss", ("loss",)),
    ("entropy", ("entropy",)),
    ("clip / KL", ("clip_frac", "kl")),
)


def plot_learning_curve(history: Iterable[dict], path: str | Path, panels=DEFAULT_PANELS, title: str = "") -> Path:
    """Write a PNG with one panel per metric group; SFT and ERPO steps are drawn back to back.

    ``history`` rows are ``{"phase": "sft"|"erpo", "step": int, <metric>: float, ...}`` (what the
    trainer returns and logs). Per-environment rewards (``reward/<env>``) are added to the
    reward panel as thin lines.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = list(history)
    sft_n = max([r["step"] for r in rows if r.get("phase") == "sft"], default=0)

    def x_of(r: dict) -> int:  # ERPO steps continue after the SFT steps on the x axis
        return r["step"] + (sft_n if r.get("phase") == "erpo" else 0)

    fig = Figure(figsize=(4.2 * len(panels), 3.4))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    env_keys = sorted({k for r in rows for k in r if k.startswith("reward/")})
    for ax, (label, keys) in zip(axes, panels):
        for k in keys:
            pts = [(x_of(r), r[k]) for r in rows if isinstance(r.get(k), (int, float))]
            if pts:
                ax.plot(*zip(*pts), marker=".", label=k)
        if label == "reward":
            for k in env_keys:
                pts = [(x_of(r), r[k]) for r in rows if isinstance(r.get(k), (int, float))]
                if pts:
                    ax.plot(*zip(*pts), linewidth=0.8, alpha=0.6, label=k)
        if sft_n:
            ax.axvline(sft_n + 0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_title(label)
        ax.set_xlabel("step (SFT, then ERPO)" if sft_n else "step")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path
