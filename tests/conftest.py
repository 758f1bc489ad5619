"""Shared fixtures. Everything here is offline: no network beyond 127.0.0.1, no model downloads."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Prefect: telemetry off, generous ephemeral-server start timeout (shared, loaded machines).
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("AUTOFORGE_LOCK_TIMEOUT", "5")

# Prefect binds its console log handler to the sys.stderr it finds when it first sets up logging.
# A test that first imports it under capsys (a CLI test that reaches flows/) leaves that handler
# writing to a stream closed after the test, and every later flow run fails inside logging. Set it
# up here, once, on the session's own stream.
import prefect.main  # noqa: E402,F401  (prefect.main sets up Prefect's logging; `import prefect` alone is lazy)


@pytest.fixture
def warehouse(tmp_path) -> str:
    """A fresh, migrated DuckDB warehouse file."""
    from autoforge.warehouse import apply_migrations

    path = str(tmp_path / "test.duckdb")
    apply_migrations(path)
    return path


@pytest.fixture(scope="session")
def prefect_harness():
    """ONE Prefect test server for the whole session (it takes 13-25 s to start on this machine)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


# A test run leaves nothing in the work tree: every file a test writes goes under tmp_path. The
# files git does not track (ignored ones too) are listed before and after the session; anything
# new, outside the usual caches, fails the run with the list of paths. Source files (.py, .md, .sql)
# are not test output: someone writing code beside a running suite must not fail it.
_CACHES = (".venv/", "venv/", ".pytest_cache/", ".hypothesis/", "__pycache__/", ".egg-info/")
_SOURCE = (".pyc", ".py", ".md", ".sql")


def _untracked() -> set[str] | None:
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--ignored", "--untracked-files=all"], cwd=ROOT,
                             capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None  # not a git checkout (an sdist, say): nothing to compare
    paths = {line[3:] for line in out.splitlines() if line[:2] in ("??", "!!")}
    return {p for p in paths if not any(c in p or p.startswith(c) for c in _CACHES) and not p.endswith(_SOURCE)}


def pytest_sessionstart(session):
    session.config._untracked_before = _untracked()


def pytest_sessionfinish(session, exitstatus):
    before = getattr(session.config, "_untracked_before", None)
    after = _untracked()
    if before is None or after is None or hasattr(session.config, "workerinput"):
        return
    left = sorted(after - before)
    if left:
        print("\n\nthe tests left files in the work tree (write them under tmp_path):\n  " + "\n  ".join(left[:20]))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def three_env_corpus(tmp_path_factory) -> str:
    """One factory run, shared read-only by the bundle and trainer-export tests: effects_calculator (answer
    tasks), library (state writes, boundary tasks, runtime guards, a judged rule) and hr (state writes)."""
    from autoforge.pipeline import run_factory

    root = Path(__file__).resolve().parents[1]
    paths = [root / "tests" / "fixtures" / "realstyle" / "effects_calculator.json",
             root / "autoforge" / "data" / "tooldocs" / "library", root / "autoforge" / "data" / "tooldocs" / "hr"]
    path = str(tmp_path_factory.mktemp("three_env") / "wh.duckdb")
    run_factory(warehouse=path, bundled=False, paths=[str(p) for p in paths], tasks_per_env=8, seed=0)
    return path
