"""What the package of ``autoforge export --format verifiers`` runs of AutoForge (issue 35): the bundle runtime
only (no warehouse, Prefect or torch), with no import of verifiers, so it is tested in AutoForge's own venv.

The package's two verifiers modules (:mod:`autoforge.integrations.verifiers_taskset`,
:mod:`autoforge.integrations.verifiers_toolset`) call it:

* the tool server of a rollout (its ``setup_task``) opens one live :class:`~autoforge.integrations.episode.Episode`
  of the task (:func:`open_episode`); each tool call, ``talk_to_user`` included, runs in it (:func:`act`), which
  returns the observation the model sees and the action to record in the rollout's shared state;
* the task's ``@vf.reward`` (in the process that scores, after the tool server is gone) plays the recorded
  actions again in a fresh episode of the same task and scores it with the final message (:func:`score`): the
  offline user is deterministic, so the replay is the live episode (each observation's sha256 is compared);
* the task's ``validate`` (``vf-validate``'s gold check) scores the gold trajectory the same way.
"""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from autoforge.integrations.bundle import USER_TOOL, Bundle, Episode

__all__ = ["TASKS_FILE", "GOLD_FILE", "act", "gold", "load_bundle", "open_episode", "score", "task_table"]

TASKS_FILE = "tasks.json"  # the package's task list: id, environment, kind, split, system text, opening
GOLD_FILE = "gold.json"  # per task, the oracle's actions and final message (vf-validate's gold check)

_LOCK = threading.Lock()
_BUNDLES: dict[str, Bundle] = {}


def load_bundle(path: str | Path) -> Bundle:
    """The bundle at ``path``, loaded (and checked against its manifest) once per process."""
    key = str(Path(path).resolve())
    with _LOCK:
        if key not in _BUNDLES:
            _BUNDLES[key] = Bundle.load(key)
        return _BUNDLES[key]


def open_episode(bundle_dir: str | Path, task_id: str) -> Episode:
    """A live episode of ``task_id``: a fresh copy of its initial state, the offline user, ``talk_to_user`` as a
    tool (the same options for the live episode and its replay)."""
    return load_bundle(bundle_dir).episode(task_id)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def act(episode: Episode, name: str, arguments: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """Run one tool call (or ``talk_to_user``) in ``episode``: ``(the observation text, the action to record)``.
    The action is JSON: ``{"name", "arguments", "observation": sha256 prefix of the text}``."""
    args = dict(arguments or {})
    text = episode.call(name, args)
    return text, {"name": name, "arguments": args, "observation": _digest(text)}


def score(bundle_dir: str | Path, task_id: str, actions: list[dict[str, Any]], final: str | None) -> dict[str, Any]:
    """The reward of a rollout of ``task_id`` as the episode engine scores it: ``actions`` (what :func:`act`
    recorded, in order) played again in a fresh episode, then ``final`` (the model's last message without a
    tool call; None: the last message it sent the user). ``{"reward": 1.0 | 0.0, "scored": False when the
    environment or the user simulator broke (reward 0.0), "replay_matches": every observation equal to the
    live one, "calls", "components"}``."""
    matches = True
    with open_episode(bundle_dir, task_id) as ep:
        for a in actions:
            args = a.get("arguments")
            text = ep.call(str(a.get("name")), args if isinstance(args, dict) else {})
            if a.get("observation") is not None and a["observation"] != _digest(text):
                matches = False
        reward = ep.reward(final)
        info = dict(ep.reward_info)
    components = {k: v for k, v in info.items() if isinstance(v, (bool, int, float, str)) or v is None}
    return {"reward": 1.0 if reward == 1.0 else 0.0, "scored": reward is not None, "replay_matches": matches,
            "calls": sum(1 for a in actions if a.get("name") != USER_TOOL),
            "messages_to_user": sum(1 for a in actions if a.get("name") == USER_TOOL), "components": components}


def task_table(bundle: Bundle) -> list[dict[str, Any]]:
    """One row per task (the bundle's order): what the taskset's ``load()`` makes each task's data from, so it
    opens no episode: ``task_id``, ``env``, ``kind``, ``split``, ``system`` (the system text), ``prompt`` (the
    simulated user's opening request), ``tools`` (the names the model is given)."""
    rows = []
    for task_id in bundle.task_ids():
        entry = bundle.task(task_id)
        with bundle.episode(task_id) as ep:
            p = ep.prompt()
        rows.append({"task_id": task_id, "env": bundle.env(entry.env_id).name, "kind": entry.kind,
                     "split": entry.split, "system": p.system, "prompt": p.user,
                     "tools": [t.get("function", t)["name"] for t in p.tools]})
    return rows


def gold(package_dir: str | Path) -> dict[str, dict[str, Any]]:
    """``gold.json`` of the package: per task ``{"actions": [[name, arguments], ...], "final": message}``."""
    return json.loads((Path(package_dir) / GOLD_FILE).read_text())
