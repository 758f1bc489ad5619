"""Every record that crosses a stage boundary.

Each model maps one-to-one to a warehouse table (see ``sql/``): field names are column
names, dict/list fields are stored as JSON. Models reject unknown fields. Ids are content
hashes (:func:`content_id`), so writing the same record twice upserts instead of
duplicating.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from datetime import datetime, timezone
from typing import Annotated, Any, ClassVar, Literal

import orjson
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_serializer


# --------------------------------------------------------------------------- helpers


def canonical_json(obj: Any) -> str:
    """Canonical JSON: sorted keys, no whitespace, UTF-8. The basis of every hash."""
    return _canon(obj)


def same_json(a: Any, b: Any) -> bool:
    """``canonical_json(a) == canonical_json(b)`` for JSON values, ~5x faster where they are equal: equal values of
    the same JSON types (``1``, ``1.0`` and ``True`` are equal in Python, not in JSON; so are ``0.0`` and ``-0.0``).

    Values Python calls equal are told apart by orjson's bytes (sorted keys), in C: its encoding of finite JSON
    values is one-to-one and spells ``1``, ``1.0``, ``true`` and ``-0.0`` apart (the state diffs compare every
    record of a state around each gold call, nearly all of them equal). Anything else, and what orjson cannot
    encode (an integer beyond 64 bits, a key that is not a string), goes through :func:`_same_json_walk`."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    try:
        if a == b:
            return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(b, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError
        pass
    return _same_json_walk(a, b)


def _same_json_walk(a: Any, b: Any) -> bool:
    """:func:`same_json` value by value: for the values Python calls unequal (the first difference ends it) and
    those orjson cannot encode."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        if len(a) != len(b):
            return False
        for k, v in a.items():
            if k not in b or not _same_json_walk(v, b[k]):
                return False
        return True
    if t is list:
        return len(a) == len(b) and all(_same_json_walk(x, y) for x, y in zip(a, b))
    if t is float:
        return a == b and repr(a) == repr(b)
    if t in (str, int, bool) or a is None:
        return a == b
    return canonical_json(a) == canonical_json(b)  # a tuple, a datetime: as the hashes see it


def _canonical_json_py(obj: Any) -> str:
    """:func:`canonical_json` through ``json.dumps`` (which builds an encoder per call: ~10x slower)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(obj: Any, n: int = 16) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()[:n]


def content_id(prefix: str, *parts: Any) -> str:
    """A stable id from content: ``content_id("tool", toolset, name, schema)`` -> ``tool_3f2a...``."""
    return f"{prefix}_{content_hash(list(parts))}"


try:  # canonical_json's bytes from one C encoder made once (json.dumps builds one per call)
    from json.encoder import c_make_encoder as _c_make_encoder
    from json.encoder import encode_basestring as _quote

    _ENCODE = _c_make_encoder(None, str, _quote, None, ":", ",", True, False, True)

    def _canon(obj: Any) -> str:
        return "".join(_ENCODE(obj, 0))
except (ImportError, TypeError):  # pragma: no cover - no C accelerator
    _canon, _quote = _canonical_json_py, json.encoder.py_encode_basestring

_HASH_MOD = 1 << 512
STATE_HASH_PREFIX = "h2:"  # version 2; a legacy (version 1) hash is 64 hex digits with no prefix


def _digest_text(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=64).digest(), "big")


def state_hash(state: dict) -> str:
    """Hash of an environment state, version 2 (``h2:`` + 64 hex digits). Reward and verification compare these.

    The sum modulo 2**512 of one 512-bit blake2b digest per piece, each taken over canonical JSON
    (:func:`canonical_json`): a dict-valued entry ``name`` gives ``["d", {name: null}]`` and one
    ``["r", {name: {key: record}}]`` per record; any other entry ``["v", {name: value}]``; the hash
    is ``h2:`` + sha256 of that sum (64 bytes, big-endian). Equal states give equal hashes (the sum
    does not depend on order), and the sandbox worker keeps the same sum up to date record by
    record as calls change the state (:mod:`autoforge.envs._worker`), so an episode's hash costs
    what the episode changed, not the size of the state. Hashes stored before version 2 are
    compared with :func:`legacy_state_hash` (:func:`state_hash_like`)."""
    total = 0
    for name, value in state.items():
        if isinstance(value, dict):
            total += _digest_text(_canon(["d", {name: None}]))
            head = '["r",{' + _quote(name) + ":{" if type(name) is str else None
            for key, record in value.items():  # canonical_json(["r", {name: {key: record}}]), built up
                text = (head + _quote(key) + ":" + _canon(record) + "}}]" if head and type(key) is str
                        else _canon(["r", {name: {key: record}}]))
                total += _digest_text(text)
        else:
            total += _digest_text(_canon(["v", {name: value}]))
    return STATE_HASH_PREFIX + hashlib.sha256((total % _HASH_MOD).to_bytes(64, "big")).hexdigest()


