"""The local transformers agent: one growing token sequence, exact generated ids and log-probs,
and the trainer's rollout_fn."""

from __future__ import annotations

import pytest
import torch
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.rl import chat
from autoforge.rl.policy import build_tiny_policy, load_policy
from autoforge.rl.trajectory import Trajectory
from autoforge.rl.agent import BatchedGenerator, HFAgent, episode_to_trajectory, make_rollout_fn
from autoforge.rollout.engine import EpisodeConfig, run_episode
from autoforge.rollout.judge import RuleJudge
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import OfflineUser

TOOLS = make_tools()
SCHEMAS = tool_schemas(TOOLS)


@pytest.fixture(scope="module")
def policy_dir(tmp_path_factory):
    tasks, _ = tasks_and_dags()
    corpus = [t.request for t in tasks] * 20 + [c.source for c in TOOLS] * 5 + ['{"name": "cancel_order"}'] * 20
    return build_tiny_policy(tmp_path_factory.mktemp("tiny"), corpus, vocab_size=500, hidden_size=64, num_layers=2,
                             num_heads=4)


@pytest.fixture(scope="module")
def policy(policy_dir):
    return load_policy(policy_dir, device="cpu")


@pytest.fixture(scope="module")
def world():
    tasks, dags = tasks_and_dags()
    return {t.task_id: t for t in tasks}, dags


class ScriptedGenerator:
    """Stands in for the model: 'generates' fixed texts (as token ids) with fixed log-probs."""

    def __init__(self, policy, texts):
        self.tok = policy.tokenizer
        self.texts = list(texts)
        self.prompts = []

    def generate(self, ids, max_new_tokens, temperature, generator=None):
        self.prompts.append(list(ids))
        new = self.tok(self.texts.pop(0), add_special_tokens=False)["input_ids"]
        return new, [-0.5] * len(new)


def test_token_sequence_is_grown_without_re_tokenising(policy, world):
    task = world[0]["task_cancel"]
    turns = ['<think>cancel the priciest</think><tool_call>\n{"name": "cancel_order", "arguments": {"order_id": "O0002"}}'
             '\n</tool_call><|im_end|>',
             "Your order has been cancelled.<|im_end|>"]
    gen = ScriptedGenerator(policy, turns)
    agent = HFAgent(policy, generator=gen)
    out = run_episode(task, local_env_factory(TOOLS), agent, OfflineUser(task), tools=SCHEMAS)
    ep = out.episode
    assert ep.reward == 1.0 and ep.termination == "user_stop", ep.termination_detail
    assert ep.messages[2].tool_calls[0].name == "cancel_order"
    assert ep.messages[2].content == "<think>cancel the priciest</think>"  # interleaved thinking kept in the transcript

    traj = episode_to_trajectory(out)
    assert isinstance(traj, Trajectory) and traj.reward == 1.0 and traj.valid
    ids, mask = traj.token_ids, traj.loss_mask
    # the generated ids sit in the sequence exactly as generated, and only they are masked in
    gen_positions = [i for i, m in enumerate(mask) if m]
    assert [ids[i] for i in gen_positions] == agent.turn_ids[0] + agent.turn_ids[1]
    assert all(traj.old_logprobs[i] == -0.5 for i in gen_positions)
    assert all(traj.old_logprobs[i] == 0.0 for i, m in enumerate(mask) if not m)
    # the second prompt is the first prompt + turn 1's ids + new context (a strict extension)
    p0, p1 = gen.prompts
    assert p1[: len(p0)] == p0 and p1[len(p0): len(p0) + len(agent.turn_ids[0])] == agent.turn_ids[0]
    # the whole sequence reads as the chat layout: tools, request, call, observation, answer
    text = policy.tokenizer.decode(ids, skip_special_tokens=False)
    assert text.startswith(chat.IM_START + "system\n") and "cancel_order" in text.split(chat.IM_END)[0]
    order = [task.request, "<think>cancel the priciest</think>", '"order_id": "O0002"', "<|im_start|>tool\n",
             '"status": "cancelled"', "<|im_start|>assistant\nYour order has been cancelled.<|im_end|>"]
    pos = [text.find(s) for s in order]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), pos


def test_truncated_turn_is_closed_as_context(policy, world):
    task = world[0]["task_cancel"]
    gen = ScriptedGenerator(policy, ["I am still thinking about", "Done, it has been cancelled.<|im_end|>"])
    agent = HFAgent(policy, generator=gen)
    out = run_episode(task, local_env_factory(TOOLS), agent, OfflineUser(task), tools=SCHEMAS)
    traj = episode_to_trajectory(out)
    im_end = policy.tokenizer.convert_tokens_to_ids(chat.IM_END)
    k = traj.loss_mask.index(1) + len(agent.turn_ids[0])
    assert traj.token_ids[k] == im_end and traj.loss_mask[k] == 0  # closed by the engine, not trained on


