"""The verifiers export checked by verifiers' own code (issue 35), for ``benchmarks/interop.py --only verifiers``.

**verifiers** (``verifiers==0.4.0``, PrimeIntellect; its venv: ``python benchmarks/interop.py --setup --only
verifiers``; AutoForge is not installed there and neither is the exported package: the package's folder is on
``PYTHONPATH``, so ``pip check`` stays clean). ``autoforge export --format verifiers`` writes the package
(``autoforge_tasks``: a ``vf.Taskset``, a per-rollout ``vf.Toolset``, the bundle and a copy of AutoForge's code),
then, in the venv, with ``HOME`` in the temp dir (verifiers keeps its runtimes under ``~/.cache/verifiers``):

1. ``vf-validate autoforge-tasks --runtime.type subprocess`` (the library's own model-free check) over every task:
   each task's ``setup`` then ``validate`` (the gold check: the oracle's trajectory scores 1.0) and, in a fresh
   runtime, ``setup`` then ``finalize`` and scoring with no agent (the noop check: it must not score 1.0); every
   row must be ``valid``;
2. for ``per_env`` tasks per environment (default 2, each environment's kinds first), two rollouts each through
   verifiers' own rollout path: ``vf.load_environment`` (the taskset's ``SingleAgentEnv``) -> ``env.serving()`` ->
   ``env.run_episode(task, ctx)``, with the ``null`` harness (verifiers' own chat program: it lists the tool
   server's MCP tools, sends the model each turn through verifiers' interception server and calls the tools the
   model asks for), the subprocess runtime, the task's tool server started by verifiers (``python -m
   autoforge_tasks.verifiers_toolset``), and a scripted model behind ``ctx``'s endpoint (a local OpenAI-compatible
   server, streamed chat completions): the gold trajectory (:func:`interop.oracle_scripts`: each action a turn
   with one tool call, messages to the user through ``talk_to_user``, then its final message) and a do-nothing
   one (the final message only). The reward is the trace's, from the task's ``@vf.reward`` (verifiers'
   ``Task.score``): gold 1.0, do-nothing 0.0; each trace ends ok, with one tool result per action, the replay in
   the reward equal to the live episode, and the model offered the task's tools.

Only substitution: the chat program is a PEP 723 script whose environment verifiers makes with ``uv sync`` (a
download); this venv has its declared packages (openai, mcp 2.0, httpx, httpx2, tenacity, certifi), so
``Runtime.prepare_uv_script`` hands back this interpreter instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "autoforge_tasks"
TASKSET_ID = "autoforge-tasks"
DONE = "All done: I have completed everything you asked for."
CONCURRENCY = 4  # rollouts at once (each: a tool-server process and a chat-program process)


# --------------------------------------------------------------------------- AutoForge's side


def run(warehouse: str, relation: str, tmp: Path, keep: Path | None = None, per_env: int | None = 2) -> dict:
    """Export ``relation`` as a verifiers package, then check it with verifiers' code (see the module docstring)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import interop

    from autoforge.integrations.verifiers_export import export_verifiers

    py = interop.venv_python("verifiers")
    if py is None:
        return {"library": "verifiers",
                "skipped": f"no venv at {interop.venv_of('verifiers')} (python benchmarks/interop.py --setup)"}
    out = keep or tmp / "verifiers_export"
    export_verifiers(warehouse, relation, str(out))
    rows = json.loads((out / PACKAGE / "tasks.json").read_text())
    scripts = interop.oracle_scripts(out / PACKAGE / "bundle")
    picked = interop._pick([(r["task_id"], r["env"], r["kind"]) for r in rows], per_env)
    env = interop.child_env(tmp)
    env.update(PYTHONPATH=str(out), HOME=str(tmp / "vf_home"))
    (tmp / "vf_home").mkdir(exist_ok=True)
    validated = vf_validate(py, tmp, env)
    spec = tmp / "verifiers_play.json"
    spec.write_text(json.dumps({"scripts": scripts, "picked": picked}))
    res = interop.inside(py, [__file__, "--inside", str(out), "--spec", str(spec)], "verifiers_check", "verifiers",
                         env, 1500)
    meta = {r["task_id"]: r for r in rows}
    bad = list(res["bad"]) + validated["bad"]
    bad += [(t, "engine", s["engine_reward"]) for t, s in scripts.items() if s["engine_reward"] != 1.0]
    gold, noop = res["gold"], res["noop"]
    bad += [("gold", t, r) for t, r in gold if r != 1.0] + [("noop", t, r) for t, r in noop if r != 0.0]
    envs = sorted({meta[t]["env"] for t in picked})
    return {"library": "verifiers", "version": res["version"], "tasks": len(picked), "envs": len(envs),
            "env_names": envs, "kinds": sorted({meta[t]["kind"] for t in picked}), "exported": len(rows),
            "validate": validated["summary"], "validate_s": validated["seconds"],
            "gold": min(r for _, r in gold) if not bad else [r for _, r in gold],
            "noop": max(r for _, r in noop) if not bad else [r for _, r in noop],
            "rewards": {t: {"gold": g, "noop": n} for (t, g), (_, n) in zip(gold, noop)},
            "turns": res["turns"], "bad": bad}