def legacy_state_hash(state: dict) -> str:
    """Version 1 of :func:`state_hash`: sha256 of the canonical JSON of the whole state (64 hex
    digits). Tasks stored before version 2 carry it as ``gold_state_hash``."""
    return hashlib.sha256(canonical_json(state).encode()).hexdigest()


def state_hash_like(state: dict, reference: str | None) -> str:
    """``state``'s hash in the version of ``reference`` (a stored hash): legacy when ``reference``
    is a version-1 hash, else version 2. Comparing a state with a stored S* goes through this, so
    warehouses written before version 2 keep verifying and scoring."""
    if reference and not reference.startswith(STATE_HASH_PREFIX):
        return legacy_state_hash(state)
    return state_hash(state)


def registered(module: str, registry: str, what: str) -> AfterValidator:
    """A ``str`` field's check against an explicit registry (a dict keyed by name): an unknown name is
    refused with the valid ones. The registry's module is imported on first use (it imports the
    stage code that imports this module); the warehouse stores the name as a plain string."""
    names: list[dict] = []

    def check(value: str) -> str:
        if not names:
            names.append(getattr(importlib.import_module(module), registry))
        if value not in names[0]:
            raise ValueError(f"unknown {what} {value!r}; valid: {', '.join(names[0])} ({module}.{registry})")
        return value

    return AfterValidator(check)


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Record(BaseModel):
    """Base of every warehouse record: unknown fields are an error, not silently dropped."""

    model_config = ConfigDict(extra="forbid")


Effect = Literal["read", "write", "unknown"]


# --------------------------------------------------------------------------- runs


class Run(Record):
    """One execution of a stage (or of the whole factory). Every other row points to one."""

    run_id: str
    stage: str  # ingest | synthesize | sample | generate | verify | factory | train | eval
    batch_id: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    status: Literal["running", "completed", "failed"] = "running"
    counts: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None

    @classmethod
    def make(cls, stage: str, params: dict[str, Any] | None = None, batch_id: str | None = None) -> "Run":
        """A run whose id is a hash of (stage, batch, params): re-running the same batch reuses the row."""
        params = params or {}
        return cls(run_id=content_id("run", stage, batch_id, params), stage=stage, batch_id=batch_id, params=params)

    def finish(self, status: str = "completed", **counts: Any) -> "Run":
        return self.model_copy(update={"status": status, "counts": {**self.counts, **counts}, "finished_at": utcnow()})


# --------------------------------------------------------------------------- stage 1: ingest


DocFormat = Annotated[str, registered("autoforge.tooldocs.formats", "DOC_FORMATS", "doc format")]


class ToolDoc(Record):
    """One tool-documentation file as ingested (accepted or rejected, with the reason)."""

    doc_id: str  # content_id("doc", toolset, path, content)
    toolset: str
    path: str
    format: DocFormat | None = None
    content: str
    status: Literal["accepted", "rejected", "needs_llm"]
    error: str | None = None
    n_tools: int = 0
    run_id: str | None = None


class ToolSpec(Record):
    """A normalised tool: name, description, resolved JSON Schema parameters."""

    tool_id: str  # content_id("tool", toolset, name, parameters, output_schema)
    toolset: str
    name: str
    description: str = ""
    parameters: dict[str, Any]  # JSON Schema, type "object", every $ref resolved
    output_schema: dict[str, Any] | None = None
    effect: Effect = "unknown"
    doc_id: str
    run_id: str | None = None


class ToolSet(Record):
    """A candidate environment: the tools of one documentation set."""

    toolset_id: str  # content_id("toolset", name, sorted tool_ids), plus the sorted policy_ids of its policy files
    name: str
    description: str = ""
    doc_ids: list[str] = Field(default_factory=list)
    tool_ids: list[str] = Field(default_factory=list)
    n_tools: int = 0
    kind: Literal["stateful", "stateless"] = "stateful"  # stateless: no tool can change state (math, web search)
    run_id: str | None = None


