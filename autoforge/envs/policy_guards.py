"""Policy rules into an environment: guards on its tools, rule rows, and a probe of every guard.

The rules of a tool set's policy documents (:func:`autoforge.domain.policy.read_policy`) and the
limits its tools' own prose states that the templates do not write into the code
(:func:`autoforge.domain.policy.prose_policy_rules`) come as :class:`ParsedRule` records over the
canonical names (snake_case, ids as ``<entity>_id``). Here they become:

- :func:`bind`: per public tool name, its guards (the rule engine's data,
  :mod:`autoforge.envs.guards`), the canonical argument names mapped to the public ones; a rule
  whose check names an argument a tool lacks is not bound to that tool;
- :func:`rule_rows`: one :class:`~autoforge.types.ToolRule` per rule (``runtime``, ``judged`` or
  ``not enforced`` with why), ids given once the environment id is known;
- :func:`probe_guards`: every guard probed in the sandbox: a call that breaks it is refused with
  its rule id and leaves the state hash unchanged, the nearest call that keeps it succeeds.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from autoforge.domain.rule_kinds import VALID_JUDGED_OPS, ParsedRule
from autoforge.envs.guards import RECORD_OPS, probe_cases
from autoforge.envs.guards import broken as guard_broken
from autoforge.envs.smoke import describe, smoke_arguments
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import PolicyDoc, StateSchema, ToolCode, ToolRule, ToolSpec, content_id

ARG_KEYS = ("id_arg", "arg", "owner_arg", "item_arg")  # the keys of a guard that name an argument
MAX_PROBE_TRIES = 8  # sample records tried as a probe's subject


@dataclass
class Bound:
    """One rule bound to an environment's tools: the parsed rule and, per public tool, its check."""

    rule: ParsedRule
    checks: dict[str, dict] = field(default_factory=dict)  # public tool name -> guard / judged check
    why: str | None = None  # bound to no tool although it has a check: why


def read_rules(cspecs: list[ToolSpec], plans: dict, schema: StateSchema, policies: list[PolicyDoc],
               prose: dict[str, list[ParsedRule]]) -> list[ParsedRule]:
    """Every policy rule of the tool set: its documents' (in source order) and the tools' own prose ones
    (``prose``: canonical tool name -> the rules read from that tool's sentences)."""
    from autoforge.domain.policy import read_policy

    out: list[ParsedRule] = []
    for doc in sorted(policies, key=lambda d: d.source):
        out += read_policy(doc.text, doc.source, cspecs, plans, schema)
    for name in sorted(prose):
        out += prose[name]
    return out


# --------------------------------------------------------------------------- the LLM backend


class RuleReply(BaseModel):
    """One rule as the LLM backend gives it (prompt ``policy_rules``): the same fields as the offline reader's."""

    kind: str
    text: str
    tools: list[str] = Field(default_factory=list)
    enforcement: Literal["runtime", "judged", "not enforced"] = "not enforced"
    check: dict[str, Any] | None = None
    why: str | None = None


class PolicyRulesReply(BaseModel):
    rules: list[RuleReply] = Field(default_factory=list)


def llm_rules(client: Any, toolset: str, specs: list[ToolSpec], schema: StateSchema,
              policies: list[PolicyDoc]) -> list[ParsedRule]:
    """The rules of each policy document, read by the LLM into the offline reader's records (public
    names throughout). A kind the registry does not know becomes ``unparsed``; the checks are validated
    by :func:`bind` and probed like the offline ones."""
    from autoforge.domain.policy_order import drop_conflicts
    from autoforge.domain.rule_kinds import RULE_KINDS
    from autoforge.envs import prompts

    schema_json = schema.model_dump(mode="json", exclude_none=True)
    out: list[ParsedRule] = []
    for doc in sorted(policies, key=lambda d: d.source):
        reply = client.structured("policy_rules", prompts.policy_rules(toolset, specs, schema_json, doc.text),
                                  PolicyRulesReply)
        for r in reply.rules:
            kind = r.kind if r.kind in RULE_KINDS else "unparsed"
            at = doc.text.find(r.text[:80])
            out.append(ParsedRule(kind, r.text, None, [], r.enforcement if r.check is not None else "not enforced",
                                  source=doc.source, offset=at if at >= 0 else None, tools=list(r.tools),
                                  check=r.check, why=r.why or (None if r.check is not None else "the LLM gave no check")))
    drop_conflicts(out)  # procedures an episode could not all keep, as the offline reader drops them
    return out


