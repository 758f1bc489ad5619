"""``run_eval`` over a warehouse: filters, stored episodes and results, the view, crash isolation."""

from __future__ import annotations

import itertools
import threading

import pytest
from test_rollout_support import local_env_factory, make_env, make_tools, tasks_and_dags

from autoforge.errors import ConfigError
from autoforge.pipeline import evaluate as stage
from autoforge.pipeline.evaluate import AGENT_NAMES, USER_NAMES, EvalParams, format_report, run_eval
from autoforge.types import Episode, EvalResult
from autoforge.warehouse import query, read_records, write_records


@pytest.fixture
def wh(warehouse):
    tasks, dags = tasks_and_dags()
    tasks = [t.model_copy(update={"split": "train"}) if t.task_id == "task_buy" else t for t in tasks]
    write_records(warehouse, [make_env(), *make_tools(), *dags.values(), *tasks])
    return warehouse


def test_oracle_eval_stores_episodes_results_and_the_view(wh):
    s = run_eval(wh, agent="oracle", user="offline", trials=2, concurrency=2, env_factory=local_env_factory)
    assert s["n_tasks"] == 3 and s["n_episodes"] == 6 and s["success_rate"] == 1.0 and s["failures"] == []
    by = {(r["env_id"], r["k"]): r for r in s["results"]}
    assert set(by) == {("env_mock_shop", 1), ("env_mock_shop", 2), (None, 1), (None, 2)}
    assert by[(None, 2)]["pass_hat_k"] == 1.0 and by[(None, 2)]["n_tasks"] == 3
    eps = read_records(wh, Episode, where="eval_id = :e", params={"e": s["eval_id"]})
    assert len(eps) == 6 and all(e.reward == 1.0 and e.judge_flag is False for e in eps)
    assert all(e.run_id == s["run_id"] and e.diagnostics["judge"]["flag"] is False for e in eps)
    assert len({e.episode_id for e in eps}) == 6
    view = query(wh, "SELECT * FROM v_eval_results WHERE eval_id = :e", {"e": s["eval_id"]})
    assert {"eval_id", "agent", "user_sim", "env_id", "k", "pass_hat_k", "n_tasks"} <= set(view[0])
    overall = [r for r in view if r["env_id"] is None]
    assert len(overall) == 2 and overall[0]["n_episodes"] == 6 and overall[0]["agent"] == "oracle"
    env_rows = [r for r in view if r["env_id"] == "env_mock_shop"]
    assert env_rows[0]["env_name"] == "mock_shop" and env_rows[0]["n_episodes"] == 6
    runs = query(wh, "SELECT stage, status, counts FROM runs WHERE run_id = :r", {"r": s["run_id"]})
    assert runs[0]["stage"] == "eval" and runs[0]["status"] == "completed"
    # re-running the same evaluation upserts: no duplicate rows
    run_eval(wh, agent="oracle", user="offline", trials=2, concurrency=2, env_factory=local_env_factory)
    assert len(read_records(wh, EvalResult, where="eval_id = :e", params={"e": s["eval_id"]})) == 4
    text = format_report(s)
    assert "(overall)" in text and "pass^k" in text


def test_split_env_and_limit_filters(wh):
    s = run_eval(wh, agent="oracle", user="offline", split="test", env_factory=local_env_factory, concurrency=1)
    assert s["n_tasks"] == 2
    s = run_eval(wh, agent="oracle", user="offline", split="train", env="mock_shop", env_factory=local_env_factory)
    assert s["n_tasks"] == 1
    s = run_eval(wh, agent="oracle", user="offline", limit=1, env_factory=local_env_factory)
    assert s["n_tasks"] == 1
    with pytest.raises(ConfigError, match="no curated tasks"):
        run_eval(wh, agent="oracle", user="offline", env="no_such_env", env_factory=local_env_factory)
    with pytest.raises(ConfigError, match="split"):
        run_eval(wh, agent="oracle", user="offline", split="dev", env_factory=local_env_factory)


def test_one_params_model_for_the_library_the_flow_and_the_cli(wh):
    import inspect

    from flows.evaluate import evaluate_flow

    assert set(inspect.signature(evaluate_flow.fn).parameters) - {"warehouse"} <= set(EvalParams.model_fields)
    s = stage.run(wh, EvalParams(limit=1), env_factory=local_env_factory)
    assert s["n_tasks"] == 1 and s["agent"] == "oracle"
    for bad, match in (({"trials": 0}, "trials"), ({"concurrency": 0}, "concurrency"), ({"limit": 0}, "limit"),
                       ({"user_error_rate": 1.5}, "within"), ({"max_turns": 0}, "max_turns")):
        with pytest.raises(ConfigError, match=match):
            stage.run(wh, EvalParams(**bad), env_factory=local_env_factory)
    with pytest.raises(ConfigError, match="no curated tasks.*autoforge factory"):
        run_eval(wh, env="no_such_env", env_factory=local_env_factory)


