"""Training configuration: every knob with its meaning and its source.

Sources: "paper" = AutoForge (Cai et al., arXiv 2512.22857) as read in docs/paper_notes.md#erpo;
"DAPO" = Yu et al. 2025 (clip-higher, token-level loss, dynamic sampling); "GRPO" = Shao et al.
2024 (group-relative advantage, KL to a reference); "ours" = a default we picked where the paper
is silent (it reports no learning rate, eps, beta, turns or temperature). CPU-sized defaults are
marked; the paper's values are quoted in the description.
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from autoforge.errors import ConfigError


class TrainConfig(BaseModel):
    """SFT cold start then ERPO. Load with :meth:`from_file` (YAML or JSON)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # ----------------------------------------------------------------- policy
    model_path: str | None = Field(
        None, min_length=1,
        description="Local transformers model directory (or a hub id with allow_download) of the policy. "
        "None: build the tiny offline policy (Llama config + locally trained BPE tokenizer) into "
        "<checkpoint_dir>/base. Source: ours (paper uses Qwen3-30B-A3B-Thinking-2507).",
    )
    allow_download: bool = Field(
        False,
        description="Allow fetching model_path from the Hugging Face hub when it is not a local directory. "
        "Off by default so nothing is downloaded (HF_HUB_OFFLINE behaviour). Source: ours.",
    )
    tiny_vocab_size: int = Field(2048, ge=300, description="Tiny policy: BPE vocabulary size trained on the corpus. Source: ours.")
    tiny_hidden_size: int = Field(192, ge=8, description="Tiny policy: Llama hidden size. Source: ours (192 hidden x 4 layers, vocab 2048: ~2.2M params).")
    tiny_num_layers: int = Field(4, ge=1, description="Tiny policy: number of Llama decoder layers. Source: ours.")
    tiny_num_heads: int = Field(4, ge=1, description="Tiny policy: attention heads (hidden size must divide). Source: ours.")
    tiny_max_positions: int = Field(4096, ge=64, description="Tiny policy: maximum context length in tokens. Source: ours.")
    device: str = Field("auto", pattern=r"^(auto|cpu|mps|cuda(:\d+)?)$", description="'auto' (cuda if available, else cpu), 'cpu', 'cuda' or 'cuda:N'. Source: ours.")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        "float32", description="Parameter dtype of the policy during training. Source: ours (float32 on CPU)."
    )
    torch_threads: int | None = Field(
        None, ge=1, description="torch intra-op CPU threads for the run (torch.set_num_threads); None = torch's default. "
        "On small shared CPU machines 1 is often several times faster for a tiny policy (measured 9 vs 150 ms per "
        "decode step on a loaded 2-core machine). Ours."
    )
    seed: int = Field(0, ge=0, le=2**31 - 1, description="Seed for torch, python random, task sampling and generation. Source: ours.")

    # ----------------------------------------------------------------- rollouts
    tasks_per_batch: int = Field(
        4, ge=1, description="Tasks sampled per ERPO step. Paper: 32 (§4.1); 4 is a CPU-sized default (ours)."
    )
    rollouts_per_task: int = Field(
        4, ge=2, description="Rollouts M per task (GRPO group size). Paper: 8 (§4.1); 4 is a CPU-sized default (ours)."
    )
    max_turns: int = Field(
        30, ge=1, description="Maximum agent turns per episode before it is cut (termination=max_turns). "
        "Paper: not reported; 30 is ours (docs/paper_notes.md#where-the-paper-is-silent)."
    )
    max_new_tokens: int = Field(
        256, ge=1, description="Maximum tokens the policy generates in one turn. Paper: not reported; ours."
    )
    max_episode_tokens: int = Field(
        4096, ge=16, description="Maximum agent-generated tokens over one episode (the engine ends it with "
        "termination=max_tokens). Paper: not reported; ours."
    )
    temperature: float = Field(
        1.0, ge=0.0, description="Sampling temperature at rollout; the update recomputes log-probs with the same "
        "temperature so the PPO ratio is exactly 1 on-policy. 0 = greedy. Paper: not reported; ours (1.0 as in DAPO)."
    )
    env_weights: dict[str, Annotated[float, Field(ge=0)]] | None = Field(
        None, description="Per-environment sampling weights of the ERPO batch (env id or name -> weight): an "
        "environment's expected share of each step's tasks is in proportion to its weight (unlisted: 1; 0: never "
        "sampled); None = tasks uniformly, so each environment in proportion to its task count "
        "(trainer.sample_tasks). Paper: batches mix environments, weights not reported; ours."
    )

    # ----------------------------------------------------------------- ERPO
    steps: int = Field(10, ge=0, description="Number of ERPO steps (one batch of rollouts -> one or more updates each). Ours.")
    lr: float = Field(
        1e-5, gt=0, description="AdamW learning rate for ERPO. Paper: not reported; ~1e-6 is plausible for a 30B "
        "model (docs/paper_notes.md#where-the-paper-is-silent); tiny CPU policies need 1e-4..1e-3 (ours)."
    )
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay. Ours (0, as in most GRPO recipes).")
    adam_betas: tuple[float, float] = Field((0.9, 0.999), description="AdamW betas. Ours (torch defaults).")
    max_grad_norm: float = Field(1.0, gt=0, description="Global gradient-norm clip per optimizer step. Ours (GRPO/DAPO use 1.0).")
    updates_per_batch: int = Field(
        1, ge=1, description="Optimizer steps on each rollout batch (PPO epochs; GRPO's mu). 1 = strictly on-policy. Ours."
    )
    micro_batch_size: int = Field(
        4, ge=1, description="Rollouts per forward/backward pass; gradients accumulate to one step. Memory knob only: "
        "the loss is normalised by the whole batch's token count. Ours."
    )
    clip_eps_low: float = Field(
        0.2, ge=0, description="PPO clip: ratio lower bound 1 - eps_low (paper Eq. 2, value not reported; 0.2 as PPO/GRPO)."
    )
    clip_eps_high: float = Field(
        0.28, ge=0, description="PPO clip: ratio upper bound 1 + eps_high. 0.28 = DAPO clip-higher; set 0.2 for "
        "symmetric GRPO clipping. Paper: value not reported."
    )
    beta: float = Field(
        0.0, ge=0, description="Weight of KL(pi_theta || pi_ref) (k3 estimator) to a frozen copy of the policy taken "
        "at the start of ERPO. Paper Eq. 2 has a beta term, value unreported; 0 as DAPO (docs/paper_notes.md#erpo-objective)."
    )
    advantage_level: Literal["env", "task"] = Field(
        "env", description="'env': ERPO environment-level std in the advantage denominator (paper Eq. 4). "
        "'task': GRPO per-task std (paper Eq. 3; the ablation baseline)."
    )
    adv_eps: float = Field(1e-6, gt=0, description="eps added to the advantage std denominator. Ours "
                           "(docs/paper_notes.md#environment-level-advantage).")
    mask_user_errors: bool = Field(
        True, description="MEU: drop rollouts the user-error judge flagged from the statistics and the loss (paper §3.4). "
        "False = the 'no masking' ablation."
    )
    dynamic_sampling: bool = Field(
        True, description="DAPO dynamic sampling after MEU masking: drop tasks whose valid rollouts are all right, all "
        "wrong, or fewer than 2 (paper §4.1 uses DAPO's filter); refill_max_rollouts sets how far the batch is refilled."
    )
    refill_max_rollouts: float = Field(
        2.0, ge=0, description="Dynamic sampling refills the step: while fewer than tasks_per_batch task groups have "
        "mixed rewards, more tasks are sampled and rolled out, up to this many times the step's base rollouts "
        "(tasks_per_batch x rollouts_per_task) extra; 0 = no refilling (DAPO Yu et al. 2025 §3.2 keeps sampling "
        "until the batch is full; the cap is ours, so a step on tasks the policy always or never solves ends)."
    )
    pass_rate_samples: int = Field(
        4, ge=0, description="Before ERPO (after SFT), each train task is played this many times as ERPO plays it "
        "(temperature, injected user errors, judge) to estimate its pass rate (reward 1.0) under the policy; the "
        "estimates are stored per checkpoint (task_pass_rates, v_learnable_tasks, v_curriculum). 0 = no estimate "
        "(and no learnable_filter). Not run when steps is 0. Source: ours (curriculum by pass rate, issue 34)."
    )
    pass_rate_max_tasks: int | None = Field(
        None, ge=1, description="Estimate the pass rates of at most this many train tasks (a seeded sample; the cost is "
        "pass_rate_samples episodes per task); with learnable_filter ERPO then trains on the learnable tasks of the "
        "sample. None = every train task. Ours."
    )
    erpo_unseen_tasks: int = Field(
        0, ge=0, description="Train tasks kept out of SFT for ERPO (a seeded sample of this many, at most half the train "
        "tasks): the pass-rate estimate and ERPO draw from them, so a rollout succeeds by reading the values of a "
        "dialogue it has not been taught, which is what a held-out task asks; SFT trains on the rest. 0 = SFT and "
        "ERPO share every train task (ERPO then mostly replays what SFT memorised). Ours (issue 34): RL prompts kept "
        "apart from the SFT data."
    )
    learnable_filter: bool = Field(
        True, description="ERPO trains only on the tasks whose estimated pass rate is strictly between 0 and 1 (a task "
        "always or never solved gives groups with one reward, which dynamic sampling drops); when fewer than "
        "tasks_per_batch are, on every task (the fallback is logged). The kept ids are kept in "
        "<checkpoint_dir>/learnable.json for a resumed run. Source: DAPO's dynamic sampling, applied once before ERPO "
        "(ours)."
    )
    log_reference_kl: bool = Field(
        True, description="Log per environment the KL from the policy to itself at the start of ERPO (k3 on the "
        "sampled tokens; a frozen copy kept as with beta > 0): one no-grad forward pass of the step's rollouts. "
        "Ours: lets the learning curve show how far ERPO moved the policy even when beta = 0."
    )
    recompute_old_logprobs: bool = Field(
        False, description="Recompute pi_old log-probs with the current weights before the update instead of using "
        "those recorded at rollout (use when rollouts come from a server whose log-probs are unavailable). Ours."
    )

    # ----------------------------------------------------------------- SFT cold start
    sft_epochs: int = Field(
        1, ge=0, description="Epochs of SFT cold start before ERPO (0 = skip). Paper: an SFT stage exists, "
        "hyper-parameters unreported (docs/paper_notes.md#training-setup); ours."
    )
    sft_lr: float = Field(1e-4, gt=0, description="AdamW learning rate for SFT. Ours.")
    sft_batch_size: int = Field(8, ge=1, description="Sequences per SFT optimizer step. Ours.")
    sft_schedule: Literal["constant", "cosine"] = Field(
        "cosine", description="SFT learning-rate schedule: 'cosine' = linear warm-up over sft_warmup_frac of the steps, "
        "then cosine decay to 10% of sft_lr; 'constant' = sft_lr throughout. A tiny policy trained from scratch "
        "at a high lr needs the warm-up and the decay to converge in a few hundred steps. Ours."
    )
    sft_context_weight: float = Field(
        0.0, ge=0, description="SFT loss weight of the NON-agent tokens of a dialogue (user turns, tool outputs, prompt), "
        "relative to 1 for agent tokens. 0 = train on agent tokens only (the policy's own actions). A small positive "
        "weight adds plain language modelling of the dialogue, which teaches a from-scratch tiny policy to copy ids "
        "and emails that appeared earlier in the context (induction) much sooner. Ours."
    )
    sft_share_prefix: bool = Field(
        True, description="SFT micro-batches group the dialogues of one environment and run their shared system "
        "prompt and tool list once per micro-batch (its KV cache repeated over the rows, with grad): the same loss "
        "and gradient up to float order; the demo's SFT steps (8 dialogues of 3 environments) take ~2.6x less "
        "CPU. Off: one full pass per row, micro-batches by length. Only with sft_context_weight 0 (the prompt is not trained). Ours."
    )
    sft_warmup_frac: float = Field(0.05, ge=0, le=1, description="Fraction of SFT steps spent warming the lr up "
                                   "(sft_schedule='cosine'). Ours.")

    sft_gold: bool = Field(
        True, description="SFT on gold replays: each train task's gold DAG played through the dialogue by the oracle "
        "agent with the offline user, rendered token by token as the policy would see it (paper §3.4 cold start). Ours."
    )
    sft_successful_rollouts: bool = Field(
        True, description="Also SFT on successful, unflagged episodes of train tasks already stored in the warehouse "
        "(reward 1, judge did not flag; any agent except the oracle, whose episodes are the gold replays). Source: the paper's cold start uses verified trajectories; ours."
    )
    copy_warmup_steps: int = Field(
        0, ge=0, description="Steps of the copy warm-up before SFT (autoforge.rl.warmup): synthetic fact-list -> "
        "tool-call dialogues with random keys and values, so a policy built from nothing learns associative recall "
        "(find a value by its key in the context, copy it) — the skill gold replays alone do not teach a small "
        "policy in CPU time (benchmarks/copy_skill.py). 0 = none (pretrained models need none). Ours."
    )
    copy_warmup_batch_size: int = Field(32, ge=1, description="Dialogues per copy warm-up step (lr: sft_lr). Ours.")
    sft_augment_copies: int = Field(
        0, ge=0, description="Value-substituted re-tellings added per gold replay (autoforge.rl.augment): every id, "
        "email and name in the dialogue re-drawn consistently, so the SFT loss can only be fit by copying values from "
        "the context, not by memorising them. Training text only, never executed. Ours."
    )
    sft_max_examples: int | None = Field(None, ge=1, description="Cap on SFT examples (None = all). Ours.")

    # ----------------------------------------------------------------- data: which curated tasks (v_curated_tasks)
    envs: list[str] | None = Field(
        None, description="Environments to train and evaluate on (env ids or names); None = all. Ours."
    )
    min_tool_calls: int | None = Field(None, ge=1, description="Keep tasks with at least this many gold tool calls. Ours.")
    max_tool_calls: int | None = Field(
        None, ge=1, description="Keep tasks with at most this many gold tool calls (a curriculum for small policies). Ours."
    )
    max_reasoning_nodes: int | None = Field(
        None, ge=0, description="Keep tasks with at most this many reasoning nodes (0 = pure lookup-and-act). Ours."
    )
    max_train_tasks: int | None = Field(None, ge=1, description="Cap on train-split tasks (a seeded sample). Ours.")
    max_eval_tasks: int | None = Field(None, ge=1, description="Cap on held-out (test-split) tasks evaluated. Ours.")
    prompt_tools: Literal["all", "used"] = Field(
        "all", description="Tools listed in the policy's system prompt: 'all' accepted tools of the environment, or "
        "'used' = only the tools some selected task (train or held-out) of that environment calls in its gold DAG — a "
        "smaller action space and a much shorter prompt for tiny CPU policies. Ours (the paper lists all tools)."
    )
    tool_schema: Literal["full", "compact", "brief"] = Field(
        "full", description="How tool schemas are rendered into the policy's prompt: 'full' JSON Schemas (descriptions, "
        "patterns, defaults), 'compact' (types, properties, enums, required only; first sentence of the tool "
        "description) — about a third of the prompt tokens for tiny CPU policies — or 'brief' (names and types in a "
        "shorthand, optional names ending in '?'; the demo's retail prompt prefix 1,562 -> 875 tokens; a policy's prompt only, not a JSON Schema "
        "for an OpenAI-compatible agent; rollout.toolcalls.brief_schema). Ours (the paper shows full docs)."
    )

    # ----------------------------------------------------------------- episodes (autoforge.rollout)
    user_error_rate: float = Field(
        0.0, ge=0, le=1, description="Probability that the offline simulated user injects an error in a training "
        "episode (split evenly over wrong fact / withheld fact / premature stop). Paper §3.4 motivates MEU with such "
        "errors (value unreported); 0.2 is ours, the ablation setting. Evaluation always uses an error-free user."
    )
    judge: Literal["rule", "none"] = Field(
        "rule", description="User-error judge whose flags MEU masks: 'rule' (offline RuleJudge) or 'none' (every "
        "scored rollout valid). Paper: an LLM judge; ours offline."
    )
    rollout_concurrency: int = Field(
        8, ge=1, description="Episodes played at once; their generation requests are batched on the one model. Ours."
    )

    # ----------------------------------------------------------------- held-out evaluation (split = 'test')
    eval_at: list[Literal["start", "sft", "end"]] = Field(
        ["start", "sft", "end"], description="When to measure held-out pass^1 on the test split of v_curated_tasks "
        "(never trained on): at the start (base policy), after SFT, at the end (after ERPO). Ours."
    )
    eval_trials: int = Field(1, ge=1, description="Episodes per held-out task (pass^k for k <= trials). Ours: 1 (pass^1).")
    eval_temperature: float = Field(
        0.0, ge=0, description="Sampling temperature at evaluation; 0 = greedy (deterministic pass^1). Ours."
    )

    # ----------------------------------------------------------------- checkpoints
    checkpoint_dir: str = Field(
        "checkpoints/erpo", min_length=1, description="Folder for checkpoints (model + optimizer + RNG + step + config) and the "
        "tiny base policy. Ours."
    )
    checkpoint_every: int = Field(
        5, ge=1, description="Save a checkpoint every N optimizer steps of each phase (and always at a phase's end). Ours."
    )
    keep_checkpoints: int = Field(2, ge=1, description="Newest checkpoints kept on disk; older ones are deleted. Ours.")

    @model_validator(mode="after")
    def _check(self) -> "TrainConfig":
        if self.tiny_hidden_size % self.tiny_num_heads:
            raise ValueError(f"tiny_hidden_size ({self.tiny_hidden_size}) must be divisible by tiny_num_heads ({self.tiny_num_heads})")
        return self

    # ----------------------------------------------------------------- io

    @classmethod
    def from_file(cls, path: str | Path) -> "TrainConfig":
        """Read a YAML (.yaml/.yml) or JSON file. Unknown keys are an error."""
        p = Path(path)
        kind = "JSON" if p.suffix == ".json" else "YAML"
        try:
            if p.is_dir():
                raise ConfigError(f"training config {p} is a directory: give a YAML/JSON file of TrainConfig fields, "
                                  "e.g. --config train.yaml holding 'steps: 20'")
            if p.exists() and not p.is_file():
                raise ConfigError(f"training config {p} is not a regular file (a device, pipe or socket): give a "
                                  "YAML/JSON file of TrainConfig fields, e.g. --config train.yaml holding 'steps: 20'")
            if not p.is_file():
                raise ConfigError(f"training config {p} does not exist; write a YAML/JSON file with TrainConfig fields "
                                  "(e.g. 'steps: 20'; every field is documented in autoforge/rl/config.py)")
            text = p.read_text(encoding="utf-8")
        except UnicodeDecodeError as e:
            raise ConfigError(f"training config {p} is not UTF-8 text ({e.reason} at byte {e.start}); save it as "
                              f"UTF-8 {kind}") from e
        except OSError as e:
            raise ConfigError(f"cannot read training config {p}: {e.strerror or e}; make it readable or give "
                              "another file") from e
        try:
            data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
        except (json.JSONDecodeError, yaml.YAMLError) as e:
            raise ConfigError(f"training config {p} is not valid {kind}: {e}") from e
        if data is not None and not isinstance(data, dict):
            raise ConfigError(f"training config {p} must be a mapping of TrainConfig fields (e.g. 'steps: 20'), "
                              f"got a {type(data).__name__}")
        return cls.from_dict(data or {}, where=str(p))

    @classmethod
    def from_dict(cls, data: dict, where: str = "<dict>") -> "TrainConfig":
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError(f"training config {where} is invalid: {_explain(cls, e)}") from e

    def with_overrides(self, overrides: dict[str, Any], where: str = "overrides") -> "TrainConfig":
        """This config with the fields in ``overrides`` replaced. A string value is read as the field's type
        (``"20"`` for an int; ``null`` / ``none`` / empty for None; ``[a, b]`` or ``a,b`` for lists);
        ``where`` names them in errors."""
        if not isinstance(overrides, dict):
            raise ConfigError(f"{where} must be a mapping of TrainConfig fields to values, e.g. {{'steps': 20}}; "
                              f"got a {type(overrides).__name__}")
        fields = type(self).model_fields
        unknown = [str(k) for k in overrides if k not in fields]
        if unknown:
            raise ConfigError(f"{where}: unknown TrainConfig field(s) {', '.join(unknown)}{_did_you_mean(unknown)}; "
                              f"valid fields: {', '.join(fields)}")
        data = self.model_dump(mode="json")
        data.update({key: _field_value(type(self), key, value, where) for key, value in overrides.items()})
        return type(self).from_dict(data, where=where)

    def to_file(self, path: str | Path) -> Path:
        p = Path(path)
        data = self.model_dump(mode="json")
        from autoforge import atomic

        return atomic.write_text(p, json.dumps(data, indent=2) if p.suffix == ".json"
                                 else yaml.safe_dump(data, sort_keys=False))

    @classmethod
    def describe(cls) -> dict[str, str]:
        """Field name -> description (for CLI help and docs)."""
        return {name: f.description or "" for name, f in cls.model_fields.items()}


