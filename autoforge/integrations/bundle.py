"""The environment bundle (issue 35): tasks and their environments in one folder, played with no warehouse.

``autoforge bundle RELATION --out DIR`` (:func:`write_bundle`) writes the tasks of a tasks relation
(``v_curated_tasks``, ``tasks``, ...; ``--env`` / ``--split`` / ``--limit`` narrow it) and everything
an episode of them needs into a self-describing folder::

    DIR/manifest.json                          format + version, provenance, counts, sha256 of every file
    DIR/README.md                              what the folder holds, how to load it
    DIR/envs/<env>/environment.json            the environment record: state schema, sample state, status
    DIR/envs/<env>/tool_code.json              the accepted tool code (ToolCode rows: source, guards, schemas)
    DIR/envs/<env>/tool_specs.json             the tool specs behind it (names, descriptions from the docs)
    DIR/envs/<env>/tool_schemas.json           the tools as the agent sees them (OpenAI function schemas)
    DIR/envs/<env>/rules.json                  runtime guards, judged conversation rules, every policy rule row
    DIR/envs/<env>/tasks/<task_id>.json        one task: request, hidden user facts, initial state, gold calls,
                                               gold state and its hash, gold answer, rules exercised, its DAG

It is written beside ``DIR`` first and replaces it only when complete (``integrations/outdir.py``):
a killed run leaves no half bundle in ``DIR``, a re-run replaces the previous bundle in one rename.

The runtime core reads it with no warehouse and no Prefect: :meth:`Bundle.load` checks every
file against the manifest's sha256 (:class:`BundleError` names the file that differs), and
:class:`Episode` plays one task step by step in the sandbox the TRL factory and the episode
engine use (:class:`autoforge.envs.runtime.Environment`, its rule engine included)::

    from autoforge.integrations.bundle import Bundle

    bundle = Bundle.load("DIR")
    with bundle.episode(bundle.task_ids(split="train")[0]) as ep:
        ep.prompt().messages()                 # system text + the user's opening request; ep.prompt().tools
        ep.call("find_user", {"email": "a@b.c"})   # the observation text the agent sees
        ep.talk_to_user("Shall I go ahead?")   # the offline simulated user's reply
        ep.reward()                            # 1.0 / 0.0 as the episode engine scores it (None: unscorable)
    bundle.replay(task_id, transcript)         # a finished trajectory (verl's response text, chat messages,
                                               # calls) played again: the reward the live episode gave it

A reward is the episode engine's own (:func:`autoforge.rollout.reward.score`: the final state's
hash equals S*, and answer / boundary tasks also need the final message to state the gold answer;
then :func:`autoforge.rollout.reward.rule_break_reward` over the calls the rule engine refused
and the judged rules :mod:`autoforge.rollout.rule_judge` flags). :class:`Episode` and
:class:`LiveEpisode`, the part it shares with the TRL environment (:mod:`autoforge.integrations.trl`),
live in :mod:`autoforge.integrations.episode` (imported here too).
:meth:`Bundle.eval_inputs` gives what :func:`autoforge.rollout.batch.play_episodes` takes, so the
whole engine (any agent, k trials, the user-error judge) runs from a bundle too.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from autoforge.errors import ConfigError
from autoforge.integrations.episode import (USER_TOOL, USER_TOOL_SCHEMA, USER_TOOL_SYSTEM_PROMPT, Episode,
                                            LiveEpisode, Prompt, Transcript, parse_transcript)
from autoforge.rollout.engine import DEFAULT_SYSTEM_PROMPT
from autoforge.tasks.kinds import task_kind
from autoforge.tasks.rules import runtime_guards
from autoforge.types import EnvironmentRecord, Task, TaskDag, ToolCode, ToolRule, ToolSpec

__all__ = ["FORMAT", "FORMAT_VERSION", "USER_TOOL", "USER_TOOL_SCHEMA", "USER_TOOL_SYSTEM_PROMPT", "Bundle",
           "BundleEnv", "BundleError", "BundleManifest", "BundleResult", "Episode", "LiveEpisode", "Prompt",
           "RulesEntry", "TaskEntry", "Transcript", "parse_transcript", "write_bundle"]

FORMAT = "autoforge-bundle"  # manifest.json's "format" (integrations/outdir.py knows it as a bundle folder)
FORMAT_VERSION = 1  # a bundle of a newer version is refused by this reader; additions that old readers ignore keep it
MANIFEST = "manifest.json"


class BundleError(ConfigError):
    """A folder is not a bundle this reader can use: no manifest, a newer format, a file missing or changed."""


# --------------------------------------------------------------------------- the records


class BundleFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sha256: str = Field(description="sha256 of the file's bytes (hex)")
    bytes: int = Field(description="the file's size")


class BundleSource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    warehouse: str = Field(description="the warehouse the bundle was written from (its URL, any password hidden)")
    relation: str = Field(description="the tasks relation (table or view) the tasks came from")
    env: str | None = Field(None, description="--env: only this environment (name or id)")
    split: str | None = Field(None, description="--split: only train or test tasks")
    limit: int | None = Field(None, description="--limit: at most this many tasks (task-id order)")
    schema_version: int | None = Field(None, description="the warehouse's newest migration")
    batches: dict[str, int] = Field(default_factory=dict, description="factory batch id -> tasks of it in the bundle")


class BundleTaskInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task_id: str = Field(description="the task (its file: <folder>/tasks/<task_id>.json)")
    split: str = Field(description="train or test")
    kind: str = Field(description="state | answer | boundary (autoforge.tasks.kinds)")


class BundleEnvInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str
    name: str
    folder: str = Field(description="the environment's folder, relative to the bundle (envs/<name>)")
    n_tools: int = Field(description="accepted tools")
    tasks: list[BundleTaskInfo] = Field(description="its tasks in the bundle, in task-id order")

    @property
    def task_ids(self) -> list[str]:
        return [t.task_id for t in self.tasks]


class BundleManifest(BaseModel):
    """``manifest.json``: what the bundle is, where it came from, and the sha256 of every other file."""

    model_config = ConfigDict(extra="forbid")

    format: Literal["autoforge-bundle"] = FORMAT
    format_version: int = FORMAT_VERSION
    autoforge_version: str
    git_commit: str | None = Field(None, description="the commit of the autoforge checkout that wrote it (None: "
                                                     "not a git checkout)")
    created_at: datetime
    source: BundleSource
    counts: dict[str, Any] = Field(description="environments, tasks, tasks per split and per kind")
    environments: list[BundleEnvInfo]
    files: dict[str, BundleFile] = Field(description="every file but this one: relative path -> sha256 and size")


class RulesEntry(BaseModel):
    """``rules.json``: an environment's rules, as the engine and the agent get them (issue 33)."""

    model_config = ConfigDict(extra="forbid")

    runtime: list[dict[str, Any]] = Field(
        description="runtime guards of the accepted tools (each names its tool and rule_id): the sandbox's rule engine "
                    "refuses a call that breaks one (they also travel inside tool_code.json's guards, which is what "
                    "runs)")
    judged: list[dict[str, Any]] = Field(
        description="judged conversation rules as checks ({op: identify_first | confirm_first | transfer_when, "
                    "rule_id, message, tools, via}): the rule judge reads them over the transcript")
    policy: list[ToolRule] = Field(
        default_factory=list, description="every rule the tool prose and policy documents state (tool_rules rows, any "
                                          "enforcement), for reading")

    def agent_rules(self) -> list[dict[str, Any]]:
        """What the engine gives an episode (``AgentContext.rules``, ``run_episode(rules=...)``): guards, then
        checks."""
        return list(self.runtime) + list(self.judged)