class PolicyDoc(Record):
    """One policy document of a tool set: a policy file beside its tool docs (``policy.md``, a file given
    with ``--policy``) or policy text inside a tool doc (OpenAPI ``info.description`` / tag descriptions,
    an MCP result's ``instructions``). Stored as read; synthesize reads its rules into ``tool_rules``."""

    policy_id: str  # content_id("policy", toolset, source, sha256)
    toolset: str  # name of the tool set it governs
    toolset_id: str | None = None  # None: its folder defines no tool
    source: str  # the file (as recorded in tool_docs.path), "<file>#<location>" for text inside a tool doc
    sha256: str  # of text
    text: str
    n_chars: int
    run_id: str | None = None
    ingested_at: datetime = Field(default_factory=utcnow)


# --------------------------------------------------------------------------- stage 2: environments


FieldType = Literal["string", "integer", "number", "boolean", "array", "object"]


class FieldSpec(Record):
    name: str
    type: FieldType = "string"
    ref: str | None = None  # name of the collection this field points to (a foreign key)
    enum: list[Any] | None = None
    description: str = ""
    format: str | None = None  # JSON Schema format hint: date, date-time, email ... (sample values, reasoning)
    items: dict[str, Any] | None = None  # type=array: JSON Schema of one element (ref: elements are ids)
    pattern: str | None = None  # JSON Schema pattern the docs give (sample values must match it)
    minimum: float | None = None  # JSON Schema minimum the docs give (sample values respect it)
    properties: dict[str, Any] | None = None  # type=object: JSON Schema properties of the nested object


class CollectionSpec(Record):
    """A collection of records keyed by id, e.g. ``orders: {"O0001": {...}}``."""

    name: str  # plural: "orders"
    entity: str  # singular: "order"
    primary_key: str  # "order_id"
    id_prefix: str  # "O" -> ids O0001, O0002 ...
    fields: list[FieldSpec]
    id_width: int = 4  # digits after the prefix (O0001: 4), from the docs' id pattern when given
    # "integer": the docs type the id as an integer (``petId: int64``): records hold ints 1, 2, 3 ...,
    # the state's keys are their strings (``state["pets"]["3"]["pet_id"] == 3``), id_prefix is ""
    id_type: Literal["string", "integer"] = "string"
    # the caller's own record, one per world: a read that takes no argument names it ("Get the manager
    # of an employee" with no employee id: the session employee's manager)
    session: bool = False

    @model_serializer(mode="wrap")
    def _drop_default_session(self, handler: Any) -> Any:
        """``session`` is written only when true: every other schema dumps, and hashes into its
        environment id, exactly as before the key existed."""
        out = handler(self)
        if isinstance(out, dict) and not out.get("session"):
            out.pop("session", None)
        return out


class StateSchema(Record):
    collections: list[CollectionSpec]


class EnvironmentRecord(Record):
    """E = (S, F): the state structure and the tool code of one tool set."""

    env_id: str  # content_id("env", toolset_id, schema, sorted tool sources)
    name: str
    toolset_id: str
    backend: str  # offline | openai:<model>
    state_schema: StateSchema
    sample_state: dict[str, Any] = Field(default_factory=dict)
    status: Literal["ready", "partial", "failed"]
    n_tools: int
    n_tools_accepted: int
    reason: str | None = None
    n_write_tools: int = 0  # accepted write tools a task may call (not a hand-off: autoforge.domain.tool_kinds)
    writes_unreachable: list[str] = Field(default_factory=list)  # write tools no read tool leads to in the tool graph
    writes_standalone: list[str] = Field(default_factory=list)  # of those, the ones needing no stored id (create, login)
    writes_by_state: list[str] = Field(default_factory=list)  # reachable writes a read leads to only by state edges (no data flow)
    run_id: str | None = None


class ToolCode(Record):
    """The Python source of one tool of an environment, and whether it passed the checks."""

    code_id: str  # content_id("code", env_id, name, source)
    env_id: str
    tool_id: str
    name: str
    source: str
    status: Literal["accepted", "rejected"]
    reason: str | None = None
    attempts: int = 1
    effect: Effect = "unknown"
    kind: str = "llm"  # offline template kind (lookup, get, list, create, update, delete, ...) or "llm"
    collection: str | None = None  # main collection it reads or writes
    parameters: dict[str, Any] = Field(default_factory=dict)  # JSON Schema validated before each call
    output_schema: dict[str, Any] | None = None  # what the code returns on success (for DAG binding)
    output_schema_source: Literal["documented", "derived"] = "documented"  # derived: the docs give no output; it comes from the state model
    run_id: str | None = None
    function_name: str | None = None  # the Python function implementing it (``orders.get`` -> orders_get); None: = name
    arg_map: dict[str, str] = Field(default_factory=dict)  # public argument name -> Python parameter, where they differ
    guards: list[dict[str, Any]] = Field(default_factory=list)  # runtime rules checked before the code runs (envs/guards.py)