# --------------------------------------------------------------------------- validation

_KEYS = {"status": ("collection", "id_arg"), "arg_limit": ("arg",), "arg_not": ("arg", "values"),
         "arg_in": ("arg", "values"), "arg_filled": ("args",), "arg_count": ("args", "min"), "record_limit": ("collection", "id_arg", "field", "max"), "record_min": ("collection", "id_arg", "field", "min"),
         "count_limit": ("collection", "id_arg", "counter", "max"), "window": ("collection", "id_arg", "field"),
         "owned": ("collection", "id_arg", "owner_field", "owner_arg"),
         "member": ("collection", "id_arg", "list_field", "item_arg"),
         "unchanged": ("collection", "id_arg", "field", "arg"), "covers": ("collection", "id_arg", "field", "arg")}
_FIELD_KEYS = ("field", "owner_field", "list_field")  # keys naming a field the collection must have


def check_problem(check: Any, params: list[str], schema: StateSchema, enforcement: str) -> str | None:
    """Why ``check`` is no valid guard (runtime) or judged check for a tool with ``params`` over ``schema``;
    None when it is one. The offline reader's checks and the LLM's pass the same test."""
    if not isinstance(check, dict):
        return "the check is not an object"
    op = check.get("op")
    if enforcement == "judged":
        if op == "identify_first" and check.get("arg") is not None and check["arg"] not in params:
            return f"arg {check['arg']!r} is no argument of the tool (its arguments: {', '.join(params) or 'none'})"
        return None if op in VALID_JUDGED_OPS else f"judged op {op!r} is none of {', '.join(VALID_JUDGED_OPS)}"
    if op not in _KEYS:
        return f"op {op!r} is none of {', '.join(_KEYS)}"
    missing = [k for k in _KEYS[op] if check.get(k) in (None, "", [])]
    if op == "owned" and "owner_arg" in missing and isinstance(check.get("owner_from"), dict):
        src = check["owner_from"]  # the session's own record holds the owner ("the manager of the employee")
        coll = next((c for c in schema.collections if c.name == src.get("collection")), None)
        if coll is None or not coll.session or not any(f.name == src.get("field") for f in coll.fields):
            return f"owner_from must name a field of a session collection, got {src!r}"
        missing.remove("owner_arg")
    if op == "arg_limit" and check.get("max") is None and check.get("min") is None:
        missing.append("max or min")
    if op == "status" and not (check.get("allowed") or check.get("forbidden")):
        missing.append("allowed or forbidden")
    if missing:
        return f"{op} needs {', '.join(missing)}"
    for k in ("max", "min", "days", "hours"):
        if check.get(k) is not None and (isinstance(check[k], bool) or not isinstance(check[k], (int, float))):
            return f"{k} must be a number, got {check[k]!r}"
    for k in ARG_KEYS:
        if check.get(k) is not None and check[k] not in params:
            return f"{k} {check[k]!r} is no argument of the tool (its arguments: {', '.join(params) or 'none'})"
    if op in ("arg_filled", "arg_count") and (not isinstance(check["args"], list) or not set(check["args"]) <= set(params)):
        return f"args must list arguments of the tool (its arguments: {', '.join(params) or 'none'})"
    w = check.get("when")
    if w is not None:
        if not isinstance(w, dict) or not all(w.get(k) for k in ("collection", "id_arg", "field", "values")):
            return "when needs collection, id_arg, field and values"
        if w["id_arg"] not in params:
            return f"when's id_arg {w['id_arg']!r} is no argument of the tool"
        wc = next((c for c in schema.collections if c.name == w["collection"]), None)
        if wc is None or w["field"] not in {f.name for f in wc.fields}:
            return f"when's field {w['field']!r} is not in collection {w['collection']!r}"
    if "collection" in _KEYS[op]:
        coll = next((c for c in schema.collections if c.name == check["collection"]), None)
        if coll is None:
            return f"collection {check['collection']!r} is not in the state schema"
        names = {f.name for f in coll.fields}
        for k in _FIELD_KEYS:
            if k in check and check[k] not in names and not (op == "status" and k == "field"):
                return f"{k} {check[k]!r} is no field of {coll.name}"
    return None


