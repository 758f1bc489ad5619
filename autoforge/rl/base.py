"""The shipped base checkpoint: a tiny policy that can copy values but knows no task.

A policy built from nothing cannot copy an email or an id from its context into a tool call
until it is taught to (autoforge.rl.warmup), and teaching it takes tens of CPU minutes — far
more than a demo has. So the package ships a *base* checkpoint, ``autoforge/data/base_policy/``
(2.6 MB), made by one documented command::

    autoforge base-checkpoint                 # rebuild it in place (32 min on one thread of a busy 2-core CPU)
    autoforge base-checkpoint --check         # rebuild into a temp dir, compare the weights hash

What it was trained on, and only that:

* **tokenizer**: byte-level BPE (:func:`autoforge.rl.policy.build_tokenizer`) trained on the
  bundled tool *documentation* (``autoforge/data/tooldocs``, read as text, sorted by path), the
  agent's system prompt and the chat boilerplate — no task, request, fact or dialogue;
* **weights**: a Llama model (:func:`autoforge.rl.policy.tiny_llama_config`) initialised from
  ``seed`` and trained ``steps`` steps on the copy warm-up's synthetic recall dialogues
  (:func:`autoforge.rl.warmup.recall_examples`: random keys and values drawn from the
  tokenizer's words, a fact list in, a ``submit`` call copying them out) — it never sees a
  tool of the corpus, a task or a gold replay.

Everything is seeded and runs on the CPU with one torch thread, so the same :class:`BaseSpec`
gives the same weights: ``base_manifest.json`` records the spec, the weights' SHA-256
(:func:`weights_sha256`, over the tensors in name order) and the held-out recall rate, and
``--check`` rebuilds and compares (tests/test_rl_base.py does it on a tiny spec).
:func:`ensure_base_checkpoint` is what ``autoforge demo`` calls: the shipped checkpoint when it
is there and matches the spec, else it builds one first and says how long that takes.

What it is worth so far: the shipped spec (3,000 steps of 32, 2 layers, hidden 128) copies 19% of
held-out recall dialogues exactly (the 700-step spec before it: 0%). SFT from it writes
well-formed dialogues on the demo's tasks. The demo's 258 SFT steps from it (258 short train
tasks, 3 value-substituted copies each, 2 epochs) solve 5-6 of 24 held-out tasks in two seeds
(README, training). Next to try: ``toolbox=0.5`` (choose the tool
from a listed set) or a 4-layer spec (~1.6x the warm-up and SFT time).
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from autoforge.errors import ConfigError

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
BASE_DIR = DATA_DIR / "base_policy"  # the shipped checkpoint (package data: pyproject's "data/**/*")
MANIFEST = "base_manifest.json"
SECONDS_PER_STEP = 0.32  # per 16 dialogues, measured: hidden 128 x 2 layers, 3,000 steps of 32 took 1,905 s on one thread of a busy 2-core machine

Say = Callable[[str], None]


class BaseSpec(BaseModel):
    """How the base checkpoint is built. Every field is recorded in its manifest. Source: ours."""

    model_config = ConfigDict(extra="forbid")

    vocab_size: int = Field(2048, ge=300, description="BPE vocabulary trained on the bundled tool docs.")
    hidden_size: int = Field(128, ge=8, description="Llama hidden size (128 x 2 layers, vocab 2048: ~0.65M parameters).")
    num_layers: int = Field(2, ge=1, description="Llama decoder layers (2: the fewest that can recall a value by its "
                            "key; each more layer costs the demo's CPU minutes).")
    num_heads: int = Field(4, ge=1, description="Attention heads.")
    max_positions: int = Field(4096, ge=64, description="Context length in tokens.")
    steps: int = Field(3000, ge=0, description="Copy warm-up steps (recall dialogues); 3,000 x 32 took 32 minutes on "
                       "one thread of a busy 2-core CPU (0.19 held-out exact recall of whole dialogues, whose first lookup "
                       "call is partly random; 700 x 16 gave 0.00).")
    batch_size: int = Field(32, ge=1, description="Recall dialogues per step.")
    lr: float = Field(3e-3, gt=0, description="Peak learning rate (linear warm-up 5%, cosine decay to 10%).")
    seed: int = Field(0, ge=0, description="Seed of the initial weights and of the dialogues.")
    micro_batch_size: int = Field(8, ge=1, description="Dialogues per forward/backward pass (memory only).")
    toolbox: float = Field(0.0, ge=0, le=1, description="Share of warm-up dialogues that come with a tool list to "
                           "choose from (autoforge.rl.warmup.toolbox_dialogue): pick the tool a request names, copy "
                           "its argument names from the list. 0 (the shipped spec) = recall dialogues only; 0.5 makes "
                           "the warm-up ~1.6x slower and is not measured yet.")


def tokenizer_corpus() -> list[str]:
    """The text the base tokenizer is trained on: the bundled tool docs (sorted by path), the system
    prompt, and the fact-list phrasing of the user — documentation and boilerplate, no task."""
    from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT

    root = DATA_DIR / "tooldocs"
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".json", ".yaml", ".yml", ".md"))
    if not files:
        raise ConfigError(f"base checkpoint: no tool docs under {root}; reinstall the package (its data files are missing)")
    texts = [DEFAULT_SYSTEM_PROMPT, "Sure, here you go:\n- email: a@b.com\n- user id: U0001"]
    texts += [p.read_text(encoding="utf-8") for p in files]
    return texts


def weights_sha256(model_dir: str | Path) -> str:
    """SHA-256 over the model's tensors (name, dtype, shape, bytes) in name order: equal weights, equal hash
    (independent of the safetensors file's metadata)."""
    from safetensors.torch import load_file

    h = hashlib.sha256()
    tensors = load_file(str(Path(model_dir) / "model.safetensors"))
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def read_manifest(model_dir: str | Path) -> dict[str, Any] | None:
    p = Path(model_dir) / MANIFEST
    return json.loads(p.read_text()) if p.is_file() else None


def build_base_checkpoint(out_dir: str | Path = BASE_DIR, spec: BaseSpec | None = None, *,
                          progress: Callable[[int, int, dict], None] | None = None) -> dict[str, Any]:
    """Build the base checkpoint into ``out_dir`` (replacing what is there); returns its manifest.

    Tokenizer from :func:`tokenizer_corpus`, weights from ``spec.seed``, then ``spec.steps`` copy
    warm-up steps on CPU with one thread (reproducible). Written all or nothing
    (:func:`autoforge.rl.checkpoint.save_model_dir`), with ``base_manifest.json`` beside the weights.
    """
    import tempfile

    import torch

    from autoforge.rl.checkpoint import save_model_dir
    from autoforge.rl.config import TrainConfig
    from autoforge.rl.policy import build_tiny_policy, count_parameters, load_policy
    from autoforge.rl.trainer import set_seed, sft
    from autoforge.rl.warmup import exact_rate, recall_examples

    spec = spec or BaseSpec()
    out = Path(out_dir)
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same reductions in the same order, the same weights
    try:
        with tempfile.TemporaryDirectory(prefix="autoforge-base-") as tmp:
            init = build_tiny_policy(Path(tmp) / "init", tokenizer_corpus(), vocab_size=spec.vocab_size,
                                     hidden_size=spec.hidden_size, num_layers=spec.num_layers, num_heads=spec.num_heads,
                                     max_positions=spec.max_positions, seed=spec.seed)
            policy = load_policy(init, device="cpu")
            cfg = TrainConfig(device="cpu", seed=spec.seed, sft_epochs=1, sft_lr=spec.lr, sft_batch_size=spec.batch_size,
                              micro_batch_size=spec.micro_batch_size, sft_schedule="cosine",
                              sft_share_prefix=False,  # recall dialogues share no prompt; the micro-batches stay by length
                              checkpoint_dir=str(Path(tmp) / "warmup"), checkpoint_every=10**9,
                              tiny_vocab_size=spec.vocab_size, tiny_hidden_size=spec.hidden_size,
                              tiny_num_layers=spec.num_layers, tiny_num_heads=spec.num_heads)
            set_seed(spec.seed)
            hist: list[dict] = []
            if spec.steps:
                examples = recall_examples(policy.tokenizer, spec.steps * spec.batch_size, spec.seed, spec.toolbox)
                sft(policy, examples, cfg, (lambda s, _p, m: progress(s, spec.steps, m)) if progress else None, hist)
            exact = exact_rate(policy, recall_examples(policy.tokenizer, 200, spec.seed + 1))
            exact_toolbox = exact_rate(policy, recall_examples(policy.tokenizer, 200, spec.seed + 1, 1.0))
            policy.model.eval()
            save_model_dir(out, policy.model, policy.tokenizer)
    finally:
        torch.set_num_threads(threads)
    manifest = {
        "what": "autoforge base checkpoint: tokenizer from the bundled tool docs, weights from the copy warm-up's "
                "synthetic recall dialogues only (no task, no gold replay)",
        "command": "autoforge base-checkpoint" + ("" if out.resolve() == BASE_DIR else f" --out {out}"),
        "spec": spec.model_dump(),
        "parameters": count_parameters(policy.model),
        "vocab": len(policy.tokenizer),
        "weights_sha256": weights_sha256(out),
        "heldout_recall_exact": round(exact, 3),
        "heldout_toolbox_exact": round(exact_toolbox, 3),
        "final_loss": round(float(hist[-1]["loss"]), 4) if hist else None,
        "build_s": round(time.perf_counter() - t0, 1),
        "torch": torch.__version__,
    }
    from autoforge import atomic

    atomic.write_text(out / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    return manifest


def estimated_build_s(spec: BaseSpec | None = None) -> float:
    """Rough build time of ``spec`` on one CPU thread (scaled from the default spec's measured rate)."""
    spec = spec or BaseSpec()
    size = (spec.hidden_size / 128) ** 2 * (spec.num_layers / 2) * (spec.batch_size / 16)
    size *= 1 + 1.27 * spec.toolbox  # toolbox dialogues are ~2.3x as long (token counts: 207 -> 338 mean at 0.5; not timed)
    return spec.steps * SECONDS_PER_STEP * size + 10


def ensure_base_checkpoint(path: str | Path = BASE_DIR, spec: BaseSpec | None = None, say: Say | None = None) -> Path:
    """The base checkpoint at ``path``: used as it is when its manifest records ``spec``; otherwise built
    there first (saying so, with the expected time). Returns the model directory."""
    spec = spec or BaseSpec()
    say = say or (lambda text: None)
    p = Path(path)
    man = read_manifest(p)
    if man is not None and man.get("spec") == spec.model_dump() and (p / "model.safetensors").is_file():
        return p
    why = "is absent" if man is None else "was built from another spec"
    say(f"base checkpoint {p} {why}: building it (tokenizer from the bundled tool docs, {spec.steps} copy warm-up "
        f"steps; about {estimated_build_s(spec) / 60:.0f} min on one CPU core) - `autoforge base-checkpoint` does the same")
    t = time.perf_counter()
    man = build_base_checkpoint(p, spec)
    say(f"base checkpoint built in {time.perf_counter() - t:.0f} s (held-out recall {man['heldout_recall_exact']:.2f})")
    return p
