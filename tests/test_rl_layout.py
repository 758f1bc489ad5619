"""SFT examples have exactly the token layout the HF agent grows at rollout time.

The oracle's gold dialogue, encoded by ``encode_episode``, must equal token for token (ids and
loss mask) the sequence an HF agent builds when it generates those same assistant turns
through the real episode engine: otherwise SFT would teach tokens the policy is never scored on.
"""

from __future__ import annotations

import pytest
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.rl import chat
from autoforge.rl.agent import HFAgent, episode_to_trajectory
from autoforge.rl.policy import build_tiny_policy, encode_episode, load_policy
from autoforge.rollout.agents import OracleAgent
from autoforge.rollout.engine import run_episode
from autoforge.rollout.toolcalls import tool_schemas
from autoforge.rollout.users import OfflineUser

TOOLS = make_tools()
SCHEMAS = tool_schemas(TOOLS)


@pytest.fixture(scope="module")
def policy(tmp_path_factory):
    tasks, _ = tasks_and_dags()
    corpus = [t.request for t in tasks] * 20 + [c.source for c in TOOLS] * 5
    d = build_tiny_policy(tmp_path_factory.mktemp("tiny"), corpus, vocab_size=400, hidden_size=32, num_layers=1,
                          num_heads=2)
    return load_policy(d, device="cpu")


class Replay:
    """A generator that 'samples' given assistant bodies (their canonical tokenization)."""

    def __init__(self, tok, bodies):
        self.ids = [tok(b, add_special_tokens=False)["input_ids"] for b in bodies]

    def generate(self, ids, max_new_tokens, temperature, generator=None):
        new = self.ids.pop(0)
        return new, [-1.0] * len(new)


@pytest.mark.parametrize("name", ["cancel", "buy"])
def test_encode_episode_equals_the_hf_agent_sequence(policy, name):
    tasks, dags = tasks_and_dags()
    task = {t.task_id: t for t in tasks}[f"task_{name}"]
    gold = run_episode(task, local_env_factory(TOOLS), OracleAgent(), OfflineUser(task), tools=SCHEMAS,
                       dag=dags[task.dag_id]).episode
    assert gold.reward == 1.0
    head = f"{chat.IM_START}assistant\n"
    bodies = [chat.render_message(m)[len(head):-1] for m in gold.messages if m.role == "assistant"]

    agent = HFAgent(policy, generator=Replay(policy.tokenizer, bodies))
    out = run_episode(task, local_env_factory(TOOLS), agent, OfflineUser(task), tools=SCHEMAS)
    assert out.episode.reward == 1.0  # the replayed turns solve the task through the HF agent too
    traj = episode_to_trajectory(out)

    ids, mask = encode_episode(policy.tokenizer, gold.messages, SCHEMAS)
    assert ids == traj.token_ids
    assert mask == traj.loss_mask
    trained = policy.tokenizer.decode([i for i, m in zip(ids, mask) if m])
    assert trained.count(chat.IM_END) == len(bodies) and "<|im_start|>" not in trained