# --------------------------------------------------------------------------- errors people can act on


def _did_you_mean(names: list[str]) -> str:
    close = [m for n in names for m in difflib.get_close_matches(n, TrainConfig.model_fields, n=1)]
    return f" (did you mean {', '.join(close)}?)" if close else ""


def _explain(cls: type[TrainConfig], err: ValidationError) -> str:
    """One clause per problem: the field, what is wrong, the value given."""
    parts, unknown = [], []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        if e["type"] == "extra_forbidden":
            unknown.append(loc)
        elif loc:
            parts.append(f"{loc}: {e['msg']} (got {e.get('input')!r}; {loc} is {_type_text(cls, str(e['loc'][0]))})")
        else:
            parts.append(e["msg"].removeprefix("Value error, "))
    if unknown:
        parts.append(f"unknown field(s) {', '.join(unknown)}{_did_you_mean(unknown)}; valid fields: "
                     f"{', '.join(cls.model_fields)}")
    return "; ".join(parts)


def _type_text(cls: type[TrainConfig], name: str) -> str:
    """``int >= 0 (default 10)``: a field's type, bounds and default, for error messages."""
    info = cls.model_fields.get(name)
    if info is None:
        return "not a field"
    ann = info.annotation
    text = ann.__name__ if isinstance(ann, type) else str(ann).replace("typing.", "")
    bounds = [f"{sym} {getattr(m, attr)}" for m in info.metadata
              for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")) if getattr(m, attr, None) is not None]
    return f"{text}{' ' + ', '.join(bounds) if bounds else ''} (default {json.dumps(info.default)})"


def _field_value(cls: type[TrainConfig], key: str, value: Any, where: str) -> Any:
    """``value`` for field ``key``, a typed-in string read as the field's type; ConfigError saying the type."""
    info = cls.model_fields[key]
    typ = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
    adapter = TypeAdapter(typ, config=ConfigDict(allow_inf_nan=False))
    candidates = [value]
    if isinstance(value, str) and value.strip().lower() in ("", "null", "none", "~"):
        candidates.insert(0, None)  # an optional field: null; any other: validating None fails, the text is tried
    if isinstance(value, str):
        try:
            candidates.append(yaml.safe_load(value))
        except yaml.YAMLError:
            pass
        if value and "list" in str(info.annotation):
            candidates.append([v.strip() for v in value.split(",") if v.strip()])
    first: ValidationError | None = None
    for candidate in candidates:
        try:
            adapter.validate_python(candidate)
            return candidate
        except ValidationError as e:
            first = first or e
    msg = first.errors()[0]["msg"] if first else "invalid value"
    shown = info.default if isinstance(info.default, str) else json.dumps(info.default)
    example = f"--set {key}={shown}" if where == "--set" else f"{{{key!r}: {info.default!r}}}"
    raise ConfigError(f"{where} {key}={value!r}: {msg}; {key} is {_type_text(cls, key)}, e.g. {example}")
