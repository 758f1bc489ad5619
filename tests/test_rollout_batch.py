"""The shared episode runner (rollout/batch.py).

Evaluation, training rollouts and SFT gold replays all play their episodes through
``play_episodes``; none goes through another (``evaluate_tasks`` is evaluation only).
"""

from __future__ import annotations

import threading

import pytest
from test_rollout_support import local_env_factory, make_tools, tasks_and_dags

from autoforge.errors import ConfigError
from autoforge.rollout.agents import OracleAgent
from autoforge.rollout.batch import episode_batch_id, play_episodes
from autoforge.rollout.engine import EpisodeConfig
from autoforge.rollout.evaluate import evaluate_tasks, make_agent_factory
from autoforge.rollout.judge import RuleJudge
from autoforge.rollout.users import ErrorRates, OfflineUser

TOOLS = make_tools()


def _untimed(ep) -> dict:
    d = ep.model_dump(exclude={"created_at"})
    d["diagnostics"] = {k: v for k, v in d["diagnostics"].items() if k != "wall_s"}
    return d


def _offline(task, plan, seed):
    return OfflineUser(task, plan, seed=seed)


def test_play_episodes_trial_major_judged_and_the_same_episodes_as_evaluation():
    tasks, dags = tasks_and_dags()
    seen, lock = [], threading.Lock()

    def on_episode(out):
        with lock:
            seen.append(out)

    kw = dict(agent_factory=OracleAgent, user_factory=_offline, agent_name="oracle", user_name="offline", trials=3,
              error_rates=ErrorRates.uniform(0.3), judge=RuleJudge(), concurrency=3, env_factory=local_env_factory,
              seed=5)
    batch = play_episodes(tasks, dags, {"env_mock_shop": TOOLS}, on_episode=on_episode, **kw)
    assert [(e.task_id, e.trial) for e in batch.episodes] == [(t.task_id, k) for k in range(3) for t in tasks]
    assert len(seen) == 9 and {o.episode.episode_id for o in seen} == {e.episode_id for e in batch.episodes}
    assert all(isinstance(o.agent, OracleAgent) for o in seen)  # the outcome keeps the agent (HF: its tokens)
    assert all(e.diagnostics["judge"]["flag"] == e.judge_flag for e in batch.episodes)
    assert batch.user_label.startswith("offline[") and batch.wall_s > 0
    assert batch.batch_id == episode_batch_id("oracle", batch.user_label, [t.task_id for t in tasks], 3, 5,
                                              RuleJudge(), EpisodeConfig())
    # evaluation is this batch plus pass^k: the same episodes, its eval_id the batch id
    rep = evaluate_tasks(tasks, dags, {"env_mock_shop": TOOLS}, n_boot=10, **kw)
    assert rep.eval_id == batch.batch_id
    assert [_untimed(e) for e in rep.episodes] == [_untimed(e) for e in batch.episodes]


def test_environments_are_closed_and_reused_per_thread():
    tasks, dags = tasks_and_dags()
    made, closed = [], []

    def factory(tools):
        env = local_env_factory(tools)
        env.close = lambda env=env: closed.append(env)
        made.append(env)
        return env

    play_episodes(tasks, dags, {"env_mock_shop": TOOLS}, agent_factory=OracleAgent, user_factory=_offline,
                  agent_name="oracle", user_name="offline", trials=2, concurrency=1, env_factory=factory)
    assert len(made) == 6 and {id(e) for e in closed} == {id(e) for e in made}
    made.clear()
    batch = play_episodes(tasks, dags, {"env_mock_shop": TOOLS}, agent_factory=OracleAgent, user_factory=_offline,
                          agent_name="oracle", user_name="offline", trials=2, concurrency=1, env_factory=factory,
                          reuse_envs=True)
    assert len(made) == 1 and all(e.reward == 1.0 for e in batch.episodes)  # reset gives each episode a fresh state


def test_bad_arguments_and_local_agents_need_a_loader():
    tasks, dags = tasks_and_dags()
    with pytest.raises(ConfigError, match="trials"):
        play_episodes(tasks, dags, {}, agent_factory=OracleAgent, user_factory=_offline, agent_name="o",
                      user_name="u", trials=0)
    with pytest.raises(ConfigError, match="no loader"):
        make_agent_factory("hf:/some/dir")
    factory, name = make_agent_factory("hf:/some/dir", local_loader=lambda d, **kw: (d, kw))
    assert name == "hf:/some/dir" and factory[0] == "/some/dir" and factory[1]["name"] == "hf:/some/dir"