def bind(rules: list[ParsedRule], cspecs: list[ToolSpec], specs: list[ToolSpec],
         schema: StateSchema | None = None) -> list[Bound]:
    """Each rule's check per public tool name, its argument names the public ones; with ``schema``, a
    check that fails :func:`check_problem` for a tool is not bound to it (the rule's ``why`` says so)."""
    public_tool = {c.name: s.name for c, s in zip(cspecs, specs)}
    public_args = {c.name: dict(zip(props(c.parameters), props(s.parameters))) for c, s in zip(cspecs, specs)}
    out = []
    for r in rules:
        b = Bound(r)
        if r.check is not None and r.enforcement in ("runtime", "judged"):
            for t in r.tools:
                if t not in public_tool:
                    continue
                names = public_args[t]
                check = copy.deepcopy(r.check)
                if check.get("args") in ("required", "all"):  # arg_filled: the free-text required ones; arg_count: all
                    spec = next(c for c in cspecs if c.name == t)
                    check["args"] = free_text_required(spec) if check["args"] == "required" else list(props(spec.parameters))
                    if len(check["args"]) < max(1, int(check.get("min") or 1)):
                        continue
                    check["args"] = [names[a] for a in check["args"] if a in names]
                missing = [check[k] for k in ARG_KEYS if isinstance(check.get(k), str) and check[k] not in names]
                if r.enforcement == "runtime" and missing:
                    continue
                if schema is not None and (problem := check_problem(check, list(names), schema, r.enforcement)):
                    b.why = f"its check does not hold for {public_tool[t]}: {problem}"
                    continue
                for k in ARG_KEYS:
                    if isinstance(check.get(k), str):
                        check[k] = names[check[k]]
                if isinstance(check.get("when"), dict) and check["when"].get("id_arg") in names:
                    check["when"]["id_arg"] = names[check["when"]["id_arg"]]
                if isinstance(check.get("tools"), list):  # a judged check's tool lists
                    check["tools"] = [public_tool.get(x, x) for x in check["tools"]]
                for k in ("via", "steps"):
                    if isinstance(check.get(k), list):
                        check[k] = [public_tool.get(x, x) for x in check[k]]
                b.checks[public_tool[t]] = check
            if not b.checks and b.why is None:
                b.why = ("no tool it names has the arguments its check reads" if r.tools
                         else "it names no tool of this tool set")
        out.append(b)
    return out


def free_text_required(spec: ToolSpec) -> list[str]:
    """The required arguments of ``spec`` a caller fills with free text: strings with no enum or pattern."""
    params = props(spec.parameters)
    out = []
    for name in (spec.parameters or {}).get("required") or []:
        sch = unwrap(params.get(name)) if isinstance(params.get(name), dict) else {}
        if sch.get("type") == "string" and not ({"enum", "const", "pattern"} & set(sch)):
            out.append(name)
    return out