def vf_validate(py: Path, tmp: Path, env: dict) -> dict:
    """``vf-validate autoforge-tasks --runtime.type subprocess`` over every task: its summary, its non-valid rows."""
    out_dir = tmp / "vf_validate"
    t0 = time.perf_counter()
    proc = subprocess.run([str(py.parent / "vf-validate"), TASKSET_ID, "--runtime.type", "subprocess", "-o",
                           str(out_dir), "--rich", "false", "-c", "4"], capture_output=True, text=True, env=env,
                          timeout=1200)
    seconds = round(time.perf_counter() - t0, 1)
    runs = sorted(out_dir.glob("*/results.jsonl"))
    if proc.returncode != 0 or not runs:
        raise RuntimeError(f"vf-validate failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-4000:]}")
    results = [json.loads(ln) for ln in runs[-1].read_text().splitlines() if ln.strip()]
    summary = json.loads((runs[-1].parent / "summary.json").read_text())
    bad = [("vf-validate", r.get("name"), r.get("reason"), r.get("error")) for r in results
           if r.get("valid") is not True]
    if summary.get("recorded") != summary.get("total") or not results:
        bad.append(("vf-validate", "recorded", summary.get("recorded"), summary.get("total")))
    return {"summary": {"total": summary.get("total"), "valid": summary["outcomes"]["valid"],
                        "gold_valid": summary["checks"]["gold"]["valid"],
                        "noop_valid": summary["checks"]["noop"]["valid"]}, "bad": bad, "seconds": seconds}


# --------------------------------------------------------------------------- the scripted model


