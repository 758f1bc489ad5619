"""Learning-curve PNG from the per-step metrics (matplotlib's Agg canvas; no global backend switch).

One row of panels: the SFT loss (when the run had SFT), then per ERPO step and per environment
the rollout reward, the pass rate (share of rollouts with reward 1), the entropy of the sampled
tokens and the KL to the policy at the start of ERPO (the trainer's ``reward/<env>``,
``pass/<env>``, ``entropy/<env>``, ``kl_ref/<env>``), then the held-out pass^1 per environment
at each evaluation point (before training, after SFT, after ERPO). A panel with nothing to draw
is left out rather than drawn empty, and :func:`empty_panels` names any that would be.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable

from autoforge import atomic

# (title, per-environment metric prefix, all-environment metric)
ERPO_PANELS = (
    ("ERPO reward per environment", "reward/", "reward_mean"),
    ("ERPO pass rate per environment", "pass/", "pass_rate"),
    ("entropy of sampled tokens (nats/token)", "entropy/", "entropy_sampled"),
    ("KL to the policy at ERPO start", "kl_ref/", "kl_ref"),
)
EVAL_POINTS = (("start", "before"), ("sft", "after SFT"), ("end", "after ERPO"))


def _series(rows: list[dict], key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float))]


def panels_for(history: Iterable[dict], evals: dict | None = None) -> list[tuple[str, dict[str, list]]]:
    """``[(title, {line label: [(x, y), ...]})]``: what :func:`plot_learning_curve` draws."""
    rows = list(history)
    sft = [r for r in rows if r.get("phase") == "sft"]
    erpo = [r for r in rows if r.get("phase") == "erpo"]
    out: list[tuple[str, dict[str, list]]] = []
    if sft:
        out.append(("SFT loss", {"loss": _series(sft, "loss")}))
    for title, prefix, overall in ERPO_PANELS if erpo else ():
        envs = sorted({k[len(prefix):] for r in erpo for k in r if k.startswith(prefix)})
        lines = {e: _series(erpo, prefix + e) for e in envs}
        lines["all environments"] = _series(erpo, overall)
        out.append((title, {k: v for k, v in lines.items() if v}))
    if evals:
        lines = {}
        for point, label in EVAL_POINTS:
            ev = evals.get(point)
            if ev and ev.get("per_env"):
                lines[label] = sorted(ev["per_env"].items())
        out.append(("held-out pass^1 per environment", lines))
    return out


def empty_panels(history: Iterable[dict], evals: dict | None = None) -> list[str]:
    """Titles of the panels that would have no line at all (a bug when the run logged those metrics)."""
    return [title for title, lines in panels_for(history, evals) if not any(lines.values())]


def plot_learning_curve(history: Iterable[dict], path: str | Path, title: str = "", evals: dict | None = None,
                        env_names: dict[str, str] | None = None) -> Path:
    """Write the PNG (see the module docstring). ``history`` rows are ``{"phase": "sft"|"erpo", "step": int,
    <metric>: float, ...}`` (what the trainer returns and logs); ``evals`` is the run's evals.json
    (``{point: {"per_env": {env: pass^1}}}``); ``env_names`` label environment ids."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    names = env_names or {}
    panels = [(t, lines) for t, lines in panels_for(history, evals) if any(lines.values())]
    if not panels:
        panels = [("no steps logged", {})]
    fig = Figure(figsize=(4.0 * len(panels), 3.5))
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (label, lines) in zip(axes, panels):
        if label.startswith("held-out"):
            envs = sorted({e for pts in lines.values() for e, _ in pts})
            width = 0.8 / max(1, len(lines))
            for i, (point, pts) in enumerate(lines.items()):
                val = dict(pts)
                ax.bar([j + i * width for j in range(len(envs))], [val.get(e, 0.0) for e in envs], width, label=point)
            ax.set_xticks([j + width * (len(lines) - 1) / 2 for j in range(len(envs))])
            ax.set_xticklabels([names.get(e, e) for e in envs], fontsize=7, rotation=20)
            ax.set_ylim(0, 1)
        else:
            for key, pts in lines.items():
                if not pts:
                    continue
                overall = key == "all environments"
                ax.plot(*zip(*pts), marker="." if len(pts) < 40 else None, linewidth=1.8 if overall else 0.9,
                        color="black" if overall else None, linestyle="--" if overall else "-",
                        label=names.get(key, key))
            ax.set_xlabel("SFT step" if label == "SFT loss" else "ERPO step")
        ax.set_title(label, fontsize=9)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, dpi=100, format="png")
    return atomic.write_bytes(path, buf.getvalue())  # a killed run leaves the previous picture, never half of one