def guards_by_tool(bound: list[Bound], env_id: str | None) -> dict[str, list[dict]]:
    """Public tool name -> its runtime guards, each with its rule's id (none while ``env_id`` is None:
    the environment id hashes the guards without their ids)."""
    out: dict[str, list[dict]] = {}
    for k, b in enumerate(bound):
        if b.rule.enforcement != "runtime":
            continue
        for tool, check in b.checks.items():
            g = {**check, "tool": tool, "message": _message(b.rule)}
            if env_id is not None:
                g["rule_id"] = rule_id(env_id, b.rule, k)
            out.setdefault(tool, []).append(g)
    return out


def _message(r: ParsedRule) -> str:
    return " ".join(r.text.split())[:300]


def rule_id(env_id: str, r: ParsedRule, k: int) -> str:
    return content_id("rule", env_id, r.source, r.offset, k, r.kind, r.text)


def rule_rows(env_id: str, bound: list[Bound], specs: list[ToolSpec], run_id: str | None) -> list[ToolRule]:
    """One row per rule: runtime / judged where it is bound to a tool, else not enforced with why."""
    tool_id = {s.name: s.tool_id for s in specs}
    rows = []
    for k, b in enumerate(bound):
        r = b.rule
        tools = list(b.checks)
        enforced = r.enforcement in ("runtime", "judged") and bool(tools)
        first = next(iter(b.checks.values()), None)
        rows.append(ToolRule(
            rule_id=rule_id(env_id, r, k), env_id=env_id, tool_id=tool_id.get(tools[0], "") if tools else "",
            tool=tools[0] if tools else "", kind=r.kind, text=r.text[:2000], field=r.field, values=list(r.values),
            enforcement=r.enforcement if enforced else "not enforced", probe="none", run_id=run_id,
            source=r.source, source_offset=r.offset, tools=tools, guard=first if enforced else None,
            why=None if enforced else (b.why or r.why or "not read into a check")))
    return rows


# --------------------------------------------------------------------------- probes


def _enums(tool: ToolCode, schema: StateSchema) -> dict[str, list]:
    out: dict[str, list] = {}
    for c in schema.collections:
        sf = next((f for f in c.fields if f.name == "status"), None)
        if sf is not None and sf.enum:
            out[c.name] = list(sf.enum)
    for p, s in props(tool.parameters).items():
        s = unwrap(s) if isinstance(s, dict) else {}
        if isinstance(s.get("enum"), list):
            out[f"arg:{p}"] = list(s["enum"])
        if isinstance(s.get("multipleOf"), (int, float)) and s["multipleOf"] > 0:
            out[f"step:{p}"] = [s["multipleOf"]]
    return out


def probe_guard(env: Any, tool: ToolCode, spec: ToolSpec, g: dict, state: dict, schema: StateSchema,
                kind: str) -> tuple[str, str]:
    """(passed | failed, what was seen) for one guard of ``tool``."""
    guards = list(tool.guards)
    enums = _enums(tool, schema)
    coll = g.get("collection") if g.get("op") in RECORD_OPS else tool.collection
    last = "no call"
    for idx in range(MAX_PROBE_TRIES):
        args = smoke_arguments(spec, state, schema, coll or tool.collection, kind, idx, tool.arg_map)
        (keep_st, keep_args), (bad_st, bad_args) = probe_cases(guards, g, state, args, enums)
        env.reset(keep_st)
        kept = env.call(tool.name, keep_args)
        if not kept.ok:
            last = f"the call that keeps it was refused: {kept.to_text()[:200]}"
            if kept.rule_id == g["rule_id"]:
                return "failed", f"the guard refused a call that keeps it: {kept.to_text()[:200]}"
            continue
        env.reset(bad_st)
        before = env.state_hash()
        broke = env.call(tool.name, bad_args)
        # a call that breaks it may break an overlapping rule checked first ("only confirmed" before
        # "not cancelled"): refused by that rule, it still has to break this one
        overlapping = broke.rule_id not in (None, g["rule_id"]) and guard_broken(g, bad_st, bad_args)
        # the doc's own argument schema states the same limit (maxItems 5 and "at most 5 passengers"):
        # refused by the validation that runs first, still refused and still unchanged
        overlapping = overlapping or (not broke.ok and broke.rule_id is None and "invalid arguments" in broke.to_text()
                                      and guard_broken(g, bad_st, bad_args))
        if broke.ok or (broke.rule_id != g["rule_id"] and not overlapping):
            return "failed", f"a call that breaks it was not refused by the rule: {broke.to_text()[:200]}"
        if env.state_hash() != before:
            return "failed", "the refused call changed the state"
        return "passed", f"refused: {broke.to_text()[:160]}; the call that keeps it succeeded"
    return "failed", last


