"""Shared fixtures. Everything here is offline: no network beyond 127.0.0.1, no model downloads."""

from __future__ import annotations

import os

import pytest

# Prefect: telemetry off, generous ephemeral-server start timeout (shared, loaded machines).
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("AUTOFORGE_LOCK_TIMEOUT", "5")


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
