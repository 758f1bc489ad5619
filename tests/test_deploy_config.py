"""deployments/prefect.yaml is consistent with the flows, and `serve` reads the same entries (fast, no server)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import yaml

from autoforge.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
PREFECT_FILE = REPO / "deployments" / "prefect.yaml"
EXPECTED = {"ingest", "synthesize", "sample", "generate", "verify", "factory", "train-erpo", "evaluate"}


@pytest.fixture(scope="module")
def doc() -> dict:
    return yaml.safe_load(PREFECT_FILE.read_text())


def by_name(doc: dict) -> dict[str, dict]:
    return {d["name"]: d for d in doc["deployments"]}


def test_root_prefect_yaml_is_the_deployment_file():
    root = REPO / "prefect.yaml"  # what a bare `prefect deploy --all` in the repository root reads
    assert root.exists(), "prefect.yaml missing at the repository root (a symlink to deployments/prefect.yaml)"
    assert root.read_text() == PREFECT_FILE.read_text()


def test_one_deployment_per_flow_with_description_tags_pool(doc):
    deps = by_name(doc)
    assert set(deps) == EXPECTED
    for name, d in deps.items():
        assert d["description"].strip(), name
        assert "autoforge" in d["tags"], name
        assert d["entrypoint"].startswith("flows/") and ":" in d["entrypoint"], name
        assert d["parameters"], f"{name}: no typed parameters with defaults"
        assert (REPO / d["entrypoint"].split(":")[0]).parent.is_dir()
    pools = {n: d["work_pool"]["name"] for n, d in deps.items()}
    assert pools.pop("train-erpo") == "autoforge-train"
    assert set(pools.values()) == {"autoforge-cpu"}
    # anchors: every CPU stage shares one work-pool mapping (same job variables)
    cpu = [d["work_pool"] for n, d in deps.items() if n != "train-erpo"]
    assert all(p == cpu[0] for p in cpu)
    assert set(doc["definitions"]) >= {"work_pools", "schedules", "tags"}


def test_schedules_factory_nightly_training_its_own(doc):
    deps = by_name(doc)
    factory = deps["factory"]["schedules"]
    train = deps["train-erpo"]["schedules"]
    assert len(factory) == 1 and len(factory[0]["cron"].split()) == 5 and factory[0]["timezone"]
    assert len(train) == 1 and train[0]["cron"] != factory[0]["cron"]
    from prefect.schedules import Cron

    Cron(factory[0]["cron"], timezone=factory[0]["timezone"])  # valid cron + timezone
    Cron(train[0]["cron"], timezone=train[0]["timezone"])
    assert all(not d.get("schedules") for n, d in deps.items() if n not in ("factory", "train-erpo"))


def test_pull_step_sets_the_working_directory_to_the_deploy_directory(doc):
    build = doc["build"][0]["prefect.deployments.steps.run_shell_script"]
    pull = doc["pull"][0]["prefect.deployments.steps.set_working_directory"]
    assert build["script"] == "pwd"
    assert pull["directory"] == "{{ " + build["id"] + ".stdout }}"


def _flow(entrypoint: str):
    from flows.serve import DeploymentSpec, load_flow

    return load_flow(DeploymentSpec(name="x", entrypoint=entrypoint))


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_parameters_match_the_flow_signature(doc, name):
    d = by_name(doc)[name]
    path = REPO / d["entrypoint"].split(":")[0]
    if not path.exists():
        pytest.skip(f"{path.relative_to(REPO)} is not written yet (deployment {name} needs it)")
    flow = _flow(d["entrypoint"])
    sig = inspect.signature(flow.fn).parameters
    unknown = set(d["parameters"]) - set(sig)
    assert not unknown, f"{name}: prefect.yaml parameters {unknown} are not parameters of {d['entrypoint']}"
    for key, value in d["parameters"].items():
        default = sig[key].default
        if default is not inspect.Parameter.empty and value is not None and default is not None:
            assert type(value) is type(default) or isinstance(value, type(default)), (name, key, value, default)
    if "warehouse" in sig:
        assert "warehouse" in d["parameters"], f"{name}: expose warehouse so the UI can point it at a file"


def test_serve_builds_runner_deployments_from_the_same_file():
    from flows.serve import build_deployments

    deps = {d.name: d for d in build_deployments(warehouse="/tmp/x.duckdb", names=["factory", "ingest"],
                                                 parameters={"max_envs": 2, "nonexistent": 1})}
    assert set(deps) == {"factory", "ingest"}
    f = deps["factory"]
    assert f.parameters["warehouse"] == "/tmp/x.duckdb" and f.parameters["max_envs"] == 2
    assert "nonexistent" not in f.parameters and "max_envs" not in deps["ingest"].parameters
    assert len(f.schedules) == 1 and f.schedules[0].schedule.cron == "0 2 * * *"
    assert f.entrypoint == "flows.factory.factory_flow"  # module path: runs from any directory
    assert "autoforge" in f.tags and f.description
    no_sched = build_deployments(names=["factory"], schedules=False)[0]
    assert not no_sched.schedules


def test_serve_rejects_unknown_names_with_the_valid_ones():
    from flows.serve import load_specs

    with pytest.raises(ConfigError, match="factory"):
        load_specs(names=["factroy"])


def test_serve_rejects_a_parameter_the_flow_does_not_take(tmp_path):
    from flows.serve import build_deployments

    bad = yaml.safe_load(PREFECT_FILE.read_text())
    bad["deployments"] = [d for d in bad["deployments"] if d["name"] == "ingest"]
    bad["deployments"][0]["parameters"]["tasks_per_env"] = 3
    path = tmp_path / "prefect.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError, match="tasks_per_env"):
        build_deployments(prefect_file=path)