def probe_guards(tools: list[ToolCode], specs: list[ToolSpec], rows: list[ToolRule], state: dict,
                 schema: StateSchema, kinds: dict[str, str], env_id: str) -> list[ToolRule]:
    """Every runtime rule probed on every tool it guards (passed when all its tools' probes pass)."""
    from autoforge.envs.runtime import Environment

    accepted = [t for t in tools if t.status == "accepted"]
    by_name = {t.name: t for t in accepted}
    spec_of = {s.name: s for s in specs}
    todo = [r for r in rows if r.enforcement == "runtime"]
    if not todo or not any(t.guards for t in accepted):
        return rows
    seen: dict[str, list[tuple[str, str]]] = {}
    env = None
    try:
        for t in accepted:
            for g in t.guards:
                try:
                    env = env or Environment(accepted, env_id=env_id)
                    res = probe_guard(env, t, spec_of[t.name], g, state, schema, kinds.get(t.name, "update"))
                except Exception as exc:  # noqa: BLE001 - a probe that cannot run fails its rule, not the stage
                    if env is not None:
                        env.close()
                    env = None
                    res = ("failed", f"the probe of {t.name} raised {describe(exc)}")
                seen.setdefault(g["rule_id"], []).append((t.name, *res))
    finally:
        if env is not None:
            env.close()
    out = []
    for r in rows:
        got = seen.get(r.rule_id)
        if r.enforcement == "runtime" and got:
            # a tool whose probe failed drops the rule's guard (drop_failed); the rule holds on the others
            passed = [name for name, res, _ in got if res == "passed"]
            detail = "; ".join(f"{name}: {d}" for name, _, d in got)
            update = {"probe": "passed" if passed else "failed", "probe_detail": detail[:1000]}
            if passed and len(passed) < len(got):
                update.update(tools=passed, tool=passed[0], tool_id=next(s.tool_id for s in specs if s.name == passed[0]))
            r = r.model_copy(update=update)
        elif r.enforcement == "runtime":
            tools_left = [x for x in r.tools if x in by_name]
            r = r.model_copy(update={"probe": "failed", "probe_detail": "no accepted tool carries its guard"
                                     if not tools_left else "not probed"})
        out.append(r)
    return out


def drop_failed(tools: list[ToolCode], rows: list[ToolRule]) -> tuple[list[ToolCode], list[ToolRule]]:
    """A runtime rule whose probe failed guards nothing: its guard leaves the tools (it could refuse a
    call that keeps the rule), its row says ``not enforced`` with the probe's finding."""
    failed = {r.rule_id for r in rows if r.enforcement == "runtime" and r.probe == "failed"}
    holds = {r.rule_id: set(r.tools) for r in rows if r.enforcement == "runtime" and r.probe == "passed"}

    def keep(t: ToolCode, g: dict) -> bool:
        rid = g.get("rule_id")
        return rid not in failed and (rid not in holds or t.name in holds[rid])

    tools = [t.model_copy(update={"guards": [g for g in t.guards if keep(t, g)]})
             if not all(keep(t, g) for g in t.guards) else t for t in tools]
    if not failed:
        return tools, rows
    rows = [r.model_copy(update={"enforcement": "not enforced",
                                 "why": f"its probe failed, so it guards nothing: {r.probe_detail or ''}"[:1000]})
            if r.rule_id in failed else r for r in rows]
    return tools, rows