class ToolRule(Record):
    """A rule a tool's prose or a policy document states (autoforge.domain.rules, autoforge.domain.policy;
    kinds: autoforge.domain.rule_kinds), how it is enforced, and its probe."""

    rule_id: str  # content_id("rule", env_id, tool, index, kind, text) / ("rule", env_id, source, offset, kind, text)
    env_id: str
    tool_id: str
    tool: str  # tool name
    kind: Annotated[str, registered("autoforge.domain.rule_kinds", "RULE_KINDS", "rule kind")]  # domain/rule_kinds.py
    text: str  # the sentence it came from
    field: str | None = None  # the record field (status, frozen_at) or the parameter it constrains
    values: list[Any] = Field(default_factory=list)  # allowed / resulting statuses, NOW, numbers of a constraint
    # code: the tool's template code; runtime: ``guard`` checked by the rule engine; judged: over the conversation
    enforcement: Literal["code", "runtime", "judged", "not enforced"] = "not enforced"
    probe: Literal["passed", "failed", "none"] = "none"  # the synthesis probe of an enforced rule
    probe_detail: str | None = None  # what the probe saw
    run_id: str | None = None
    source: str = "tool"  # "tool" (the tool's own prose) or the policy document's source
    source_offset: int | None = None  # the sentence's character offset in that document
    tools: list[str] = Field(default_factory=list)  # every tool it binds (public names)
    guard: dict[str, Any] | None = None  # the guard / judged check (autoforge.envs.guards)
    why: str | None = None  # not enforced: why


# --------------------------------------------------------------------------- stage 3: graphs and DAGs


class Binding(Record):
    output_path: str  # dotted path in the source tool's output: "user_id", "orders.*.order_id"
    param: str  # parameter of the destination tool


class GraphEdge(Record):
    src: str
    dst: str
    bindings: list[Binding]
    # data: an output of src feeds a parameter of dst; state: src (a read) shows the record or
    # fields dst (a write) changes, with no data flow (autoforge.dags.graph.state_edges)
    kind: Literal["data", "state"] = "data"


class ToolGraph(Record):
    graph_id: str  # content_id("graph", env_id, edges)
    env_id: str
    tools: list[str]
    edges: list[GraphEdge]
    method: str = "offline"  # offline name/type binding | openai:<model>
    run_id: str | None = None


class ToolSequence(Record):
    seq_id: str  # content_id("seq", env_id, tools)
    env_id: str
    tools: list[str]
    source: Literal["walk", "merge"] = "walk"
    parents: list[str] = Field(default_factory=list)  # seq_ids merged into this one
    seed: int | None = None
    requirements: list[int] = Field(default_factory=list)  # per tool: which merged requirement (0, 1) it serves
    start_rule: str | None = None  # the walk start rule sampling used (lookup | read | entry | any)
    goal: Literal["state", "answer"] = "state"  # state: ends in a write; answer: a read whose output answers the user
    run_id: str | None = None


class ArgSource(Record):
    """Where the value of one argument of a DAG node comes from."""

    kind: Literal["user", "node", "const"]
    fact: str | None = None  # kind=user: key into Task.user_facts
    node: str | None = None  # kind=node: upstream node id
    path: str | None = None  # kind=node: dotted path into that node's output
    value: Any = None  # kind=const: a literal (enum choice, constant)


class DagNode(Record):
    node_id: str  # "n0", "r1", ...
    kind: Literal["tool", "reasoning"]
    tool: str | None = None  # kind=tool
    op: str | None = None  # kind=reasoning: argmin | argmax | filter | count | sum | add_days | compare ...
    params: dict[str, Any] = Field(default_factory=dict)  # fixed operands of a reasoning op
    args: dict[str, ArgSource] = Field(default_factory=dict)
    requirement: int = 0  # which merged requirement (0, 1, ...) the node serves


