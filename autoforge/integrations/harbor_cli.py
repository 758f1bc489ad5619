"""AutoForge tools as processes, for a terminal agent (issue 35: ``autoforge export --format harbor``).

A Harbor task runs an agent in a container with a shell; this module is how that agent calls the task's tools::

    python -m autoforge.integrations.harbor_cli prompt                  # the user's request and the tools
    python -m autoforge.integrations.harbor_cli tools                   # the tools' JSON schemas
    python -m autoforge.integrations.harbor_cli call TOOL '{"a": 1}'    # run one tool; prints its output
    python -m autoforge.integrations.harbor_cli call talk_to_user '{"message": "..."}'   # ask the user
    python -m autoforge.integrations.harbor_cli final 'MESSAGE'         # the last word to the user (the answer)
    python -m autoforge.integrations.harbor_cli reward --out FILE       # the verifier: replay, score, write 1/0

The episode state lives in a JSON file (:data:`STATE_ENV`, default :data:`DEFAULT_STATE`, in Harbor's
``/logs/artifacts`` folder, which Harbor hands a separate verifier container): the actions so far, in order.
Each ``call`` restores the episode by playing those actions again in a fresh episode of the bundle (the offline
user and the tools are deterministic, so it is the state the agent saw), runs the new action and appends it.
``reward`` replays the whole file through :meth:`autoforge.integrations.bundle.Bundle.replay`, the reward every
other adapter gives. The bundle and task come from ``--bundle`` / ``--task`` or :data:`BUNDLE_ENV` /
:data:`TASK_ENV`. Only the bundle runtime is imported (no warehouse, Prefect or torch).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

BUNDLE_ENV = "AUTOFORGE_BUNDLE"
TASK_ENV = "AUTOFORGE_TASK"
STATE_ENV = "AUTOFORGE_HARBOR_STATE"
DEFAULT_STATE = "/logs/artifacts/autoforge-episode.json"
DEFAULT_BUNDLE = "/opt/autoforge/bundle"


def _state_path(args: argparse.Namespace) -> Path:
    return Path(args.state or os.environ.get(STATE_ENV) or DEFAULT_STATE)


def _load_state(path: Path, task_id: str) -> dict[str, Any]:
    if not path.is_file():
        return {"task_id": task_id, "actions": [], "final": None}
    state = json.loads(path.read_text())
    if state.get("task_id") != task_id:
        raise SystemExit(f"{path} holds an episode of task {state.get('task_id')!r}, not {task_id!r}")
    return state


def _save_state(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, ensure_ascii=False, indent=1))
    tmp.replace(path)


def _bundle(args: argparse.Namespace):
    from autoforge.integrations.bundle import Bundle

    return Bundle.load(args.bundle or os.environ.get(BUNDLE_ENV) or DEFAULT_BUNDLE)


def _task(args: argparse.Namespace) -> str:
    task = args.task or os.environ.get(TASK_ENV)
    if not task:
        raise SystemExit(f"no task: pass --task ID or set {TASK_ENV}")
    return task


def _transcript(state: dict[str, Any]):
    from autoforge.integrations.episode import Transcript

    return Transcript(steps=[[(a["tool"], a["arguments"])] for a in state["actions"]], final=state.get("final"))


def cmd_prompt(args: argparse.Namespace) -> int:
    b, task = _bundle(args), _task(args)
    with b.episode(task) as ep:
        p = ep.prompt()
    print(p.system, "\n\nThe user says:\n", p.user, "\n\nTools:", sep="")
    for t in p.tools:
        fn = t.get("function", t)
        print(f"- {fn['name']}: {fn.get('description', '')}")
    return 0


def cmd_tools(args: argparse.Namespace) -> int:
    b, task = _bundle(args), _task(args)
    with b.episode(task) as ep:
        print(json.dumps(ep.prompt().tools, indent=1, ensure_ascii=False))
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    b, task, path = _bundle(args), _task(args), _state_path(args)
    try:
        arguments = json.loads(args.arguments) if args.arguments.strip() else {}
    except ValueError as exc:
        print(json.dumps({"error": f"the arguments must be a JSON object: {exc}"}))
        return 2
    if not isinstance(arguments, dict):
        print(json.dumps({"error": "the arguments must be a JSON object"}))
        return 2
    state = _load_state(path, task)
    with b.episode(task) as ep:
        names = {s.get("function", s).get("name") for s in ep.tools}
        if args.tool not in names:
            known = ", ".join(sorted(names))
            print(json.dumps({"error": f"{args.tool} is not a tool of this task; its tools: {known}"}))
            return 2
        for a in state["actions"]:  # restore: the same actions, in a fresh copy of the initial state
            ep.call(a["tool"], a["arguments"])
        out = ep.call(args.tool, arguments)
    state["actions"].append({"tool": args.tool, "arguments": arguments})
    _save_state(path, state)
    print(out)
    return 0


def cmd_final(args: argparse.Namespace) -> int:
    task, path = _task(args), _state_path(args)
    state = _load_state(path, task)
    state["final"] = args.message
    _save_state(path, state)
    print("recorded your final message")
    return 0


def cmd_reward(args: argparse.Namespace) -> int:
    b, task, path = _bundle(args), _task(args), _state_path(args)
    state = _load_state(path, task)
    try:
        reward = b.replay(task, _transcript(state))
    except Exception as exc:  # an environment that breaks scores 0, as in the other adapters
        print(f"the episode could not be scored: {exc}", file=sys.stderr)
        reward = None
    value = 0.0 if reward is None else float(reward)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(f"{value}\n")
    print(json.dumps({"task_id": task, "reward": value, "actions": len(state["actions"])}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m autoforge.integrations.harbor_cli",
                                 description="AutoForge tools as processes (a Harbor task's terminal agent)")
    ap.add_argument("--bundle", default=None,
                    help=f"the environment bundle (default ${BUNDLE_ENV} or {DEFAULT_BUNDLE})")
    ap.add_argument("--task", default=None, help=f"the task id (default ${TASK_ENV})")
    ap.add_argument("--state", default=None, help=f"the episode file (default ${STATE_ENV} or {DEFAULT_STATE})")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prompt", help="the system text, the user's request and the tools")
    sub.add_parser("tools", help="the tools' JSON schemas")
    s = sub.add_parser("call", help="run one tool (talk_to_user reaches the user)")
    s.add_argument("tool")
    s.add_argument("arguments", nargs="?", default="{}", help="a JSON object")
    s = sub.add_parser("final", help="your last message to the user (state the answer here)")
    s.add_argument("message")
    s = sub.add_parser("reward", help="replay the episode file and score it (1.0 or 0.0)")
    s.add_argument("--out", default=None, help="write the reward here (Harbor: /logs/verifier/reward.txt)")
    args = ap.parse_args(argv)
    return {"prompt": cmd_prompt, "tools": cmd_tools, "call": cmd_call, "final": cmd_final,
            "reward": cmd_reward}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