class TaskEntry(Task):
    """``tasks/<task_id>.json``: the task's warehouse record (every :class:`autoforge.types.Task` field: ``request``
    is the user's goal as the simulated user opens with it, ``user_facts`` the facts it reveals when asked,
    ``initial_state``, ``gold_calls``, ``gold_state`` / ``gold_state_hash``, ``gold_answer``, ``rules`` the rule
    ids it exercises), plus what a reader outside AutoForge needs to use it alone."""

    env_name: str = Field(description="the environment's name (its folder under envs/)")
    states_answer: bool = Field(description="success also needs the final message to state gold_answer "
                                            "(answer and boundary tasks); otherwise the final state's hash alone")
    dag: TaskDag | None = Field(None, description="the gold DAG (what the oracle agent follows)")

    @classmethod
    def of(cls, task: Task, env_name: str, dag: TaskDag | None) -> "TaskEntry":
        return cls(**task.model_dump(), env_name=env_name, states_answer=task_kind(task.kind).states_answer, dag=dag)

    def to_task(self) -> Task:
        """The :class:`Task` record, as the warehouse holds it."""
        return Task.model_validate(self.model_dump(include=set(Task.model_fields)))


class BundleResult(BaseModel):
    """What :func:`write_bundle` wrote."""

    out: str
    environments: int
    tasks: int
    splits: dict[str, int]
    files: int
    bytes: int


