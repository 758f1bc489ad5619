"""What a training run reads from the warehouse: curated tasks, gold replays, the tokenizer corpus.

* Tasks come through the ``v_curated_tasks`` view (verified tasks with difficulty and split);
  ``split = 'train'`` is trained on, ``split = 'test'`` is held out for evaluation (never
  trained on). Config filters (environments, tool-call count, reasoning nodes, caps) pick a
  curriculum a small policy can learn from.
* SFT cold start (paper §3.4): each train task's gold DAG is played through the dialogue by
  the scripted oracle agent against the offline user (it must *ask* for every hidden fact),
  and the successful episodes are rendered token by token as the HF agent would have grown
  them (:func:`autoforge.rl.policy.encode_episode`). Successful, unflagged episodes already
  in the warehouse (from any non-oracle agent) are added when asked.
* The tiny default policy's tokenizer is trained on the warehouse's own text: tool schemas,
  requests, user facts and gold dialogues.

Library code: no Prefect, no torch at import time.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any, Iterable

from autoforge.errors import ConfigError
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

    def schemas(self, style: str = "full") -> dict[str, list[dict]]:
        """Tool schemas per environment, as the episode engine renders them into the system prompt.

        Without specs, exactly as :func:`autoforge.rollout.hf_agent.make_rollout_fn` does, so
        training rollouts, SFT examples and evaluation all see the same prompt (``style`` is
        TrainConfig.tool_schema, passed to the engine as EpisodeConfig.tool_schema).
        """
        from autoforge.rollout.toolcalls import tool_schemas

        return {env: tool_schemas(tools, style=style) for env, tools in self.tools_by_env.items()}

    def summary(self) -> dict[str, Any]:
        envs = sorted({t.env_id for t in self.train + self.test})
        return {"train_tasks": len(self.train), "test_tasks": len(self.test), "environments": envs,
                "prompt_tools": {e: len(self.tools_by_env.get(e, [])) for e in envs}}


def _task_ids(warehouse: str | None, cfg: TrainConfig, split: str) -> list[str]:
    """Task ids from v_curated_tasks matching the config's filters (sorted, deterministic)."""
    from autoforge.warehouse import query

    where, params = ["split = :split"], {"split": split}
    for col, op, val in (("n_tool_calls", ">=", cfg.min_tool_calls), ("n_tool_calls", "<=", cfg.max_tool_calls),
                         ("n_reasoning_nodes", "<=", cfg.max_reasoning_nodes)):
        if val is not None:
            key = f"p{len(params)}"
            where.append(f"{col} {op} :{key}")
            params[key] = val
    if cfg.envs:
        names = ", ".join(f":e{i}" for i in range(len(cfg.envs)))
        where.append(f"(env_id IN ({names}) OR env_name IN ({names}))")
        params.update({f"e{i}": e for i, e in enumerate(cfg.envs)})
    rows = query(warehouse, f"SELECT task_id FROM v_curated_tasks WHERE {' AND '.join(where)} ORDER BY task_id", params)
    return [r["task_id"] for r in rows]


def _sample(ids: list[str], cap: int | None, seed: int, salt: str) -> list[str]:
    if cap is None or len(ids) <= cap:
        return ids
    return sorted(random.Random(f"{seed}:{salt}").sample(ids, cap))


def load_curated(warehouse: str | None, cfg: TrainConfig) -> CuratedData:
    """Train/test tasks through ``v_curated_tasks``, their DAGs, accepted tool code and specs."""
    from autoforge.rollout.evaluate import load_eval_inputs

    train_ids = _sample(_task_ids(warehouse, cfg, "train"), cfg.max_train_tasks, cfg.seed, "train")
    test_ids = _sample(_task_ids(warehouse, cfg, "test"), cfg.max_eval_tasks, cfg.seed, "test")
    if not train_ids:
        raise ConfigError(
            f"no curated train tasks in {warehouse or 'the default warehouse'} match the config (envs={cfg.envs}, "
            f"tool calls {cfg.min_tool_calls}..{cfg.max_tool_calls}, reasoning nodes <= {cfg.max_reasoning_nodes}); "
            "run `autoforge factory` first or relax the filters")
    wanted = set(train_ids) | set(test_ids)
    tasks, dags, tools_by_env, specs_by_env = load_eval_inputs(warehouse, task_ids=wanted)
    by_id = {t.task_id: t for t in tasks}
    train = [by_id[i] for i in train_ids if i in by_id]
    test = [by_id[i] for i in test_ids if i in by_id]
    if cfg.prompt_tools == "used":
        used: dict[str, set[str]] = {}
        for t in train + test:
            used.setdefault(t.env_id, set()).update(c.name for c in t.gold_calls)
        tools_by_env = {e: [c for c in tools if c.name in used.get(e, set())] for e, tools in tools_by_env.items()}
    return CuratedData(train=train, test=test, dags=dags, tools_by_env=tools_by_env, specs_by_env=specs_by_env)


# --------------------------------------------------------------------------- SFT data


def gold_episodes(data: CuratedData, tasks: list[Task] | None = None, concurrency: int = 4, seed: int = 0) -> list[Episode]:
    """The oracle's successful episodes on ``tasks`` (default: the train split) with the offline user."""
    from autoforge.rollout.agents import OracleAgent
    from autoforge.rollout.engine import EpisodeConfig
    from autoforge.rollout.evaluate import evaluate_tasks
    from autoforge.rollout.users import OfflineUser

    tasks = data.train if tasks is None else tasks
    if not tasks:
        return []
    rep = evaluate_tasks(tasks, data.dags, data.tools_by_env, agent_factory=OracleAgent,
                         user_factory=lambda task, plan, s: OfflineUser(task, plan, seed=s), agent_name="oracle",
                         user_name="offline", trials=1, concurrency=concurrency, config=EpisodeConfig(max_turns=60),
                         seed=seed, n_boot=1)
    return [e for e in rep.episodes if e.reward == 1.0]


def stored_successes(warehouse: str | None, tasks: list[Task]) -> list[Episode]:
    """Successful, unflagged episodes of ``tasks`` already in the warehouse (not the oracle's)."""
    from autoforge.warehouse import read_records, table_exists

    if not tasks or not table_exists(warehouse, "episodes"):
        return []
    ids = {t.task_id for t in tasks}
    eps = read_records(warehouse, Episode, where="reward = 1.0 AND coalesce(judge_flag, FALSE) = FALSE "
                                                  "AND agent <> 'oracle'")
    return [e for e in eps if e.task_id in ids and e.messages]


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
