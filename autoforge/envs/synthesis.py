"""Environment synthesis: a tool set's docs -> E = (S, F), checked tool by tool.

Paper (arXiv 2512.22857, Sec. 3.1): first the state structure S is generated from the docs,
then Python code for every tool; code is validated and, with an LLM, repaired a bounded
number of times. Two backends, one set of checks (:mod:`autoforge.envs.checks`):

* **offline** (default): :func:`~autoforge.domain.state.offline_state_schema` and
  the templates of :mod:`autoforge.envs.code`;
* **LLM** (``client.is_offline`` false): the ``state_schema`` and ``tool_code`` prompts of
  :mod:`autoforge.envs.prompts`, answered as pydantic models; a rejected tool goes back with
  its failure (``tool_repair``) at most ``settings.llm_max_repairs`` times. Every failed
  attempt is stored as a :class:`Rejection` with its reason.

Either way the sample state comes from :func:`autoforge.envs.sample.sample_state` (ids,
names, emails, dates, amounts, statuses, consistent references) and every tool is smoke-called
on it in the sandbox. Library code only: the flow and the CLI persist the results.

A bad tool never crashes the stage, whatever the checks underneath raise or return:

* anything raised while one tool is checked (``RecursionError`` from 500-deep code,
  ``MemoryError``, ``OverflowError``, ``ValueError`` from a non-JSON output, a ``jsonschema`` /
  ``referencing`` error from a dangling ``$ref``, ``SandboxError``, ...) is that tool's failed
  check (:func:`autoforge.envs.smoke.raised_check`: a reason such as ``too_deep``, ``invalid_output_schema``,
  ``check_error``, and a hint), stored as a :class:`Rejection` and, on the LLM path, sent back
  for repair like any other failure;
* anything raised while a rule is probed marks that tool's enforced rules ``probe: failed``;
* anything else raised for one environment (a schema the sampler cannot fill, a bug) is that
  environment's failure (:func:`failed_environment`: status ``failed``, a ``environment_error``
  rejection with the exception and where it was raised, :attr:`SynthesisResult.error`).
  ``KeyboardInterrupt`` and ``SystemExit`` are not caught.

:attr:`SynthesisResult.problem` says when a result tells more about the run than about the code
(the synthesis raised, or every tool was rejected for a sandbox reason, :data:`SYSTEMIC_REASONS`);
the pipeline (:mod:`autoforge.pipeline.synthesize`) fails the run for it and never lets such a
result replace better stored rows.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from autoforge.domain.canonical import canonical_specs
from autoforge.domain.entities import plan_tools
from autoforge.domain.state import offline_state_schema
from autoforge.domain.tool_kinds import special_kind, tool_kind
from autoforge.domain.tools import analyze_tool
from autoforge.domain.policy import prose_policy_rules
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.envs import policy_guards, prompts, pynames
from autoforge.envs.checks import CheckResult, check_tool
from autoforge.envs.code.compute import compute_draft
from autoforge.envs.code.offline import offline_tool_code
from autoforge.envs.rule_engine import Probes, public_names, rule_counts, tool_rules
from autoforge.envs.sample import sample_arguments, sample_state
from autoforge.envs.smoke import describe, guarded_check, smoke_arguments
from autoforge.errors import ConfigError, LLMError
from autoforge.llm.messages import json_depth
from autoforge.tooldocs.schema import props
from autoforge.types import (
    CollectionSpec,
    EnvironmentRecord,
    FieldSpec,
    LLMCall,
    PolicyDoc,
    Rejection,
    StateSchema,
    ToolCode,
    ToolRule,
    ToolSet,
    ToolSpec,
    canonical_json,
    content_id,
)

STAGE = "synthesize"

# Bounds on one LLM reply for a tool: a longer source or a deeper output schema is invalid and goes
# back to the model (the client's repair), before any check has to parse or walk it.
MAX_SOURCE_CHARS = 50_000
MAX_SCHEMA_DEPTH = 32

# Rejection reasons that blame the sandbox, its limits or the checks, not the code: an environment
# whose every tool failed for one of these says the run is broken (SynthesisResult.problem).
# check_error: the checks raised something unexpected instead of giving a verdict (raised_check).
SYSTEMIC_REASONS = frozenset({"sandbox_error", "timeout", "memory_limit", "check_error"})


class ToolCodeReply(BaseModel):
    """The LLM's answer for one tool (step ``tool_code`` / ``tool_repair``)."""

    model_config = ConfigDict(extra="forbid")

    source: str = Field(max_length=MAX_SOURCE_CHARS, description="the whole Python source of the function")
    effect: Literal["read", "write"] = Field(description="write if the tool changes state")
    collection: str | None = Field(default=None, max_length=200, description="the main collection it reads or writes")
    output_schema: dict[str, Any] | None = Field(default=None, description="JSON Schema of the success output")

    @field_validator("output_schema")
    @classmethod
    def _flat_enough(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        depth = json_depth(value)
        if depth > MAX_SCHEMA_DEPTH:
            raise ValueError(f"output_schema nests {depth} levels deep, over the limit of {MAX_SCHEMA_DEPTH}; "
                             "describe the output with a flatter schema (or leave output_schema out)")
        return value


@dataclass
class SynthesisResult:
    """One environment: its record, every tool's code (accepted or rejected), every rejection."""

    environment: EnvironmentRecord
    tools: list[ToolCode]
    rejections: list[Rejection]
    llm_calls: list[LLMCall] = field(default_factory=list)
    rules: list[ToolRule] = field(default_factory=list)  # rules the tools' prose states (autoforge.domain.rules)
    error: str | None = None  # the synthesis of this environment raised: what, and where (failed_environment)

    @property
    def accepted(self) -> list[ToolCode]:
        return [t for t in self.tools if t.status == "accepted"]

    @property
    def problem(self) -> str | None:
        """Why this result says more about the run than about the code, or None: the synthesis
        raised (:attr:`error`), or every tool was rejected for a sandbox reason (:data:`SYSTEMIC_REASONS`)."""
        if self.error:
            return self.error
        reasons = sorted({(t.reason or "").split(":")[0] for t in self.tools})
        if self.tools and not self.accepted and set(reasons) <= SYSTEMIC_REASONS:
            return (f"every tool of {self.environment.name} was rejected for a sandbox reason ({', '.join(reasons)}), "
                    "so the sandbox, its limits or the checks are broken, not the code: check AUTOFORGE_TOOL_TIMEOUT "
                    "and AUTOFORGE_TOOL_MEMORY_MB, that sandbox workers can start, and the rejections' details; "
                    "then re-run")
        return None

    def records(self) -> list[Any]:
        return [self.environment, *self.tools, *self.rejections, *self.llm_calls, *self.rules]

    def summary(self) -> dict[str, Any]:
        env = self.environment
        return {
            "env": env.name, "env_id": env.env_id, "status": env.status, "backend": env.backend,
            "n_tools": env.n_tools, "n_accepted": env.n_tools_accepted,
            "acceptance": round(env.n_tools_accepted / env.n_tools, 3) if env.n_tools else 0.0,
            "rejected": {t.name: t.reason for t in self.tools if t.status == "rejected"},
            "rules": rule_counts(self.rules),
            "problem": self.problem,
            "reason": env.reason,
        }


# --------------------------------------------------------------------------- one environment


def toolset_specs(toolset: ToolSet, specs: list[ToolSpec]) -> list[ToolSpec]:
    """The specs of ``toolset``, in the tool set's order (by tool id, else by tool set name)."""
    by_id = {s.tool_id: s for s in specs}
    if toolset.tool_ids and all(t in by_id for t in toolset.tool_ids):
        return [by_id[t] for t in toolset.tool_ids]
    return [s for s in specs if s.toolset == toolset.name or s.tool_id in set(toolset.tool_ids)]


def synthesize_environment(toolset: ToolSet, specs: list[ToolSpec], *, client: Any = None,
                           run_id: str | None = None, settings: Any = None,
                           policies: list[PolicyDoc] | None = None) -> SynthesisResult:
    """Synthesize one environment. ``client`` None or offline: the offline backend. ``policies``: the
    tool set's policy documents, whose rules become guards on its tools (:mod:`autoforge.envs.policy_guards`)."""
    specs = toolset_specs(toolset, specs)
    if not specs:
        raise ConfigError(f"tool set {toolset.name!r} ({toolset.toolset_id}) has no tool specs; ingest its docs first")
    offline = client is None or getattr(client, "is_offline", True)
    backend = "offline" if offline else f"openai:{getattr(client, 'model', 'unknown')}"
    if settings is None and not offline:
        from autoforge.settings import get_settings

        settings = get_settings()
    try:
        if offline:
            return _synthesize_offline(toolset, specs, run_id, policies or [])
        return _synthesize_llm(toolset, specs, client, run_id, settings, policies or [])
    except Exception as exc:  # noqa: BLE001 - one broken environment is its failure, not the stage's
        return failed_environment(toolset, backend, exc, run_id)


def failed_environment(toolset: ToolSet, backend: str, exc: BaseException, run_id: str | None,
                       where: str = "synthesizing") -> SynthesisResult:
    """The result of an environment whose synthesis raised ``exc``: status failed, no tools, one
    ``environment_error`` rejection saying what was raised and where (the innermost frames), and
    :attr:`SynthesisResult.error`. Its id is the tool set's failed id, so it never replaces a good row."""
    what = f"{where} environment {toolset.name} ({backend}) raised {describe(exc, 1000)}"
    frames = traceback.extract_tb(exc.__traceback__)[-3:]
    at = "; ".join(f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno} in {f.name}" for f in frames)
    error = f"{what} (at {at})" if at else what
    result = _failed(toolset, backend, "environment_error",
                     error + ". A bug or an input the synthesis cannot handle: the other environments are unaffected; "
                             "report it with this message", run_id)
    result.error = error
    return result


def _failed(toolset: ToolSet, backend: str, reason: str, detail: str, run_id: str | None) -> SynthesisResult:
    """An environment that has no state schema or tools: one rejection ``reason`` with ``detail``."""
    env_id = content_id("env", toolset.toolset_id, backend, "failed")
    rej = Rejection(rejection_id=content_id("rej", STAGE, toolset.toolset_id, reason), stage=STAGE,
                    item_id=toolset.toolset_id, reason=reason, detail=detail[:4000], run_id=run_id)
    return _finish(toolset, backend, StateSchema(collections=[]), {}, env_id, [], [rej], run_id, reason=detail[:2000])


def _synthesize_offline(toolset: ToolSet, specs: list[ToolSpec], run_id: str | None,
                        policies: list[PolicyDoc]) -> SynthesisResult:
    # The rules read a canonical view (snake_case, ids as <entity>_id); agents keep the public names:
    # arg_map = public name -> canonical name -> the code's Python parameter.
    cspecs, renames = canonical_specs(specs)
    schema = offline_state_schema(toolset, cspecs)
    plans = plan_tools(cspecs)
    state = sample_state(schema)
    publics = [dict(zip(props(c.parameters), props(s.parameters))) for s, c in zip(specs, cspecs)]
    drafts = [offline_tool_code(c, plans[c.name], schema, public=pub) for c, pub in zip(cspecs, publics)]
    if toolset.kind == "stateless":  # pure computation (add, mean, square_root): code that computes
        drafts = [compute_draft(c, d, pub) or d for c, d, pub in zip(cspecs, drafts, publics)]
    # policy rules and the prose limits the templates leave out: guards the rule engine checks
    prose = {c.name: prose_policy_rules(c, plans[c.name], schema, cspecs, plans) for c in cspecs}
    bound = policy_guards.bind(policy_guards.read_rules(cspecs, plans, schema, policies, prose), cspecs, specs, schema)
    unsigned = policy_guards.guards_by_tool(bound, None)
    env_id = _env_id(toolset, schema, [d.source for d in drafts] + ([canonical_json(unsigned)] if unsigned else []))
    guards = policy_guards.guards_by_tool(bound, env_id)
    tools, rejections = [], []
    for spec, draft in zip(specs, drafts):
        py = draft.arg_map or {}
        arg_map = {p: py.get(c, c) for p, c in renames[spec.name].items() if py.get(c, c) != p}
        tool = ToolCode(code_id=content_id("code", env_id, spec.name, draft.source), env_id=env_id, tool_id=spec.tool_id,
                        name=spec.name, source=draft.source, status="accepted", effect=draft.effect, kind=draft.kind,
                        collection=draft.collection, parameters=spec.parameters, output_schema=draft.output_schema,
                        output_schema_source="documented" if spec.output_schema else "derived",
                        run_id=run_id, function_name=draft.function_name, arg_map=arg_map,
                        guards=guards.get(spec.name, []))
        res = guarded_check(f"checking tool {spec.name}",
                            lambda: smoke_until_success(tool, spec, state, schema, draft.collection, plans[spec.name].kind))
        if not res.ok:
            tool = tool.model_copy(update={"status": "rejected", "reason": res.message()[:2000]})
            rejections.append(_rejection(env_id, spec, res, 1, run_id))
        tools.append(tool)
    result = _finish(toolset, "offline", schema, state, env_id, tools, rejections, run_id)
    replaced = {c.name: {r.text for r in prose[c.name]} for c in cspecs}
    for c, d in zip(cspecs, drafts):  # a prose limit read into a guard is that rule's one row
        d.rules = [r for r in d.rules if not (r.kind in ("constraint", "unparsed") and r.text in replaced[c.name])]
    result.rules = _offline_rules(env_id, specs, drafts, tools, state, schema, plans, cspecs, run_id)
    kinds = {s.name: plans[c.name].kind for s, c in zip(specs, cspecs)}
    probed = policy_guards.probe_guards(tools, specs, policy_guards.rule_rows(env_id, bound, specs, run_id),
                                               state, schema, kinds, env_id)
    result.tools, probed = policy_guards.drop_failed(result.tools, probed)
    result.rules += probed
    return result


def _offline_rules(env_id: str, specs: list[ToolSpec], drafts: list, tools: list[ToolCode], state: dict,
                   schema: StateSchema, plans: dict, cspecs: list[ToolSpec], run_id: str | None) -> list[ToolRule]:
    """Every tool's prose rules as records; each rule the accepted code enforces is probed in the sandbox."""
    out: list[ToolRule] = []
    with Probes([t for t in tools if t.status == "accepted"], env_id) as probes:
        for spec, cspec, draft, tool in zip(specs, cspecs, drafts, tools):
            public = dict(zip(props(cspec.parameters), props(spec.parameters)))  # canonical -> public names
            rows = [public_names(r, public) for r in tool_rules(env_id, spec, draft.rules, run_id)]
            if tool.status != "accepted":
                rows = [r.model_copy(update={"enforcement": "not enforced"}) for r in rows]
            else:
                rows = probes.run(tool, spec, rows, state, schema, plans[cspec.name].kind)
            out += rows
    return out


MAX_SMOKE_RECORDS = 8  # sample records tried as the smoke call's subject before settling for an error observation


def smoke_until_success(tool: ToolCode, spec: ToolSpec, state: dict, schema: StateSchema, collection: str | None,
                        kind: str) -> CheckResult:
    """Run the checks with the first sample record as the subject; while the call passes but only
    returns an error observation (a precondition: wrong status, already assigned), try the next
    record, so the success path is exercised too. Any failed check rejects the tool at once."""
    n = min(MAX_SMOKE_RECORDS, max((len(t) for t in state.values() if isinstance(t, dict)), default=1))
    first: CheckResult | None = None
    for idx in range(max(n, 1)):
        res = check_tool(tool, state, smoke_arguments(spec, state, schema, collection, kind, idx, tool.arg_map))
        if not res.ok:
            return res
        first = first or res
        if not (isinstance(res.output, dict) and "error" in res.output):
            return res
    return first


def _env_id(toolset: ToolSet, schema: StateSchema, sources: list[str]) -> str:
    return content_id("env", toolset.toolset_id, schema.model_dump(mode="json"), sorted(sources))


def _rejection(env_id: str, spec: ToolSpec, res: CheckResult, attempt: int, run_id: str | None) -> Rejection:
    detail = f"env {env_id} tool {spec.name} attempt {attempt}: {res.detail}"[:4000]
    return Rejection(rejection_id=content_id("rej", STAGE, env_id, spec.tool_id, attempt, res.reason),
                     stage=STAGE, item_id=spec.tool_id, reason=res.reason or "rejected", detail=detail, run_id=run_id)


def _finish(toolset: ToolSet, backend: str, schema: StateSchema, state: dict, env_id: str, tools: list[ToolCode],
            rejections: list[Rejection], run_id: str | None, reason: str | None = None) -> SynthesisResult:
    n_ok = sum(t.status == "accepted" for t in tools)
    status = "ready" if tools and n_ok == len(tools) else "partial" if n_ok else "failed"
    if reason is None and status != "ready":
        bad = [f"{t.name} ({(t.reason or '').split(':')[0]})" for t in tools if t.status == "rejected"]
        reason = f"{len(bad)} of {len(tools)} tools rejected: " + ", ".join(bad[:10]) + (" ..." if len(bad) > 10 else "")
    env = EnvironmentRecord(env_id=env_id, name=toolset.name, toolset_id=toolset.toolset_id, backend=backend,
                            state_schema=schema, sample_state=state, status=status, n_tools=len(tools),
                            n_tools_accepted=n_ok, reason=reason, run_id=run_id)
    return SynthesisResult(env, tools, rejections)


# --------------------------------------------------------------------------- LLM backend


def _synthesize_llm(toolset: ToolSet, specs: list[ToolSpec], client: Any, run_id: str | None, settings: Any,
                    policies: list[PolicyDoc]) -> SynthesisResult:
    backend = f"openai:{getattr(client, 'model', 'unknown')}"
    try:
        schema = normalize_schema(client.structured("state_schema", prompts.state_schema(toolset.name, specs), StateSchema))
    except (LLMError, ConfigError) as e:
        return _failed(toolset, backend, "state_schema_failed", f"state schema generation failed: {e}", run_id)
    state = sample_state(schema)
    schema_json = schema.model_dump(mode="json", exclude_none=True)
    max_repairs = max(0, int(settings.llm_max_repairs))
    pending: list[tuple[ToolSpec, ToolCode, list[tuple[CheckResult, int]]]] = []
    for spec in specs:
        failures: list[tuple[CheckResult, int]] = []
        tool: ToolCode | None = None
        special = special_kind(spec)
        if special and not tool_kind(special).stores:  # a scratchpad or a calculator: the template, not the LLM
            tool = _template_tool(spec, special, schema, run_id)
            res = guarded_check(f"checking tool {spec.name}", lambda: check_tool(tool, state, sample_arguments(
                spec.parameters, state, schema, None)))
            if not res.ok:
                failures.append((res, 1))
                tool = tool.model_copy(update={"status": "rejected", "reason": res.message()[:2000]})
            pending.append((spec, tool, failures))
            continue
        fname, arg_names = pynames.function_name(spec.name), pynames.argument_names(list((spec.parameters or {}).get("properties") or {}))
        names = {"function_name": fname, "arg_names": arg_names}
        messages = prompts.tool_code(spec, schema_json, sample_state=_small_state(state), contract=prompts.TOOL_CODE_CONTRACT,
                                     rules=_rule_briefs(spec, schema), **names)
        for attempt in range(1, max_repairs + 2):
            step = "tool_code" if attempt == 1 else "tool_repair"
            try:
                reply = client.structured(step, messages, ToolCodeReply)
            except Exception as e:  # noqa: BLE001 - LLMError, or whatever a client lets through: the tool's failure
                res = CheckResult(False, "llm_error", str(e) if isinstance(e, LLMError) else
                                  f"LLM step {step} for {spec.name} raised {describe(e, 1000)}")
                failures.append((res, attempt))
                tool = _llm_tool(spec, tool.source if tool else "", None, run_id, attempt).model_copy(
                    update={"status": "rejected", "reason": res.message()[:2000]})
                break
            tool = _llm_tool(spec, reply.source, reply, run_id, attempt)
            main = reply.collection if reply.collection in {c.name for c in schema.collections} else None
            res = guarded_check(f"checking tool {spec.name} (attempt {attempt})",
                                lambda: check_tool(tool, state, sample_arguments(spec.parameters, state, schema, main)))
            if res.ok:
                break
            failures.append((res, attempt))
            tool = tool.model_copy(update={"status": "rejected", "reason": res.message()[:2000]})
            messages = prompts.tool_repair(spec, schema_json, reply.source, res.message(), contract=prompts.TOOL_CODE_CONTRACT,
                                           repair=attempt, **names)
        assert tool is not None
        pending.append((spec, tool, failures))
    # the policy's rules, read by the LLM into the same records, validated and probed as the offline ones
    try:
        read = policy_guards.llm_rules(client, toolset.name, specs, schema, policies) if policies else []
    except (LLMError, ConfigError) as e:
        read = [ParsedRule("unparsed", f"(the policy documents of {toolset.name})", why=f"reading the policy failed: {e}"[:500],
                           source=policies[0].source)]
    bound = policy_guards.bind(read, specs, specs, schema)
    unsigned = policy_guards.guards_by_tool(bound, None)
    env_id = _env_id(toolset, schema, [t.source for _, t, _ in pending] + ([canonical_json(unsigned)] if unsigned else []))
    guards = policy_guards.guards_by_tool(bound, env_id)
    tools, rejections = [], []
    for spec, tool, failures in pending:
        tools.append(tool.model_copy(update={"env_id": env_id, "code_id": content_id("code", env_id, spec.name, tool.source),
                                             "guards": guards.get(spec.name, [])}))
        rejections += [_rejection(env_id, spec, res, attempt, run_id) for res, attempt in failures]
    result = _finish(toolset, backend, schema, state, env_id, tools, rejections, run_id)
    result.rules = _llm_rules(env_id, specs, tools, state, schema, run_id)
    kinds = {t.name: "create" if t.kind == "create" else "llm" for t in tools}
    probed = policy_guards.probe_guards(tools, specs, policy_guards.rule_rows(env_id, bound, specs, run_id),
                                               state, schema, kinds, env_id)
    result.tools, probed = policy_guards.drop_failed(result.tools, probed)
    result.rules += probed
    return result


def _llm_rules(env_id: str, specs: list[ToolSpec], tools: list[ToolCode], state: dict, schema: StateSchema,
               run_id: str | None) -> list[ToolRule]:
    """The same rules as offline (read from the docs, against the collection the code names), told
    to the LLM in the prompt; each recognized one is probed exactly as the offline code's are. A
    rule whose probe fails stays recorded, enforcement "code" with probe "failed": the LLM was
    asked to enforce it and did not."""
    from autoforge.domain.argument_rules import is_argument_rule
    from autoforge.domain.rule_kinds import ENFORCED_KINDS
    from autoforge.domain.rules import parse_rules

    by_name = {c.name: c for c in schema.collections}
    out: list[ToolRule] = []
    with Probes([t for t in tools if t.status == "accepted"], env_id) as probes:
        for spec, tool in zip(specs, tools):
            coll = by_name.get(tool.collection or "")
            parsed = parse_rules(spec, coll)
            for r in parsed:
                if tool.status == "accepted" and (r.kind in ENFORCED_KINDS or is_argument_rule(r)):
                    r.enforcement = "code"
            out += probes.run(tool, spec, tool_rules(env_id, spec, parsed, run_id), state, schema, "llm")
    return out


def _rule_briefs(spec: ToolSpec, schema: StateSchema) -> list[dict]:
    """The rules the docs state for one tool, as the prompt tells them (read against each collection
    the tool may touch: the LLM picks one, the parser cannot know which yet)."""
    from autoforge.domain.rules import parse_rules

    seen: dict[tuple, dict] = {}
    for coll in [None, *schema.collections]:
        for r in parse_rules(spec, coll):
            if r.kind == "unparsed":
                continue
            seen.setdefault((r.kind, r.text), {"kind": r.kind, "text": r.text, "field": r.field, "values": r.values})
    return list(seen.values())


def _template_tool(spec: ToolSpec, kind: str, schema: StateSchema, run_id: str | None) -> ToolCode:
    """The offline template's code for a tool of a kind that holds no state (a scratchpad, a
    calculator: :mod:`autoforge.domain.tool_kinds`), on the LLM backend too."""
    draft = offline_tool_code(spec, analyze_tool(spec, set()), schema)
    return ToolCode(code_id=content_id("code", "pending", spec.name, draft.source), env_id="pending", tool_id=spec.tool_id,
                    function_name=draft.function_name, arg_map=draft.arg_map or {}, name=spec.name, source=draft.source,
                    status="accepted", effect=draft.effect, kind=kind, collection=None, parameters=spec.parameters,
                    output_schema=draft.output_schema, output_schema_source="documented" if spec.output_schema else "derived",
                    run_id=run_id)


def _llm_tool(spec: ToolSpec, source: str, reply: ToolCodeReply | None, run_id: str | None, attempt: int) -> ToolCode:
    arg_names = pynames.argument_names(list((spec.parameters or {}).get("properties") or {}))
    return ToolCode(code_id=content_id("code", "pending", spec.name, source), env_id="pending", tool_id=spec.tool_id,
                    function_name=pynames.function_name(spec.name), arg_map={p: py for p, py in arg_names.items() if p != py},
                    name=spec.name, source=source or "# no source", status="accepted", attempts=attempt,
                    effect=(reply.effect if reply else spec.effect), kind=special_kind(spec) or "llm",
                    collection=reply.collection if reply else None, parameters=spec.parameters,
                    output_schema=(reply.output_schema if reply and reply.output_schema else spec.output_schema),
                    output_schema_source="documented" if spec.output_schema else "derived",
                    run_id=run_id)


def _small_state(state: dict, n: int = 2) -> dict:
    """The first ``n`` records of each collection: enough to show the shape in a prompt."""
    return {name: dict(list(table.items())[:n]) for name, table in state.items()}


def normalize_schema(schema: StateSchema) -> StateSchema:
    """Make an LLM's schema usable: unique plural names, the primary key present as a field,
    unique id prefixes, references only to collections that exist."""
    if not schema.collections:
        raise ConfigError("the state schema has no collections")
    names = [c.name for c in schema.collections]
    prefixes: set[str] = set()
    out: list[CollectionSpec] = []
    for c in schema.collections:
        if names.count(c.name) > 1 and c.name in {o.name for o in out}:
            continue
        fields = [f if (f.ref is None or f.ref in names) else f.model_copy(update={"ref": None}) for f in c.fields]
        if c.primary_key not in {f.name for f in fields}:
            fields.insert(0, FieldSpec(name=c.primary_key, type="string", description=f"primary key of {c.name}"))
        prefix = "".join(ch for ch in (c.id_prefix or c.entity[:1]).upper() if ch.isalpha()) or c.entity[:1].upper() or "X"
        while prefix in prefixes:
            prefix += (c.entity.upper() + "X")[min(len(prefix), len(c.entity))]
        prefixes.add(prefix)
        out.append(c.model_copy(update={"fields": fields, "id_prefix": prefix}))
    return StateSchema(collections=out)


# --------------------------------------------------------------------------- many environments


def select_toolsets(toolsets: list[ToolSet], env: str | None) -> list[ToolSet]:
    """All tool sets, or the one named ``env`` (raises with the valid names when unknown)."""
    if env is None:
        return list(toolsets)
    chosen = [t for t in toolsets if t.name == env or t.toolset_id == env]
    if not chosen:
        names = ", ".join(sorted({t.name for t in toolsets})) or "none (run `autoforge ingest` first)"
        raise ConfigError(f"unknown environment {env!r}; tool sets in the warehouse: {names}")
    return chosen


def synthesize_all(toolsets: list[ToolSet], specs: list[ToolSpec], *, client: Any = None, run_id: str | None = None,
                   env: str | None = None, settings: Any = None) -> list[SynthesisResult]:
    """Synthesize every tool set (or only ``env``), one after another."""
    return [synthesize_environment(ts, specs, client=client, run_id=run_id, settings=settings)
            for ts in select_toolsets(toolsets, env) if toolset_specs(ts, specs)]


def acceptance_table(results: list[SynthesisResult]) -> list[dict[str, Any]]:
    """One row per environment: tools, accepted, rejected reasons (flow artifact, CLI table)."""
    rows = []
    for r in results:
        s = r.summary()
        rows.append({"environment": s["env"], "status": s["status"], "tools": s["n_tools"], "accepted": s["n_accepted"],
                     "acceptance": f"{100 * s['acceptance']:.0f}%",
                     "rejected": "; ".join(f"{k}: {(v or '').split(':')[0]}" for k, v in s["rejected"].items()) or "-"})
    return rows


__all__ = [
    "SYSTEMIC_REASONS", "SynthesisResult", "ToolCodeReply", "acceptance_table",
    "failed_environment", "normalize_schema", "select_toolsets",
    "synthesize_all", "synthesize_environment", "toolset_specs",
]
