"""The agent card: ``agent.json`` in every checkpoint folder, how the policy acts and was evaluated.

A training run evaluates its policy with settings a plain model folder does not carry: how the
tools are shown (``tool_schema``, and with ``prompt_tools: used`` only the tools the run's tasks
call), the system prompt, the token and turn limits, the evaluation temperature, trials and
seed, the error-free offline user, the judged rules, and which held-out tasks it played. The
driver (:func:`autoforge.rl.run.train_curated`) builds them here once (:func:`build_agent_card`)
and writes them to ``<checkpoint_dir>/agent.json``; :func:`autoforge.rl.checkpoint.save_checkpoint`
copies that file into each checkpoint it saves (with the checkpoint's phase and step), and the
driver rewrites it into the final checkpoint. ``autoforge eval --agent hf:CKPT`` reads it
(:func:`read_agent_card`) and plays the policy as the run evaluated it
(:func:`autoforge.pipeline.evaluate.run`), so its pass^1 on the recorded tasks
(``--recorded-tasks``) is the run's.

Plain JSON; no torch at import time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from autoforge.errors import ConfigError

AGENT_CARD = "agent.json"
CARD_FORMAT = "autoforge-agent"
CARD_VERSION = 1


class AgentCard(BaseModel):
    """What ``agent.json`` holds (format version 1). Unknown keys are ignored."""

    model_config = ConfigDict(extra="ignore")

    format: Literal["autoforge-agent"] = Field(description="always 'autoforge-agent'")
    version: int = Field(ge=1, description="format version of this file")
    train_run_id: str = Field(description="the training run that wrote the checkpoint (training_runs)")
    checkpoint: dict[str, Any] | None = Field(None, description="{'phase': 'sft' | 'erpo', 'step': N} of this folder")
    chat_format: str = Field("hermes", description="tool-call format the agent writes and is parsed with (Hermes "
                                                   "<tool_call> blocks: autoforge.rollout.toolcalls.parse_hermes)")
    chat_template_sha256: str | None = Field(None, description="SHA-256 of the tokenizer's chat template (the "
                                                               "template itself is the tokenizer's, in this folder)")
    system_prompt: str = Field(description="the system message every episode opens with")
    tool_schema: Literal["full", "compact", "brief"] = Field(description="how tools are rendered into the prompt")
    prompt_tools: Literal["all", "used"] = Field(description="all accepted tools, or those the run's tasks use")
    tool_descriptions: bool = Field(False, description="tool descriptions from the tool specs are shown")
    tools: dict[str, list[str]] = Field(description="environment id -> the tool names listed in its prompt")
    max_new_tokens: int = Field(ge=1, description="tokens per agent turn")
    max_turns: int = Field(ge=1, description="agent turns per episode")
    max_episode_tokens: int = Field(ge=1, description="agent tokens per episode")
    temperature: float = Field(ge=0, description="sampling temperature of evaluation (0: greedy)")
    trials: int = Field(ge=1, description="episodes per held-out task")
    seed: int = Field(ge=0, description="seed of the evaluation episodes")
    concurrency: int = Field(ge=1, description="episodes played at once, their turns sampled as one batch")
    user: str = Field("offline", description="the simulated user of evaluation")
    user_error_rate: float = Field(0.0, ge=0, le=1, description="injected user errors in evaluation")
    judge: Literal["rule", "llm", "none"] = Field("none", description="user-error judge of evaluation")
    judged_rules: bool = Field(True, description="the environments' judged rules applied (a break scores 0)")
    eval_task_ids: list[str] = Field(description="the held-out tasks the run evaluated, in its order")
    device: str | None = Field(None, description="where the run evaluated ('cpu', 'cuda', ...)")
    dtype: str = Field("float32", description="parameter dtype of the run")
    torch_threads: int | None = Field(None, description="torch CPU threads of the run (recorded, not applied)")


def build_agent_card(cfg, data, train_run_id: str, *, chat_template: str | None = None,
                     device: str | None = None) -> dict[str, Any]:
    """The card of a run: ``cfg`` (TrainConfig), ``data`` (CuratedData: its held-out tasks and prompt
    tools), ``train_run_id``; ``chat_template`` is the policy tokenizer's, ``device`` where it runs.

    It describes :func:`autoforge.rl.run.evaluate_policy` exactly: keep the two in step."""
    import hashlib

    from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT

    card = AgentCard(
        format=CARD_FORMAT, version=CARD_VERSION, train_run_id=train_run_id,
        chat_template_sha256=hashlib.sha256(chat_template.encode()).hexdigest() if chat_template else None,
        system_prompt=DEFAULT_SYSTEM_PROMPT, tool_schema=cfg.tool_schema, prompt_tools=cfg.prompt_tools,
        tool_descriptions=False,  # data.schemas() / evaluate_policy pass no tool specs
        tools={env: sorted(t.name for t in tools if t.status == "accepted")
               for env, tools in sorted(data.tools_by_env.items())},
        max_new_tokens=cfg.max_new_tokens, max_turns=cfg.max_turns, max_episode_tokens=cfg.max_episode_tokens,
        temperature=cfg.eval_temperature, trials=cfg.eval_trials, seed=cfg.seed, concurrency=cfg.rollout_concurrency,
        user="offline", user_error_rate=0.0, judge="none", judged_rules=True,
        eval_task_ids=[t.task_id for t in data.test], device=device, dtype=cfg.dtype, torch_threads=cfg.torch_threads)
    return card.model_dump(mode="json")


def for_checkpoint(card: dict[str, Any], phase: str, step: int) -> dict[str, Any]:
    """``card`` stamped with the checkpoint it is written into."""
    return {**card, "checkpoint": {"phase": phase, "step": int(step)}}


def card_text(card: dict[str, Any]) -> str:
    return json.dumps(card, indent=1, ensure_ascii=False) + "\n"


def write_agent_card(folder: str | Path, card: dict[str, Any]) -> Path:
    """Write ``card`` as ``folder/agent.json``, atomically (a temp file in the folder, then renamed)."""
    from autoforge import atomic

    return atomic.write_text(Path(folder) / AGENT_CARD, card_text(card))


def stamp_checkpoint(path: str | Path, card: dict[str, Any]) -> Path:
    """Write ``card`` into the checkpoint folder ``path`` (``<phase>-<step>``), stamped with its phase and step."""
    phase, _, step = Path(path).name.partition("-")
    return write_agent_card(path, for_checkpoint(card, phase, int(step)) if step.isdigit() else card)


def read_agent_card(folder: str | Path) -> AgentCard | None:
    """The card in ``folder`` (a model directory), None when it has none; a card that cannot be read
    is a one-line ConfigError naming the file and what is wrong."""
    path = Path(folder).expanduser() / AGENT_CARD
    if not path.is_file():
        return None
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); delete it to "
                          "evaluate the folder as a plain model") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(raw).__name__}")
    if isinstance(raw.get("version"), int) and raw["version"] > CARD_VERSION:
        raise ConfigError(f"{path}: format version {raw['version']} is newer than this autoforge reads "
                          f"({CARD_VERSION}); upgrade autoforge")
    try:
        return AgentCard.model_validate(raw)
    except ValidationError as exc:
        errs = exc.errors()
        first = errs[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise ConfigError(f"{path}: field {where!r}: {first['msg']}{more}") from None