def test_random_agent_is_near_zero(wh):
    s = run_eval(wh, agent="random", user="offline", trials=5, env_factory=local_env_factory)
    assert s["success_rate"] <= 0.1
    assert len(s["failures"]) >= 14


def test_injected_errors_and_judge_are_reported(wh):
    s = run_eval(wh, agent="oracle", user="offline", trials=8, user_error_rate=0.5, seed=3,
                 env_factory=local_env_factory)
    assert s["user_sim"].startswith("offline[wrong_fact=")
    j = s["judge"]
    assert j["tp"] == s["n_user_errors"] > 0 and j["fp"] == 0
    assert all(f["user_error"] for f in s["failures"])  # the oracle only fails when the user erred


class _Flaky:
    """Environment 0, 3, 6 ... break on their first tool call; 1, 4, 7 ... fail to start; the rest work."""

    def __init__(self):
        self.n = itertools.count()
        self.lock = threading.Lock()

    def __call__(self, tools):
        with self.lock:
            i = next(self.n)
        if i % 3 == 1:
            raise RuntimeError("no sandbox worker available")
        env = local_env_factory(tools)
        if i % 3 == 0:
            def broken(name, arguments):
                raise OSError("worker pipe closed")
            env.call = broken
        return env


def test_a_crash_in_one_episode_is_recorded_and_the_run_goes_on(wh):
    s = run_eval(wh, agent="oracle", user="offline", trials=4, concurrency=3, env_factory=_Flaky())
    assert s["n_episodes"] == 12
    crashed = [f for f in s["failures"] if f["termination"] == "env_error"]
    assert crashed and all(f["reward"] is None for f in crashed)
    assert any("no sandbox worker" in (f["detail"] or "") for f in crashed)
    assert any("worker pipe closed" in (f["detail"] or "") for f in crashed)
    assert 0 < s["success_rate"] < 1
    assert s["n_unscored"] == len(crashed)
    eps = read_records(wh, Episode, where="eval_id = :e", params={"e": s["eval_id"]})
    assert len(eps) == 12


def test_real_sandbox_runtime_with_concurrency(wh):
    s = run_eval(wh, agent="oracle", user="offline", trials=2, concurrency=3)  # default env factory: the runtime
    assert s["success_rate"] == 1.0, s["failures"]


def test_unknown_names_list_the_valid_ones(wh):
    with pytest.raises(ConfigError, match="valid agents: oracle, random"):
        run_eval(wh, agent="gpt", user="offline")
    with pytest.raises(ConfigError, match="valid users: offline"):
        run_eval(wh, agent="oracle", user="human")
    with pytest.raises(ConfigError, match="valid judges"):
        run_eval(wh, agent="oracle", user="offline", judge="vibes")
    assert "oracle" in AGENT_NAMES and "offline" in USER_NAMES


def test_online_agent_user_and_judge_through_the_stub_server(wh):
    """openai agent + llm user + llm judge, all against the local stub server (registry wiring)."""
    from stub_openai_server import StubOpenAIServer, json_reply, reply, tool_reply

    from autoforge.settings import Settings

    def respond(body):
        msgs = body["messages"]
        if "response_format" in body or "Answer with JSON" in msgs[-1]["content"]:  # the judge
            return json_reply({"user_error": False, "kind": None, "reason": "fine"})
        if body.get("tools"):  # the agent: look the user up, then claim success
            if not any(m["role"] == "tool" for m in msgs):
                return tool_reply([("get_user", {"user_id": "U0001"})])
            return reply("All done: your request has been completed.")
        return reply("Thanks! ###STOP###")  # the user

    with StubOpenAIServer(default=respond) as srv:
        settings = Settings(openai_base_url=srv.base_url, openai_api_key="k", openai_model="stub-model",
                            llm_max_retries=0)
        s = run_eval(wh, agent="openai", user="llm", judge="llm", settings=settings, env_factory=local_env_factory,
                     concurrency=2)
    assert s["agent"] == "openai:stub-model" and s["user_sim"] == "llm:stub-model"
    assert s["n_episodes"] == 3 and s["success_rate"] == 0.0  # a read is not the requested change
    assert s["terminations"] == {"user_stop": 3} and s["judge"]["fp"] == 0 and s["judge"]["judge"] == "llm:stub-model"
    calls = query(wh, "SELECT step, count(*) AS n FROM llm_calls GROUP BY step ORDER BY step")
    assert {r["step"] for r in calls} == {"agent", "judge", "user_sim"}