class ScriptedModel(ThreadingHTTPServer):
    """A local OpenAI-compatible chat-completions endpoint playing one script per rollout: the rollout is the
    ``X-Session-ID`` header verifiers' eval client sends (the trace id), the turn the number of assistant messages
    in the request; each turn is ``{"call": [name, arguments]}`` or ``{"say": text}`` (past the end: ``DONE``)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scripts: dict[str, list[dict]] = {}
        self.offered: dict[str, list[str]] = {}  # the tool names of each rollout's first request
        self.requests = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    server: ScriptedModel

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        session = self.headers.get("X-Session-ID") or ""
        if not self.path.endswith("/chat/completions") or session not in self.server.scripts:
            self._send(404, "application/json", json.dumps({"error": {"message": f"no script for {session!r}"}}))
            return
        self.server.requests += 1
        self.server.offered.setdefault(session, sorted(t["function"]["name"] for t in body.get("tools") or ()))
        turn = sum(1 for m in body.get("messages", ()) if m.get("role") == "assistant")
        script = self.server.scripts[session]
        step = script[turn] if turn < len(script) else {"say": DONE}
        if "call" in step:
            name, args = step["call"]
            delta = {"role": "assistant", "content": None, "tool_calls": [
                {"index": 0, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                 "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}}]}
            finish = "tool_calls"
        else:
            delta, finish = {"role": "assistant", "content": step["say"]}, "stop"
        head = {"id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "created": int(time.time()), "model": body.get("model")}
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        if body.get("stream"):
            chunk = dict(head, object="chat.completion.chunk")
            events = [dict(chunk, choices=[{"index": 0, "delta": delta, "finish_reason": None}]),
                      dict(chunk, choices=[{"index": 0, "delta": {}, "finish_reason": finish}]),
                      dict(chunk, choices=[], usage=usage)]
            data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self._send(200, "text/event-stream", data)
        else:
            message = {k: v for k, v in delta.items() if k != "tool_calls"}
            if "tool_calls" in delta:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"} for c in delta["tool_calls"]]
            self._send(200, "application/json", json.dumps(dict(head, object="chat.completion", usage=usage,
                                                                choices=[{"index": 0, "message": message,
                                                                          "finish_reason": finish}])))

    def _send(self, status: int, ctype: str, text: str) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# --------------------------------------------------------------------------- inside verifiers' venv


def _use_this_python() -> None:
    """verifiers prepares the harness's PEP 723 chat program with ``uv sync`` (a download); this venv has the
    program's packages, so it runs under this interpreter, from the rollout runtime's folder."""
    import hashlib

    from verifiers.v1.runtimes.base import Runtime

    async def prepare_uv_script(self, script, env=None, *, activate=True):
        data = script.encode() if isinstance(script, str) else script
        name = f"vf-program-{hashlib.sha256(data).hexdigest()[:16]}.py"
        await self.write(name, data)
        return [sys.executable, str(Path(self.info.id) / name)]

    Runtime.prepare_uv_script = prepare_uv_script


def inside(folder: str, spec_path: str) -> dict:
    """Gold and do-nothing rollouts of the picked tasks through verifiers' env, harness and tool server."""
    from importlib.metadata import version

    import verifiers.v1 as vf
    from verifiers.v1.clients import EvalClientConfig

    spec = json.loads(Path(spec_path).read_text())
    _use_this_python()
    cfg = vf.resolve_env_config({"taskset": {"id": TASKSET_ID},
                                 "agent": {"harness": {"id": "null"}, "runtime": {"type": "subprocess"}}})
    env = vf.load_environment(cfg)
    tasks = {t.data.task_id: t for t in env.taskset}
    expected_tools = {r["task_id"]: sorted(r["tools"]) for r in json.loads((Path(folder) / PACKAGE / "tasks.json")
                                                                           .read_text())}
    model = ScriptedModel()
    threading.Thread(target=model.serve_forever, daemon=True).start()
    ctx = vf.ModelContext(model="autoforge-oracle",
                          client=EvalClientConfig(base_url=model.base_url, api_key_var="AUTOFORGE_SCRIPTED_KEY"))
    gate = asyncio.Semaphore(CONCURRENCY)
    bad: list = []

    async def play(task_id: str, script: list[dict]) -> tuple[float, int]:
        bound: list[str] = []

        def minted(trace) -> None:
            model.scripts[trace.id] = script
            bound.append(trace.id)

        async with gate:
            episode = await env.run_episode(tasks[task_id], ctx, on_trace=minted)
        trace = episode.traces[0]
        info = trace.info.get("autoforge") or {}
        calls = sum(1 for s in script if "call" in s)
        if not (episode.ok and trace.ok) or trace.errors:
            bad.append((task_id, "trace", [e.message[:300] for e in trace.errors + episode.errors]))
        if len(trace.tool_messages) != calls or info.get("calls", 0) + info.get("messages_to_user", 0) != calls:
            bad.append((task_id, "tool results", len(trace.tool_messages), calls, info))
        if not info.get("replay_matches", False) or not info.get("scored", False):
            bad.append((task_id, "replay", info))
        if model.offered.get(bound[0]) != expected_tools[task_id]:
            bad.append((task_id, "tools offered", model.offered.get(bound[0])))
        return float(trace.reward), trace.num_turns

    async def main() -> dict:
        async with env.serving():
            plans = []
            for t in spec["picked"]:
                gold = spec["scripts"][t]
                plans.append((t, [{"call": a} for a in gold["actions"]] + [{"say": gold["final"]}]))
                plans.append((t, [{"say": DONE}]))
            results = await asyncio.gather(*(play(t, s) for t, s in plans))
        gold = [(t, r) for (t, _), (r, _) in zip(plans[0::2], results[0::2])]
        noop = [(t, r) for (t, _), (r, _) in zip(plans[1::2], results[1::2])]
        return {"gold": gold, "noop": noop, "turns": sum(n for _, n in results)}

    res = asyncio.run(main())
    model.shutdown()
    import autoforge

    if Path(folder).resolve() / PACKAGE / "_vendor" not in Path(autoforge.__file__).resolve().parents:
        bad.append(("autoforge imported from", autoforge.__file__))
    heavy = sorted(m for m in ("duckdb", "sqlalchemy", "prefect", "torch", "autoforge.warehouse",
                               "autoforge.pipeline", "autoforge.rl") if m in sys.modules)
    bad += [("imported", m) for m in heavy]
    return {"version": version("verifiers"), **res, "requests": model.requests, "bad": bad}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the verifiers check's side in verifiers' venv")
    ap.add_argument("--inside", required=True, metavar="DIR", help="the exported package's folder (on PYTHONPATH)")
    ap.add_argument("--spec", required=True, metavar="JSON", help="{scripts, picked}")
    args = ap.parse_args(argv)
    print(json.dumps({"verifiers_check": inside(args.inside, args.spec)}))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