EvalInputs = tuple[list[Task], dict[str, TaskDag], dict[str, list[ToolCode]], dict[str, list[ToolSpec]],
                   dict[str, list[dict]]]  # Bundle.eval_inputs: tasks, dags, tool code, specs, judged rules
_TOOLS = TypeAdapter(list[ToolCode])
_SPECS = TypeAdapter(list[ToolSpec])


# --------------------------------------------------------------------------- writing


def _dump(obj: Any) -> bytes:
    if isinstance(obj, BaseModel):
        obj = obj.model_dump(mode="json")
    elif isinstance(obj, list):
        obj = [o.model_dump(mode="json") if isinstance(o, BaseModel) else o for o in obj]
    return (json.dumps(obj, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode()


def _safe_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("._") or "env"


def git_commit() -> str | None:
    """The commit of the autoforge checkout this code runs from (None: not a git checkout of autoforge, or no git)."""
    here = Path(__file__).resolve()
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel", "HEAD"], cwd=here.parent, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.split("\n")
    if out.returncode != 0 or len(lines) < 2 or not re.fullmatch(r"[0-9a-f]{40}", lines[1].strip()):
        return None
    # an installed autoforge inside someone else's repository is not a checkout of autoforge
    top = Path(lines[0].strip())
    return lines[1].strip() if (top / "autoforge" / "integrations" / here.name).resolve() == here else None


def _readme(m: BundleManifest) -> str:
    envs = "\n".join(f"| {e.name} | `{e.folder}/` | {e.n_tools} | {len(e.task_ids)} |" for e in m.environments)
    return f"""# AutoForge environment bundle

{m.counts['tasks']} tasks of {m.counts['environments']} environments from `{m.source.relation}` \
(format `{m.format}` version {m.format_version}; provenance, counts and the sha256 of every file: `manifest.json`).

| environment | folder | tools | tasks |
|---|---|---:|---:|
{envs}

Each environment folder holds `environment.json` (state schema, sample state), `tool_code.json` (the accepted
tool code the sandbox runs, with its runtime guards), `tool_specs.json`, `tool_schemas.json` (the tools as the
agent sees them), `rules.json` (runtime guards, judged conversation rules, every policy rule) and
`tasks/<task_id>.json` (request, hidden user facts, initial state, gold calls, gold state and hash, gold answer,
rules exercised).

```python
from autoforge.integrations.bundle import Bundle

bundle = Bundle.load("THIS_FOLDER")            # checks every file's sha256
ep = bundle.episode(bundle.task_ids()[0])      # ep.prompt(), ep.call(name, args), ep.talk_to_user(msg), ep.reward()
```
"""


def write_bundle(warehouse: str | None, relation: str, out: str | Path, *, env: str | None = None,
                 split: str | None = None, limit: int | None = None) -> BundleResult:
    """Write the tasks of ``relation`` (a tasks relation: task_id, env_id, request columns) and their environments
    as a bundle at ``out`` (see the module docstring). ``env``: only this environment (name or id); ``split``:
    only train or test tasks; ``limit``: at most this many (task-id order, after the other filters). The same
    warehouse and arguments give the same files byte for byte; only ``manifest.json`` (its time) differs."""
    from autoforge.integrations.card import provenance
    from autoforge.integrations.outdir import check_out_dir, staged_dir
    from autoforge.integrations.rows import task_rows
    from autoforge.pipeline import corpus
    from autoforge.rollout.toolcalls import tool_schemas

    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be >= 1, got {limit}")
    target = check_out_dir(warehouse, out, "bundle")
    rows = task_rows(warehouse, relation, split)
    if env is not None:
        names = corpus.env_names(warehouse)
        ids = {e for e, n in names.items() if env in (e, n)}
        if not ids:
            raise ConfigError(f"--env {env!r}: no environment of that name or id; known: "
                              f"{', '.join(sorted(set(names.values()))) or 'none'}")
        rows = [r for r in rows if r.env_id in ids]
    rows = rows[:limit] if limit is not None else rows
    if not rows:
        raise ConfigError(f"no tasks to bundle: {relation!r} holds none"
                          + (f" of environment {env!r}" if env else "") + (f" in the {split} split" if split else "")
                          + "; run `autoforge factory` first, or relax --env / --split")
    tasks = corpus.tasks_by_id(warehouse, [r.task_id for r in rows])
    dags = corpus.task_dags(warehouse, {t.dag_id for t in tasks.values()})
    env_ids = sorted({r.env_id for r in rows})
    records = {e.env_id: e for e in corpus.environments(warehouse) if e.env_id in env_ids}
    code = corpus.accepted_tools_by_env(warehouse, env_ids)
    judged = corpus.judged_rules(warehouse, env_ids)
    policy = corpus.tool_rules(warehouse, env_ids)
    for e in env_ids:
        if e not in records or not code[e]:
            raise ConfigError(f"environment {e} of the selected tasks has "
                              + ("no row in the environments table" if e not in records else "no accepted tool code")
                              + "; bundle tasks of environments that synthesized")
    folders: dict[str, str] = {}
    for e in env_ids:
        name = _safe_name(records[e].name)
        folders[e] = f"envs/{name}" if f"envs/{name}" not in folders.values() else f"envs/{name}-{e}"
    prov = provenance(warehouse, relation, [r.model_dump(include={"batch_id", "run_id"}) for r in rows])
    files: dict[str, BundleFile] = {}

    with staged_dir(target) as tmp:
        def put(rel: str, data: bytes) -> None:
            path = tmp / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            files[rel] = BundleFile(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))

        infos = []
        for e in env_ids:
            folder, tools = folders[e], code[e]
            specs = corpus.env_tool_specs(warehouse, e)
            put(f"{folder}/environment.json", _dump(records[e]))
            put(f"{folder}/tool_code.json", _dump(tools))
            put(f"{folder}/tool_specs.json", _dump(specs))
            put(f"{folder}/tool_schemas.json", _dump(tool_schemas(tools, specs, style="full")))
            put(f"{folder}/rules.json", _dump(RulesEntry(runtime=runtime_guards(tools), judged=judged.get(e, []),
                                                         policy=policy.get(e, []))))
            mine = [r for r in rows if r.env_id == e]
            for r in mine:
                task = tasks[r.task_id]
                put(f"{folder}/tasks/{_task_file(task.task_id)}",
                    _dump(TaskEntry.of(task, records[e].name, dags.get(task.dag_id))))
            infos.append(BundleEnvInfo(env_id=e, name=records[e].name, folder=folder, n_tools=len(tools),
                                       tasks=[BundleTaskInfo(task_id=r.task_id, split=r.split, kind=r.kind)
                                              for r in mine]))
        kinds: dict[str, int] = {}
        for r in rows:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        splits = {s: sum(1 for r in rows if r.split == s) for s in ("train", "test")}
        manifest = BundleManifest(
            autoforge_version=prov["autoforge_version"], git_commit=git_commit(),
            created_at=datetime.now(timezone.utc).replace(microsecond=0),
            source=BundleSource(warehouse=prov["warehouse"], relation=relation, env=env, split=split, limit=limit,
                                schema_version=prov["schema_version"], batches=prov["batches"]),
            counts={"environments": len(env_ids), "tasks": len(rows), "splits": splits,
                    "kinds": dict(sorted(kinds.items()))},
            environments=infos, files={})
        put("README.md", _readme(manifest).encode())
        manifest.files = dict(sorted(files.items()))
        (tmp / MANIFEST).write_bytes(_dump(manifest))
    return BundleResult(out=str(target), environments=len(env_ids), tasks=len(rows), splits=splits,
                        files=len(files) + 1, bytes=sum(f.bytes for f in files.values()) + len(_dump(manifest)))


def _task_file(task_id: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", task_id) or task_id.startswith("."):
        raise ConfigError(f"task id {task_id!r} cannot name a file; task ids are content ids (task_<hex>)")
    return f"{task_id}.json"


# --------------------------------------------------------------------------- reading


@dataclass
class BundleEnv:
    """One environment of a bundle: its record, accepted tool code, specs, schemas and rules."""

    env_id: str
    name: str
    folder: str
    record: EnvironmentRecord
    tools: list[ToolCode]
    specs: list[ToolSpec]
    schemas: list[dict[str, Any]]
    rules: RulesEntry

    def tool_schemas(self, style: str = "full") -> list[dict[str, Any]]:
        """The tools as the agent sees them: ``full`` as written, ``compact`` / ``brief`` rebuilt from the code and
        specs (:func:`autoforge.rollout.toolcalls.tool_schemas`, as the engine does)."""
        if style == "full":
            return [json.loads(json.dumps(s)) for s in self.schemas]
        from autoforge.rollout.toolcalls import tool_schemas

        return tool_schemas(self.tools, self.specs, style=style)


class Bundle:
    """A bundle folder, read without a warehouse: :meth:`load` it, then :meth:`episode` / :meth:`task` / :meth:`env`."""

    def __init__(self, root: Path, manifest: BundleManifest):
        self.root, self.manifest = root, manifest
        self._envs: dict[str, BundleEnv] = {}
        self._by_env = {e.env_id: e for e in manifest.environments}
        self._task_env = {t.task_id: e.env_id for e in manifest.environments for t in e.tasks}

    # ------------------------------------------------------------------ loading and checking
    @classmethod
    def load(cls, path: str | Path, *, verify: bool = True) -> "Bundle":
        """The bundle at ``path``; with ``verify`` (default) every file is checked against its sha256 first."""
        root = Path(path).expanduser().resolve()
        mpath = root / MANIFEST
        if not mpath.is_file():
            raise BundleError(f"{root} is not an environment bundle (no {MANIFEST}); write one with "
                              "`autoforge bundle v_curated_tasks --out DIR`")
        try:
            raw = json.loads(mpath.read_bytes())
        except ValueError as exc:
            raise BundleError(f"{mpath} is not JSON ({exc}); write the bundle again with `autoforge bundle`") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            got = raw.get("format") if isinstance(raw, dict) else None
            raise BundleError(f"{mpath} is not an AutoForge bundle manifest (format {got!r}, expected {FORMAT!r})")
        version = raw.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise BundleError(f"{mpath}: bundle format version {version!r}; this autoforge reads version "
                              f"{FORMAT_VERSION} and older: upgrade autoforge, or write the bundle again with this one")
        try:
            manifest = BundleManifest.model_validate(raw)
        except ValidationError as exc:
            raise BundleError(f"{mpath} does not hold a valid manifest: {exc.errors()[0]['loc']}: "
                              f"{exc.errors()[0]['msg']}") from None
        bundle = cls(root, manifest)
        bundle._check_layout()
        if verify:
            bundle.verify()
        return bundle

    def _check_layout(self) -> None:
        for rel in self.manifest.files:
            p = Path(rel)
            if p.is_absolute() or ".." in p.parts or rel == MANIFEST:
                raise BundleError(f"{self.root / MANIFEST} lists {rel!r}, which is not a file inside the bundle")
        for e in self.manifest.environments:
            needed = [f"{e.folder}/{n}" for n in ("environment.json", "tool_code.json", "tool_specs.json",
                                                  "tool_schemas.json", "rules.json")]
            needed += [f"{e.folder}/tasks/{_task_file(t)}" for t in e.task_ids]
            missing = [n for n in needed if n not in self.manifest.files]
            if missing:
                raise BundleError(f"{self.root / MANIFEST} names {missing[0]} (environment {e.name}) but gives no "
                                  "sha256 for it; write the bundle again with `autoforge bundle`")

    def verify(self) -> None:
        """Every file the manifest lists is there with its sha256; BundleError naming the first that is not."""
        for rel in self.manifest.files:
            self._read(rel)

    def _read(self, rel: str) -> bytes:
        want = self.manifest.files.get(rel)
        if want is None:
            raise BundleError(f"{rel} is not a file of the bundle at {self.root}")
        path = self.root / rel
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise BundleError(f"bundle {self.root}: {rel} is missing (manifest.json lists it); the bundle is "
                              "incomplete: write it again with `autoforge bundle`") from None
        except OSError as exc:
            raise BundleError(f"bundle {self.root}: cannot read {rel} ({exc.strerror or exc})") from None
        got = hashlib.sha256(data).hexdigest()
        if got != want.sha256:
            raise BundleError(f"bundle {self.root}: {rel} does not match manifest.json (sha256 {got[:16]}..., the "
                              f"manifest says {want.sha256[:16]}...): the file changed after the bundle was written; "
                              "write the bundle again with `autoforge bundle`")
        return data

    def _json(self, rel: str) -> Any:
        try:
            return json.loads(self._read(rel))
        except ValueError as exc:
            raise BundleError(f"bundle {self.root}: {rel} is not JSON ({exc})") from None

    # ------------------------------------------------------------------ contents
    @property
    def environments(self) -> list[str]:
        """Environment ids, in the manifest's order."""
        return [e.env_id for e in self.manifest.environments]

    def env(self, env: str) -> BundleEnv:
        """The environment of this id or name."""
        info = self._by_env.get(env) or next((e for e in self.manifest.environments if e.name == env), None)
        if info is None:
            raise BundleError(f"the bundle holds no environment {env!r}; it holds "
                              f"{', '.join(e.name for e in self.manifest.environments)}")
        if info.env_id not in self._envs:
            f = info.folder
            try:
                self._envs[info.env_id] = BundleEnv(
                    env_id=info.env_id, name=info.name, folder=f,
                    record=EnvironmentRecord.model_validate(self._json(f"{f}/environment.json")),
                    tools=_TOOLS.validate_python(self._json(f"{f}/tool_code.json")),
                    specs=_SPECS.validate_python(self._json(f"{f}/tool_specs.json")),
                    schemas=list(self._json(f"{f}/tool_schemas.json")),
                    rules=RulesEntry.model_validate(self._json(f"{f}/rules.json")))
            except ValidationError as exc:
                raise BundleError(f"bundle {self.root}: {f} does not hold a valid environment: {exc}") from None
        return self._envs[info.env_id]

    def task_ids(self, *, split: str | None = None, env: str | None = None, kind: str | None = None) -> list[str]:
        """Task ids (manifest order: by environment, then task id); ``split`` / ``env`` (name or id) / ``kind``
        filter them."""
        return [t.task_id for e in self.manifest.environments if env is None or env in (e.env_id, e.name)
                for t in e.tasks if (split is None or t.split == split) and (kind is None or t.kind == kind)]

    def task(self, task_id: str) -> TaskEntry:
        """One task's record."""
        env_id = self._task_env.get(task_id)
        if env_id is None:
            raise BundleError(f"the bundle holds no task {task_id!r} ({len(self._task_env)} tasks; "
                              "Bundle.task_ids() lists them)")
        try:
            entry = TaskEntry.model_validate(self._json(f"{self._by_env[env_id].folder}/tasks/{_task_file(task_id)}"))
        except ValidationError as exc:
            raise BundleError(f"bundle {self.root}: task {task_id} is not a valid task record: {exc}") from None
        info = next(t for t in self._by_env[env_id].tasks if t.task_id == task_id)
        if entry.task_id != task_id or entry.env_id != env_id or (entry.split, entry.kind) != (info.split, info.kind):
            raise BundleError(f"bundle {self.root}: the file of task {task_id} holds task {entry.task_id} of "
                              f"{entry.env_id} ({entry.split}, {entry.kind}), not what manifest.json says")
        return entry

    def episode(self, task_id: str, **options: Any) -> Episode:
        """A live :class:`Episode` of one task (``options``: :class:`Episode`'s)."""
        return Episode(self, task_id, **options)

    def replay(self, task_id: str, transcript: Any, *, final_message: str | None = None,
               max_parallel_calls: int | None = None, tool_names: dict[str, str] | None = None,
               **options: Any) -> float | None:
        """The reward of a finished trajectory of ``task_id``, played again in a fresh episode (the reward the live
        :class:`Episode` gave it: the offline user is deterministic). ``transcript``: verl's decoded response text
        (Hermes ``<tool_call>`` blocks), OpenAI-style chat messages, or a list of calls
        (:func:`autoforge.integrations.episode.parse_transcript`); ``options``: :class:`Episode`'s (the live
        episode's: ``user_tool``, ``seed``, ...). None: it could not be scored (see :meth:`Episode.replay`)."""
        with self.episode(task_id, **options) as ep:
            return ep.replay(transcript, final_message=final_message, max_parallel_calls=max_parallel_calls,
                             tool_names=tool_names)

    def eval_inputs(self, task_ids: list[str] | None = None) -> "EvalInputs":
        """``(tasks, dags by id, tool code by env, tool specs by env, judged rules by env)``: what
        :func:`autoforge.pipeline.evaluate.load_eval_inputs` and ``judged_rules`` read from the warehouse, from
        the bundle; pass them to :func:`autoforge.rollout.batch.play_episodes` (``rules_by_env=``)."""
        entries = [self.task(t) for t in (task_ids if task_ids is not None else self.task_ids())]
        envs = [self.env(e) for e in sorted({t.env_id for t in entries})]
        return ([t.to_task() for t in entries], {t.dag.dag_id: t.dag for t in entries if t.dag is not None},
                {e.env_id: list(e.tools) for e in envs}, {e.env_id: list(e.specs) for e in envs},
                {e.env_id: list(e.rules.judged) for e in envs})

    def task_rows(self, *, split: str | None = None, env: str | None = None,
                  system_prompt: str = DEFAULT_SYSTEM_PROMPT, tool_schema: str = "full") -> list:
        """:class:`autoforge.integrations.rows.TaskRow` records of the bundle's tasks (what
        :func:`autoforge.integrations.rows.task_rows` gives from the warehouse; ``n_checks_passed`` is None)."""
        from autoforge.integrations.rows import _row

        out = []
        for t in self.task_ids(split=split, env=env):
            entry = self.task(t)
            e = self.env(entry.env_id)
            out.append(_row({"env_name": e.name}, entry.to_task(), e.name, e.tool_schemas(tool_schema), system_prompt))
        return out

    def __repr__(self) -> str:
        c = self.manifest.counts
        return f"Bundle({str(self.root)!r}, {c.get('tasks')} tasks, {c.get('environments')} environments)"