class AnswerSource(Record):
    """Where an answer task's gold answer comes from: a leaf of one node's output."""

    node: str  # the node whose output holds the answer (the DAG's last read)
    path: str  # dotted path inside that output ("result", "count", "url_contents.0.content")
    field: str  # what the user asks for, in words ("result", "content")


class TaskDag(Record):
    dag_id: str  # content_id("dag", env_id, nodes)
    env_id: str
    seq_id: str | None = None
    nodes: list[DagNode]
    edges: list[tuple[str, str]]  # (parent, child): parent's output feeds child's input
    n_requirements: int = 1
    answer: AnswerSource | None = None  # answer DAGs (no write): the output the user asks for
    run_id: str | None = None


# --------------------------------------------------------------------------- stages 4-5: tasks


class ToolCall(Record):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class GoldAnswer(Record):
    """What an answer task's agent must state in its final message (rollout.reward.answer_match)."""

    value: Any  # the gold answer: a number, string, boolean or list
    kind: Literal["number", "string", "boolean", "list"]
    tolerance: float | None = None  # numbers: |stated - gold| <= tolerance * max(1, |gold|)
    field: str = "answer"  # what was asked for, in words


TaskKindName = Annotated[str, registered("autoforge.tasks.kinds", "TASK_KINDS", "task kind")]


class Task(Record):
    """D_k = (Q_k, S_k, S*_k, F): request, initial state, gold final state, tools (via env_id).

    ``kind`` "state": the reward compares the final state with S*. "answer" (a read-only DAG):
    S* == S and the agent's final message must state ``gold_answer``. "boundary": the user asks for a
    write a rule forbids; S* == S and the final message must state why (``gold_answer``)."""

    task_id: str  # content_id("task", env_id, dag shape, state change)
    env_id: str
    dag_id: str
    request: str  # the user's opening message: minimum necessary information
    user_facts: dict[str, Any]  # hidden facts the simulated user knows and reveals when asked
    initial_state: dict[str, Any]
    gold_state: dict[str, Any]
    gold_state_hash: str
    gold_calls: list[ToolCall]  # the gold DAG's tool calls with concrete arguments, in order
    n_tool_calls: int
    dag_depth: int
    n_reasoning_nodes: int
    n_requirements: int
    status: Literal["generated", "verified", "rejected"] = "generated"
    split: Literal["train", "test"] = "train"
    batch_id: str | None = None
    run_id: str | None = None
    kind: TaskKindName = "state"
    gold_answer: GoldAnswer | None = None  # kind=answer: what the final message must state
    # Set by verify (sql/081): tasks.generate.duplicate_key and blueprint_key of the task, so a later batch
    # reads two strings per verified task instead of every stored task's states and DAG.
    duplicate_key: str | None = None
    blueprint_key: str | None = None
    # Issue 33 (sql/088): the rule ids (tool_rules.rule_id) the task exercises: the runtime guards of the tools its
    # gold calls and the judged rules binding them; a boundary task's first id is the rule its request runs into.
    rules: list[str] = Field(default_factory=list)


class VerificationResult(Record):
    task_id: str
    check: Annotated[str, registered("autoforge.tasks.checks", "CHECKS", "verification check")]  # tasks/checks.py
    passed: bool
    reason: str | None = None
    run_id: str | None = None


class Rejection(Record):
    """Anything a stage dropped, with why: feeds ``v_stage_funnel``."""

    rejection_id: str  # content_id("rej", stage, item_id, reason)
    stage: str
    item_id: str
    reason: str  # short category, e.g. "cyclic_dag", "no_write_tool"
    detail: str | None = None
    run_id: str | None = None


class WorldCheck(Record):
    """One world-check finding (autoforge/domain/world_checks.py): of an environment's sample state
    after synthesis (``task_id`` None), or of a task that verification rejected for it."""

    check_id: str  # content_id("wcheck", env_id, task_id, kind, path, message)
    env_id: str
    task_id: str | None = None
    kind: Annotated[str, registered("autoforge.domain.world_checks", "FINDING_KINDS", "world-check kind")]
    path: str  # collection.record.field, or "call N (tool).argument" / "call N (tool): collection.record.field"
    value: str  # the value found there as JSON text, cut to VALUE_CHARS characters
    message: str
    rejects: bool = True  # the kind rejects a task (FINDING_KINDS); False: stored and shown only
    run_id: str | None = None
    checked_at: datetime = Field(default_factory=utcnow)

    VALUE_CHARS: ClassVar[int] = 500

    @classmethod
    def of(cls, env_id: str, task_id: str | None, finding: Any, run_id: str | None = None) -> "WorldCheck":
        """The row of a :class:`autoforge.domain.world_checks.Finding`."""
        return cls(check_id=content_id("wcheck", env_id, task_id, finding.kind, finding.path, finding.message),
                   env_id=env_id, task_id=task_id, kind=finding.kind, path=finding.path,
                   value=canonical_json(finding.value)[:cls.VALUE_CHARS], message=finding.message,
                   rejects=finding.rejects, run_id=run_id)


