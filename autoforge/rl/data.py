"""What a training run trains on: curated tasks, gold replays, SFT examples, the tokenizer corpus.

* Tasks are the curated ones (``v_curated_tasks``: verified, with difficulty and split), read
  by :func:`autoforge.pipeline.train.load_curated`; ``split = 'train'`` is trained on,
  ``split = 'test'`` is held out for evaluation (never trained on). Config filters
  (environments, tool-call count, reasoning nodes, caps: :func:`sample_ids`,
  :func:`curated_data`) pick a curriculum a small policy can learn from.
* SFT cold start (paper §3.4): each train task's gold DAG is played through the dialogue by
  the scripted oracle agent against the offline user (it must *ask* for every hidden fact),
  and the successful episodes are rendered token by token as the HF agent would have grown
  them (:func:`autoforge.rl.policy.encode_episode`). Successful, unflagged episodes already
  stored (from any non-oracle agent; :func:`autoforge.pipeline.train.stored_successes`) are
  added when asked.
* The tiny default policy's tokenizer is trained on the run's own text: tool schemas,
  requests, user facts and gold dialogues.

Records in, records out: no warehouse, no Prefect, no torch at import time.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Iterable

from autoforge.rl.config import TrainConfig
from autoforge.types import Episode, Task, TaskDag, ToolCode, ToolSpec


@dataclass
class CuratedData:
    """Train and held-out tasks plus everything the episode engine needs to play them."""

    train: list[Task]
    test: list[Task]
    dags: dict[str, TaskDag]
    tools_by_env: dict[str, list[ToolCode]]  # what the engine runs (prompt tools filtered by cfg.prompt_tools)
    specs_by_env: dict[str, list[ToolSpec]] = field(default_factory=dict)
    judged: dict[str, list[dict]] = field(default_factory=dict)  # env -> its judged rules (issue 33; rollouts judge them)

    def schemas(self, style: str = "full") -> dict[str, list[dict]]:
        """Tool schemas per environment, as the episode engine renders them into the system prompt.

        Without specs, exactly as :func:`autoforge.rl.agent.make_rollout_fn` does, so
        training rollouts, SFT examples and evaluation all see the same prompt (``style`` is
        TrainConfig.tool_schema, passed to the engine as EpisodeConfig.tool_schema).
        """
        from autoforge.rollout.toolcalls import tool_schemas

        return {env: tool_schemas(tools, style=style) for env, tools in self.tools_by_env.items()}

    def summary(self) -> dict[str, Any]:
        envs = sorted({t.env_id for t in self.train + self.test})
        return {"train_tasks": len(self.train), "test_tasks": len(self.test), "environments": envs,
                "prompt_tools": {e: len(self.tools_by_env.get(e, [])) for e in envs}}


def sample_ids(ids: list[str], cap: int | None, seed: int, salt: str) -> list[str]:
    """At most ``cap`` of ``ids`` (a seeded sample, sorted); all of them when ``cap`` is None."""
    if cap is None or len(ids) <= cap:
        return ids
    return sorted(random.Random(f"{seed}:{salt}").sample(ids, cap))


def curated_data(tasks: Iterable[Task], train_ids: list[str], test_ids: list[str], dags: dict[str, TaskDag],
                 tools_by_env: dict[str, list[ToolCode]], specs_by_env: dict[str, list[ToolSpec]],
                 cfg: TrainConfig, judged: dict[str, list[dict]] | None = None) -> CuratedData:
    """The train / test tasks in id order, with the tools shown in the prompt per ``cfg.prompt_tools``."""
    by_id = {t.task_id: t for t in tasks}
    train = [by_id[i] for i in train_ids if i in by_id]
    test = [by_id[i] for i in test_ids if i in by_id]
    if cfg.prompt_tools == "used":
        used: dict[str, set[str]] = {}
        for t in train + test:
            used.setdefault(t.env_id, set()).update(c.name for c in t.gold_calls)
            if t.kind == "boundary" and t.dag_id in dags:  # the write the user asks for: shown, never made (issue 33)
                used[t.env_id].update(n.tool for n in dags[t.dag_id].nodes if n.kind == "tool" and n.tool)
        tools_by_env = {e: [c for c in tools if c.name in used.get(e, set())] for e, tools in tools_by_env.items()}
    return CuratedData(train=train, test=test, dags=dags, tools_by_env=tools_by_env, specs_by_env=specs_by_env,
                       judged=dict(judged or {}))


# --------------------------------------------------------------------------- SFT data


def gold_episodes(data: CuratedData, tasks: list[Task] | None = None, concurrency: int = 4, seed: int = 0) -> list[Episode]:
    """The oracle's successful episodes on ``tasks`` (default: the train split) with the offline user.

    Played by the shared episode runner (:func:`autoforge.rollout.batch.play_episodes`), not by evaluation.
    """
    from autoforge.rollout.agents import OracleAgent
    from autoforge.rollout.batch import play_episodes
    from autoforge.rollout.engine import EpisodeConfig
    from autoforge.rollout.users import OfflineUser

    tasks = data.train if tasks is None else tasks
    if not tasks:
        return []
    batch = play_episodes(tasks, data.dags, data.tools_by_env, agent_factory=OracleAgent,
                          user_factory=lambda task, plan, s: OfflineUser(task, plan, seed=s), agent_name="oracle",
                          user_name="offline", trials=1, concurrency=concurrency, config=EpisodeConfig(max_turns=60),
                          seed=seed, rules_by_env=data.judged)  # the oracle keeps the judged rules (it asks to confirm)
    return [e for e in batch.episodes if e.reward == 1.0]


def sft_examples(tokenizer, episodes: Iterable[Episode], schemas: dict[str, list[dict]],
                 max_examples: int | None = None, seed: int = 0) -> list[tuple[list[int], list[int]]]:
    """``(token_ids, loss_mask)`` per episode, in the HF agent's token layout (mask on agent turns only)."""
    from autoforge.rl.policy import encode_episode

    out = []
    for ep in episodes:
        if ep.env_id not in schemas or not any(m.role == "assistant" for m in ep.messages):
            continue
        out.append(encode_episode(tokenizer, ep.messages, schemas[ep.env_id] or None))
    if max_examples is not None and len(out) > max_examples:
        out = random.Random(seed).sample(out, max_examples)
    return out


# --------------------------------------------------------------------------- tokenizer corpus


def corpus_texts(data: CuratedData, episodes: Iterable[Episode] = (), schema_style: str = "full") -> list[str]:
    """Text to train the tiny policy's BPE on: tool schemas, train requests and user facts, gold dialogues."""
    from autoforge.rl.chat import render_messages
    from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT

    texts = [DEFAULT_SYSTEM_PROMPT]
    for env, schemas in sorted(data.schemas(schema_style).items()):
        texts.append("\n".join(json.dumps(s, ensure_ascii=False) for s in schemas))
        for spec in data.specs_by_env.get(env, []):
            texts.append(f"{spec.name}: {spec.description}")
    for t in data.train:  # held-out tasks stay out, even of the vocabulary
        texts.append(t.request)
        texts.append(json.dumps(t.user_facts, ensure_ascii=False))
    for ep in episodes:
        texts.append(render_messages(ep.messages[1:]))
    return texts
