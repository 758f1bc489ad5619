"""A real ``prefect server start`` on 127.0.0.1 for integration tests, and a small REST client.

``PrefectServer(tmp_dir)`` starts the server on a free port with its own ``PREFECT_HOME`` and
its own SQLite database under ``tmp_dir`` (nothing touches ``~/.prefect``), with telemetry off
and the UI off, waits until ``/api/health`` answers, and stops it (process group, SIGTERM then
SIGKILL). ``env()`` is the environment for client processes (workers, ``prefect deploy``,
``serve``). ``api`` is an ``httpx.Client`` on the REST API; :func:`trigger` and
:func:`wait_for_run` drive a deployment the way the UI's "Run" button does.

Stop workers and serve processes before the server (a worker ignored SIGTERM when both
stopped together, seen with Prefect 3). :func:`stop_process` does that for any
subprocess started with ``start_new_session=True``.

Measured here (2 shared cores): healthy in 7-15 s.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
PREFECT_BIN = str(Path(sys.executable).with_name("prefect"))
TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def quiet_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The current environment with Prefect telemetry off and no inherited API URL or profile."""
    env = dict(os.environ if base is None else base)
    for key in ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE"):
        env.pop(key, None)
    env.update({
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        "PYTHONPATH": os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    })
    return env


def stop_process(proc: subprocess.Popen | None, timeout: float = 15.0) -> None:
    """SIGTERM the process group we started (``start_new_session=True``), then SIGKILL it."""
    if proc is None or proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


class PrefectServer:
    """``prefect server start`` on 127.0.0.1:<free port> with a temporary home and database."""

    def __init__(self, root: Path, port: int | None = None, start_timeout: float = 120.0):
        self.root = Path(root)
        self.home = self.root / "prefect-home"
        self.port = port or free_port()
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.log_path = self.root / "prefect-server.log"
        self.api: httpx.Client | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment for a client process (worker, CLI, serve) of this server."""
        env = quiet_env()
        env.update({"PREFECT_HOME": str(self.home), "PREFECT_API_URL": self.url}, **extra)
        return env

    def start(self) -> "PrefectServer":
        self.home.mkdir(parents=True, exist_ok=True)
        env = quiet_env()
        env.update({
            "PREFECT_HOME": str(self.home),
            "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{self.home / 'prefect.db'}",
            "PREFECT_UI_ENABLED": "false",
            "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        })
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [PREFECT_BIN, "server", "start", "--host", "127.0.0.1", "--port", str(self.port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root,
        )
        log.close()
        self.api = httpx.Client(base_url=self.url, timeout=30.0)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prefect server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if self.api.get("/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"prefect server not healthy after {self.start_timeout:.0f}s:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.api is not None:
            self.api.close()
            self.api = None
        stop_process(self.proc)

    def __enter__(self) -> "PrefectServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------ REST helpers

    def deployment(self, name: str) -> dict:
        """A deployment by ``flow-name/deployment-name``."""
        r = self.api.get(f"/deployments/name/{name}")
        r.raise_for_status()
        return r.json()

    def wait_for_deployment(self, name: str, timeout: float = 90.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            r = self.api.get(f"/deployments/name/{name}")
            if r.status_code == 200:
                return r.json()
            if time.monotonic() > deadline:
                raise TimeoutError(f"deployment {name} not registered after {timeout:.0f}s")
            time.sleep(0.5)

    def trigger(self, name: str, parameters: dict | None = None) -> str:
        """Create a flow run of a deployment (what the UI's Run button does); returns its id."""
        dep = self.deployment(name)
        for attempt in range(5):  # 503: the server's own database was busy (SQLite, loaded machine): retry
            r = self.api.post(f"/deployments/{dep['id']}/create_flow_run", json={"parameters": parameters or {}})
            if r.status_code != 503:
                break
            time.sleep(0.5 * (attempt + 1))
        r.raise_for_status()
        return r.json()["id"]

    def flow_run(self, run_id: str) -> dict:
        r = self.api.get(f"/flow_runs/{run_id}")
        r.raise_for_status()
        return r.json()

    def wait_for_run(self, run_id: str, timeout: float = 180.0) -> dict:
        """Poll until the run is in a terminal state; returns the flow run JSON."""
        deadline = time.monotonic() + timeout
        while True:
            run = self.flow_run(run_id)
            if (run.get("state_type") or "") in TERMINAL:
                return run
            if time.monotonic() > deadline:
                raise TimeoutError(f"flow run {run_id} still {run.get('state_type')} after {timeout:.0f}s")
            time.sleep(0.5)

    def run_logs(self, run_id: str, limit: int = 200) -> str:
        r = self.api.post("/logs/filter", json={"logs": {"flow_run_id": {"any_": [run_id]}}, "limit": limit})
        r.raise_for_status()
        return "\n".join(f"{x['level']} {x['message']}" for x in r.json())

    def artifacts(self, run_id: str) -> list[dict]:
        r = self.api.post("/artifacts/filter", json={"artifacts": {"flow_run_id": {"any_": [run_id]}}})
        r.raise_for_status()
        return r.json()


def run_cli(args: list[str], env: dict[str, str], timeout: float = 180.0, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """Run the ``prefect`` CLI (non-interactive) and return the completed process."""
    return subprocess.run([PREFECT_BIN, "--no-prompt", *args], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
