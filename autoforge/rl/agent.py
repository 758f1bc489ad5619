"""The local transformers agent (token-in/token-out) and the trainer's ``rollout_fn``.

:class:`HFAgent` plays an episode with a causal LM and grows ONE token sequence for it
(:class:`autoforge.rl.trajectory.TrajectoryBuilder`): the opening prompt (system + tools +
request + ``<|im_start|>assistant\\n``), then per turn the policy's sampled ids with their
log-probs (mask 1) and the new context — tool observations, the user's reply, the next
assistant header — tokenized on its own and appended (mask 0). Generated ids are never
decoded and re-encoded into the sequence; the decoded text is only parsed for Hermes
``<tool_call>`` blocks. Earlier turns' ``<think>`` stays in the sequence (interleaved
thinking, paper Sec. 3.4 / docs/paper_notes.md#interleaved-thinking).

:class:`BatchedGenerator` lets many episode threads share one model: requests that arrive
together are sampled as one left-padded batch (:func:`autoforge.rl.trajectory.generate_turn`).

:func:`make_rollout_fn` is the plug-in the ERPO trainer calls:
``rollout_fn(policy, tasks, n_per_task) -> list[Trajectory]`` — real episodes played by the
shared episode runner (:func:`autoforge.rollout.batch.play_episodes`, the one evaluation
uses too), reward from the state hash, ``valid=False`` when the user-error judge flagged the
episode (MEU) or it could not be scored.

:func:`hf_agent_factory` is the agent factory of a local model directory, for evaluating it
(``hf:<model dir>`` in :func:`autoforge.pipeline.evaluate.make_agent_factory`).

Imports torch.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Sequence

import torch

from autoforge.rl import chat
from autoforge.rl.policy import Policy, continuation_ids, load_policy, prompt_ids
from autoforge.rl.trajectory import Trajectory, TrajectoryBuilder, generate_turn
from autoforge.envs.interface import default_env_factory
from autoforge.rollout.batch import play_episodes
from autoforge.rollout.engine import AgentContext, AgentTurn, EpisodeConfig, EpisodeOutcome
from autoforge.rollout.judge import RuleJudge
from autoforge.rollout.toolcalls import parse_hermes
from autoforge.rollout.users import ErrorRates, OfflineUser
from autoforge.types import Message, Task, TaskDag, ToolCode


class BatchedGenerator:
    """Serve ``generate(ids)`` calls from many threads with batched sampling on one model.

    A worker thread takes the first waiting request, collects others for up to ``wait_s``
    (or until ``max_batch``), and samples them together. Requests with different
    ``(max_new_tokens, temperature)`` are batched separately. A request may bring its own
    ``torch.Generator``: its tokens are then drawn from that stream alone, so what it samples does
    not depend on the other requests it was batched with.
    """

    def __init__(self, policy: Policy, max_batch: int = 8, wait_s: float = 0.01):
        self.policy, self.max_batch, self.wait_s = policy, max_batch, wait_s
        self._q: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="hf-generator", daemon=True)
        self._thread.start()

    def generate(self, ids: list[int], max_new_tokens: int, temperature: float,
                 generator: torch.Generator | None = None) -> tuple[list[int], list[float]]:
        fut: Future = Future()
        self._q.put((list(ids), int(max_new_tokens), float(temperature), fut, generator))
        return fut.result()

    def close(self) -> None:
        self._q.put(None)

    def _loop(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            batch = [first]
            try:
                while len(batch) < self.max_batch:
                    item = self._q.get(timeout=self.wait_s)
                    if item is None:
                        self._q.put(None)
                        break
                    batch.append(item)
            except queue.Empty:
                pass
            groups: dict[tuple[int, float], list] = {}
            for item in batch:
                groups.setdefault((item[1], item[2]), []).append(item)
            for (n_new, temp), items in groups.items():
                try:
                    new, lps = generate_turn(self.policy.model, self.policy.tokenizer, [it[0] for it in items], n_new, temp,
                                             stop_ids=self.policy.stop_ids, generator=[it[4] for it in items])
                except BaseException as exc:  # noqa: BLE001 - hand the error to every waiting episode
                    for it in items:
                        it[3].set_exception(exc)
                    continue
                for it, ids, lp in zip(items, new, lps):
                    it[3].set_result((ids, lp))


class HFAgent:
    """A local causal LM as the agent (see module docstring). One instance per episode."""

    def __init__(self, policy: Policy, *, temperature: float = 1.0, max_new_tokens: int = 512,
                 generator: BatchedGenerator | None = None, lock: threading.Lock | None = None, name: str | None = None):
        self.policy = policy
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens
        self.generator = generator
        self.lock = lock or threading.Lock()
        self.name = name or f"hf:{getattr(policy.model, 'name_or_path', '') or 'local'}"
        self.builder: TrajectoryBuilder | None = None

    def reset(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self.builder = None
        self.n_seen = 0  # messages already in the token sequence
        # Sampled turns draw from the episode's own stream (its seed): the same episode samples the same tokens
        # however the concurrent episodes' turns were batched.
        self.rng = (torch.Generator(device=getattr(self.policy, "device", "cpu")).manual_seed(int(ctx.seed))
                    if self.temperature > 0 else None)
        self.turn_ids: list[list[int]] = []  # the ids generated at each turn (for tests and diagnostics)

    def _sample(self, ids: list[int]) -> tuple[list[int], list[float]]:
        if self.generator is not None:
            return self.generator.generate(ids, self.max_new_tokens, self.temperature, generator=self.rng)
        with self.lock:
            new, lps = generate_turn(self.policy.model, self.policy.tokenizer, [ids], self.max_new_tokens,
                                     self.temperature, stop_ids=self.policy.stop_ids, generator=[self.rng])
        return new[0], lps[0]

    def act(self, messages: list[Message]) -> AgentTurn:
        tok = self.policy.tokenizer
        if self.builder is None:
            self.builder = TrajectoryBuilder(prompt_ids(tok, messages, tools=self.ctx.tools or None))
        else:
            new_msgs = messages[self.n_seen:]
            self.builder.add_context(continuation_ids(tok, new_msgs))
        new_ids, lps = self._sample(self.builder.token_ids)
        self.builder.add_generated(new_ids, lps)
        self.turn_ids.append(list(new_ids))
        if not new_ids or new_ids[-1] not in self.policy.stop_ids:
            # Cut off at the token limit: close the turn as context (mask 0) so the layout stays valid.
            self.builder.add_context([int(tok.convert_tokens_to_ids(chat.IM_END))])
        text = tok.decode(new_ids, skip_special_tokens=False)
        parsed = parse_hermes(text)
        self.n_seen = len(messages) + 1  # + the assistant message the engine appends for this turn
        return AgentTurn(content=parsed.content, tool_calls=parsed.calls, malformed=parsed.malformed, tokens=len(new_ids))

    def trajectory(self, task_id: str, env_id: str, reward: float, valid: bool = True, **metadata) -> Trajectory:
        if self.builder is None:
            raise ValueError("the agent has not acted yet: no trajectory")
        return self.builder.build(task_id, env_id, reward, valid, **metadata)


def episode_to_trajectory(outcome: EpisodeOutcome) -> Trajectory | None:
    """The trainer's view of one episode: its token sequence, reward, and MEU validity.

    ``valid`` is False when the judge flagged a user error or the episode could not be scored
    (reward None: "could not score" is left out, not trained on as 0). None when the agent
    kept no token sequence (not an :class:`HFAgent`, or it never acted).
    """
    agent, ep = outcome.agent, outcome.episode
    if not isinstance(agent, HFAgent) or agent.builder is None:
        return None
    valid = ep.reward is not None and not bool(ep.judge_flag)
    return agent.trajectory(ep.task_id, ep.env_id, ep.reward if ep.reward is not None else 0.0, valid,
                            episode_id=ep.episode_id, trial=ep.trial, termination=ep.termination, n_turns=ep.n_turns,
                            judge_flag=ep.judge_flag, user_error=ep.user_error)


def make_rollout_fn(
    dags: dict[str, TaskDag],
    tools_by_env: dict[str, list[ToolCode]],
    *,
    user_factory: Callable[[Task, Any, int], Any] | None = None,
    error_rates: ErrorRates = ErrorRates(),
    judge: Any = RuleJudge(),
    env_factory: Callable[[list[ToolCode]], Any] | None = None,
    config: EpisodeConfig = EpisodeConfig(max_turns=12, max_tokens=4096),
    temperature: float = 1.0,
    max_new_tokens: int = 256,
    concurrency: int = 8,
    seed: int = 0,
    on_episodes: Callable[[list], None] | None = None,
    rules_by_env: dict[str, list[Any]] | None = None,
) -> Callable[[Policy, Sequence[Task], int], list[Trajectory]]:
    """``rollout_fn(policy, tasks, n_per_task)`` over Task records, for :func:`autoforge.rl.trainer.train`.

    Each call plays ``n_per_task`` episodes of every task (episodes run on ``concurrency``
    threads; their generation requests are batched on the one model) and returns one
    Trajectory per episode. ``on_episodes(list[Episode])`` receives the transcripts (to store).
    ``rules_by_env``: each environment's judged rules (a rule-breaking episode scores 0, issue 33).
    """
    user_factory = user_factory or (lambda task, plan, s: OfflineUser(task, plan, seed=s))
    calls = {"n": 0}

    def rollout_fn(policy: Policy, tasks: Sequence[Task], n_per_task: int) -> list[Trajectory]:
        calls["n"] += 1
        gen = BatchedGenerator(policy, max_batch=concurrency)
        trajs: list[Trajectory] = []
        lock = threading.Lock()

        def collect(out: EpisodeOutcome) -> None:
            t = episode_to_trajectory(out)
            if t is None:  # crashed before the first turn: nothing was generated, nothing to learn from
                return
            with lock:
                trajs.append(t)

        try:
            batch = play_episodes(
                list(tasks), dags, tools_by_env,
                agent_factory=lambda: HFAgent(policy, temperature=temperature, max_new_tokens=max_new_tokens, generator=gen),
                user_factory=user_factory, agent_name="hf:policy", user_name="offline", trials=n_per_task,
                error_rates=error_rates, judge=judge, concurrency=concurrency,
                env_factory=env_factory or default_env_factory, config=config,
                seed=seed + 1_000_003 * calls["n"], on_episode=collect, rules_by_env=rules_by_env)
        finally:
            gen.close()
        if on_episodes is not None:
            on_episodes(batch.episodes)
        order = {(t.task_id, i): k for k, (t, i) in enumerate((t, i) for i in range(n_per_task) for t in tasks)}
        trajs.sort(key=lambda t: order.get((t.task_id, t.metadata.get("trial", 0)), 0))
        return trajs

    return rollout_fn


def hf_agent_factory(model_dir: str, *, temperature: float = 0.0, max_new_tokens: int = 1024, name: str | None = None,
                     device: str = "auto", dtype: str = "float32", max_batch: int = 8) -> Callable[[], HFAgent]:
    """A factory of :class:`HFAgent` over the model in ``model_dir``, for evaluation.

    The model is loaded once (in ``dtype`` on ``device``); the agents of concurrent episodes share
    it through one :class:`BatchedGenerator` (their turns are sampled as batches of up to
    ``max_batch``). Call ``factory.close()`` when the episodes are done.
    """
    policy = load_policy(model_dir, device=device, dtype=dtype)
    gen = BatchedGenerator(policy, max_batch=max_batch)

    def factory() -> HFAgent:
        return HFAgent(policy, temperature=temperature, max_new_tokens=max_new_tokens, generator=gen, name=name)

    factory.close = gen.close  # type: ignore[attr-defined]
    return factory