# --------------------------------------------------------------------------- stage 6: rollouts


class Message(Record):
    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None  # tool name for role=tool


class Episode(Record):
    episode_id: str
    task_id: str
    env_id: str
    agent: str
    user_sim: str
    trial: int = 0
    messages: list[Message]
    reward: float | None = None  # None: could not score (not 0)
    reward_info: dict[str, Any] = Field(default_factory=dict)
    final_state_hash: str | None = None
    termination: str  # user_stop | max_turns | max_tokens | env_error | agent_error | ...
    n_turns: int = 0
    user_error: bool | None = None  # ground truth where an error was injected
    user_error_kind: str | None = None
    judge_flag: bool | None = None  # the user-error judge's verdict
    eval_id: str | None = None
    run_id: str | None = None
    termination_detail: str | None = None  # why it ended: error message, give-up reason, limit hit
    diagnostics: dict[str, Any] = Field(default_factory=dict)  # injection plan, judge reason, tokens, wall time
    # Issue 33 (sql/088): rule ids the episode broke: calls the rule engine refused, judged conversation rules
    # (autoforge.rollout.rule_judge); a rule-breaking episode scores 0 unless AUTOFORGE_ZERO_ON_RULE_BREAK is off
    rule_breaks: list[str] = Field(default_factory=list)


class EvalResult(Record):
    result_id: str  # content_id("res", eval_id, env_id, k)
    eval_id: str
    agent: str
    user_sim: str
    env_id: str | None  # None: the overall row
    k: int
    pass_hat_k: float
    ci_low: float | None = None
    ci_high: float | None = None
    n_tasks: int
    run_id: str | None = None


# --------------------------------------------------------------------------- stage 7: training


class TrainingRun(Record):
    train_run_id: str
    config: dict[str, Any]
    status: Literal["running", "completed", "failed"] = "running"
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    run_id: str | None = None


class TrainingStep(Record):
    train_run_id: str
    step: int
    phase: Literal["sft", "erpo"] = "erpo"
    metrics: dict[str, Any]


class TaskPassRate(Record):
    """One task's pass rate under a training run's policy at one point (sql/090; issue 34): the
    estimate on a train task before ERPO (``source`` "estimate": k rollouts as ERPO plays them, its
    temperature and injected user errors) or a held-out evaluation (``source`` "eval")."""

    train_run_id: str
    point: Literal["start", "sft", "end"]  # the policy's weights: before training, after SFT (= before ERPO), after ERPO
    source: Literal["estimate", "eval"]
    checkpoint: str | None = None  # the checkpoint those weights were loaded from / saved as ("sft-000258"), when one
    task_id: str
    env_id: str
    k: int  # rollouts asked for
    n_episodes: int  # rollouts played (an episode that crashed before the agent's first turn is not counted)
    n_pass: int  # reward == 1.0
    n_invalid: int  # judge-flagged or unscored (estimate); unscored (eval)
    pass_rate: float  # n_pass / n_episodes (0.0 when none was played)
    learnable: bool  # 0 < pass_rate < 1: a group of its rollouts can have mixed rewards
    kept: bool = False  # estimate: ERPO trains on it (TrainConfig.learnable_filter; all tasks on a fallback)
    tools: list[str] = Field(default_factory=list)  # the task's gold tool names (gold calls and DAG tool nodes)
    created_at: datetime = Field(default_factory=utcnow)
    run_id: str | None = None


# --------------------------------------------------------------------------- LLM calls


class LLMCall(Record):
    call_id: str
    backend: str
    model: str
    step: str  # which pipeline step asked (state_schema, tool_code, edges, user_sim, judge, ...)
    prompt_hash: str
    prompt: Any
    response: Any = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    latency_ms: float | None = None
    outcome: Literal["ok", "cached", "invalid", "error"]
    error: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    run_id: str | None = None