def test_real_model_log_probs_match_a_full_forward_pass(policy, world):
    task = world[0]["task_buy"]
    agent = HFAgent(policy, temperature=1.0, max_new_tokens=10)
    torch.manual_seed(0)
    out = run_episode(task, local_env_factory(TOOLS), agent, OfflineUser(task), tools=SCHEMAS,
                      config=EpisodeConfig(max_turns=3))
    traj = episode_to_trajectory(out)
    assert traj.n_generated == sum(len(t) for t in agent.turn_ids) > 0
    ids = torch.tensor([traj.token_ids])
    with torch.no_grad():
        logits = policy.model(ids).logits[0, :-1].float()
    lp = torch.log_softmax(logits, -1).gather(1, ids[0, 1:, None]).squeeze(1)
    mask = torch.tensor(traj.loss_mask[1:], dtype=torch.bool)
    old = torch.tensor(traj.old_logprobs[1:])
    assert torch.allclose(lp[mask], old[mask], atol=1e-4), (lp[mask] - old[mask]).abs().max()


def test_rollout_fn_for_the_trainer(policy, world):
    tasks, dags = world
    stored = []
    fn = make_rollout_fn(dags, {"env_mock_shop": TOOLS}, env_factory=local_env_factory, judge=RuleJudge(),
                         config=EpisodeConfig(max_turns=3), max_new_tokens=8, concurrency=4, on_episodes=stored.extend)
    batch = [tasks["task_cancel"], tasks["task_buy"]]
    trajs = fn(policy, batch, 3)
    assert len(trajs) == 6 and len(stored) == 6
    assert [t.task_id for t in trajs] == ["task_cancel", "task_buy"] * 3
    for t in trajs:
        assert t.env_id == "env_mock_shop" and t.reward in (0.0, 1.0) and t.n_generated > 0
        assert t.metadata["episode_id"] in {e.episode_id for e in stored}
    # a second call plays new episodes (new seeds), it does not replay the first
    again = fn(policy, batch, 1)
    assert {t.metadata["episode_id"] for t in again}.isdisjoint({t.metadata["episode_id"] for t in trajs})


def test_batched_generator_serves_several_threads(policy):
    import threading

    gen = BatchedGenerator(policy, max_batch=4, wait_s=0.05)
    prompt = policy.tokenizer("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    results = [None] * 4

    def work(i):
        results[i] = gen.generate(prompt[: len(prompt) - i % 2], 5, 1.0)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    gen.close()
    assert all(r is not None and 0 < len(r[0]) == len(r[1]) <= 5 for r in results)


def test_a_request_with_its_own_generator_samples_the_same_alone_or_batched(policy):
    """Each request draws from its own stream: batched with others, or alone, it samples the same tokens."""
    import threading

    tok = policy.tokenizer
    prompts = [tok(f"<|im_start|>user\nhi {w}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
               for w in ("there", "you", "a", "b")]
    seeds = [11, 12, 13, 14]

    def run(order, max_batch):
        gen = BatchedGenerator(policy, max_batch=max_batch, wait_s=0.05)
        out = {}

        def work(i):
            out[i] = gen.generate(prompts[i], 12, 1.0, generator=torch.Generator().manual_seed(seeds[i]))

        threads = [threading.Thread(target=work, args=(i,)) for i in order]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        gen.close()
        return [out[i][0] for i in range(4)]

    alone = run([0, 1, 2, 3], max_batch=1)
    assert run([3, 1, 0, 2], max_batch=4) == alone
    assert run([2, 0, 3, 1], max_batch=2) == alone
    assert len({tuple(x) for x in alone}) > 1  # the streams differ


def test_rollouts_with_the_same_seed_sample_the_same_tokens(policy, world):
    """ERPO's rollouts are reproducible: each episode samples from its own seeded stream, so however the
    concurrent episodes' turns are batched, the same seed gives the same trajectories."""
    tasks, dags = world
    batch = [tasks["task_cancel"], tasks["task_buy"]]

    def play(concurrency):
        fn = make_rollout_fn(dags, {"env_mock_shop": TOOLS}, env_factory=local_env_factory, judge=RuleJudge(),
                             config=EpisodeConfig(max_turns=3), max_new_tokens=8, concurrency=concurrency, seed=5)
        return [(t.task_id, t.token_ids, t.reward) for t in fn(policy, batch, 3)]

    first = play(6)
    assert play(6) == first and play(1) == first
    assert len({tuple(ids) for _, ids, _ in first}) > 1


def test_run_eval_with_a_local_model(policy_dir, warehouse):
    from test_rollout_support import make_env

    from autoforge.pipeline.evaluate import run_eval
    from autoforge.warehouse import write_records

    tasks, dags = tasks_and_dags()
    write_records(warehouse, [make_env(), *TOOLS, *dags.values(), *tasks])
    s = run_eval(warehouse, agent=f"hf:{policy_dir}", user="offline", trials=2, concurrency=3, max_turns=2,
                 max_new_tokens=8, env_factory=local_env_factory)
    assert s["agent"] == f"hf:{policy_dir}" and s["n_episodes"] == 6
    assert set(s["terminations"]) <= {"max_turns", "user_stop", "user_gave_up"}, s["failures"]
