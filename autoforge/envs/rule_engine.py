"""The rule engine: the checks tool code runs for the rules the prose states, and their probes.

The rules are read by :mod:`autoforge.domain.rules` and :mod:`autoforge.domain.argument_rules`.
Here: :func:`argument_checks` writes the Python lines that refuse a call breaking an argument
rule; :func:`tool_rules` turns parsed rules into :class:`ToolRule` records; :func:`probe_rules`
and :func:`probe_argument_rules` check every enforced rule in the sandbox (a call that breaks it
is refused with an error observation and leaves the state unchanged, a call that keeps it
succeeds and sets the stated result), :class:`Probes` runs them on one sandboxed environment
per synthesized environment; :func:`rule_counts` sums them up.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from autoforge.domain.argument_rules import is_argument_rule
from autoforge.domain.rule_kinds import ENFORCED_KINDS, ParsedRule
from autoforge.envs.smoke import describe, smoke_arguments
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import StateSchema, ToolCode, ToolRule, ToolSpec, content_id

_EMPTY = "(None, '', [], {})"


def argument_checks(rules: list[ParsedRule], py: dict[str, str], public: dict[str, str] | None = None) -> list[str]:
    """Python lines (function-body level) that refuse a call breaking an argument rule; marks each
    rule it writes ``enforcement="code"``. ``py``: the rules' parameter names -> Python names;
    ``public``: -> the documented names the refusals say."""
    out: list[str] = []
    for r in rules:
        if not is_argument_rule(r):
            continue
        form, *rest = r.values
        names = [x for x in rest if isinstance(x, str) and x in py]
        say = {x: (public or {}).get(x, x) for x in [*names, r.field or ""]}
        if form == "range" and r.field in py:
            v, (lo, hi) = py[r.field], rest
            f = say[r.field]
            size = f"(len({v}) if isinstance({v}, list) else {v})"
            if lo is not None:
                out += [f"if {v} is not None and not isinstance({v}, bool) and {size} < {lo!r}:",
                        f"    return {{'error': {f + ' must be at least ' + str(lo) + ' (got '!r} + str({size}) + ')'}}"]
            if hi is not None:
                out += [f"if {v} is not None and not isinstance({v}, bool) and {size} > {hi!r}:",
                        f"    return {{'error': {f + ' must be at most ' + str(hi) + ' (got '!r} + str({size}) + ')'}}"]
        elif form == "one_of" and len(names) == 2:
            a, b = names
            msg = f"give {say[a]} or {say[b]}: at least one of them is required"
            out += [f"if {py[a]} in {_EMPTY} and {py[b]} in {_EMPTY}:", f"    return {{'error': {msg!r}}}"]
        elif form == "excludes" and len(names) == 2:
            a, b = names
            msg = f"{say[a]} cannot be combined with {say[b]}: give one of them"
            out += [f"if {py[a]} not in {_EMPTY} and {py[b]} not in {_EMPTY}:", f"    return {{'error': {msg!r}}}"]
        elif form == "required_when" and len(names) == 2:
            p, q, val = rest
            msg = f"{say[p]} is required when {say[q]} is {val}"
            out += [f"if str({py[q]}) == {str(val)!r} and {py[p]} in {_EMPTY}:", f"    return {{'error': {msg!r}}}"]
        elif form == "only_when" and len(names) == 2:
            p, q, val = rest
            msg = f"{say[p]} can only be used when {say[q]} is {val}"
            out += [f"if {py[p]} not in {_EMPTY} and {py[p]} is not False and str({py[q]}) != {str(val)!r}:",
                    f"    return {{'error': {msg!r}}}"]
        elif form == "starts_with" and names:
            v, prefixes = py[names[0]], tuple(rest[1])
            msg = f"{say[names[0]]} must start with " + " or ".join(prefixes)
            out += [f"if isinstance({v}, str) and not {v}.startswith({prefixes!r}):", f"    return {{'error': {msg!r}}}"]
        elif form == "format" and names:
            v = py[names[0]]
            if rest[1] == "snake_case":
                cond = f"(' ' in {v} or '-' in {v} or {v} != {v}.lower())"
                why = "snake_case (lower case words joined by _)"
            else:
                cond = f"(' ' in {v})"
                why = "without spaces"
            out += [f"if isinstance({v}, str) and {cond}:",
                    f"    return {{'error': {say[names[0]] + ' must be ' + why + ', got '!r} + repr({v})}}"]
        else:
            continue
        r.enforcement = "code"
    return out


def tool_rules(env_id: str, spec: ToolSpec, rules: list[ParsedRule], run_id: str | None = None) -> list[ToolRule]:
    """The records of one tool's rules (probe ``none`` until :func:`probe_rules` runs)."""
    out = []
    for k, r in enumerate(rules):
        out.append(ToolRule(rule_id=content_id("rule", env_id, spec.name, k, r.kind, r.text), env_id=env_id,
                            tool_id=spec.tool_id, tool=spec.name, kind=r.kind, text=r.text[:2000], field=r.field,
                            values=list(r.values), enforcement=r.enforcement, probe="none", run_id=run_id))
    return out


# --------------------------------------------------------------------------- probes


def _changed(before: dict, after: dict, coll: str) -> list[dict]:
    b, a = before.get(coll) or {}, after.get(coll) or {}
    return [rec for k, rec in a.items() if isinstance(rec, dict) and b.get(k) != rec]


def probe_rules(env: Any, tool: Any, spec: ToolSpec, rules: list[ToolRule], state: dict, schema: Any,
                collection: str | None, kind: str, args_for: Any, tries: int = 8) -> list[ToolRule]:
    """Check every enforced rule of ``tool`` in the sandbox ``env`` (an :class:`Environment` that
    holds the tool); returns the rules with ``probe`` passed / failed and ``probe_detail``.

    Break (source_status): every record of the collection in a status the rule does not allow ->
    the call returns an error observation and the state is unchanged. Keep: every record in an
    allowed status -> some sample call (``args_for(state, index)``) succeeds, and the changed
    record has the stated result status and timestamp."""
    enforced = [r for r in rules if r.enforcement == "code" and r.kind in ENFORCED_KINDS]
    if not enforced or not collection:
        return rules
    coll = next((c for c in schema.collections if c.name == collection), None)
    sf = next((f for f in coll.fields if f.name == "status"), None) if coll else None
    enum = [e for e in (sf.enum or []) if isinstance(e, str)] if sf else []
    src = next((r for r in enforced if r.kind == "source_status"), None)
    result = next((r.values[0] for r in enforced if r.kind == "result_status" and r.values), None)
    allowed = [v for v in (src.values if src else enum) if v != result] or (src.values if src else [])

    def with_status(value: Any) -> dict:
        st = copy.deepcopy(state)
        if value is not None and kind != "create":
            for rec in (st.get(collection) or {}).values():
                if isinstance(rec, dict):
                    rec["status"] = value
        return st

    def call(st: dict, idx: int):
        env.reset(st)
        obs = env.call(tool.name, args_for(st, idx))
        return obs, env.get_state()

    outcome: dict[str, tuple[str, str]] = {}
    if src is not None:
        bad = next((e for e in enum if e not in src.values and e != result), None) or next(
            (e for e in enum if e not in src.values), None) or "not_" + str(src.values[0] if src.values else "allowed")
        st = with_status(bad)
        obs, after = call(st, 0)
        if obs.ok or obs.kind != "tool_error":
            outcome["source_status"] = ("failed", f"a call on a {bad} record was not refused: {obs.to_text()[:200]}")
        elif after != st:
            outcome["source_status"] = ("failed", f"the refused call on a {bad} record changed the state")
        else:
            outcome["source_status"] = ("passed", f"refused on a {bad} record: {obs.to_text()[:160]}")
    st = with_status(allowed[0] if allowed else None)
    keep = None
    last = "no call"
    n = max(1, min(tries, len(st.get(collection) or {}) or 1))
    for idx in range(n):
        obs, after = call(st, idx)
        if obs.ok:
            keep = (obs, after)
            break
        last = obs.to_text()[:200]
    for r in enforced:
        if r.kind == "source_status":
            res, detail = outcome["source_status"]
            if res == "passed" and keep is None:
                res, detail = "failed", f"{detail}; but no call on a {allowed[0] if allowed else '?'} record succeeded: {last}"
            elif res == "passed":
                detail += f"; accepted on a {allowed[0] if allowed else '?'} record"
            outcome_r = (res, detail)
        elif keep is None:
            outcome_r = ("failed", f"no call that keeps the rule succeeded: {last}")
        else:
            changed = _changed(st, keep[1], collection)
            if r.kind == "result_status":
                ok = bool(changed) and all(c.get("status") == r.values[0] for c in changed)
                outcome_r = ("passed", f"status became {r.values[0]}") if ok else (
                    "failed", f"status after the call: {[c.get('status') for c in changed]}, stated {r.values[0]}")
            else:
                ok = bool(changed) and all(c.get(r.field) not in (None, "") for c in changed)
                outcome_r = ("passed", f"{r.field} recorded") if ok else ("failed", f"{r.field} not recorded")
        idx_r = rules.index(r)
        rules[idx_r] = r.model_copy(update={"probe": outcome_r[0], "probe_detail": outcome_r[1][:1000]})
    return rules


def _empty(v: Any) -> bool:
    return v is None or v == "" or v == [] or v == {}


def _sample(schema: dict, avoid: Any = None) -> Any:
    """A value of a parameter's type (an enum value other than ``avoid`` where there is one)."""
    s = unwrap(schema) if isinstance(schema, dict) else {}
    if s.get("enum"):
        return next((e for e in s["enum"] if e != avoid), s["enum"][0])
    t = s.get("type")
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(t if isinstance(t, str) else "", "sample")


def _keep(r: ToolRule, args: dict, params: dict) -> dict:
    """``args`` changed as little as needed to keep argument rule ``r``."""
    form, *rest = r.values
    a = dict(args)
    if form == "range" and r.field in a and isinstance(a[r.field], (int, float)) and not isinstance(a[r.field], bool):
        lo, hi = rest
        a[r.field] = max(lo, a[r.field]) if lo is not None else a[r.field]
        a[r.field] = min(hi, a[r.field]) if hi is not None else a[r.field]
    elif form == "one_of" and all(_empty(a.get(x)) for x in rest[:2]):
        a[rest[0]] = _sample(params.get(rest[0], {}))
    elif form == "excludes" and not any(_empty(a.get(x)) for x in rest[:2]):
        a.pop(rest[0], None)
    elif form == "required_when" and str(a.get(rest[1])) == str(rest[2]) and _empty(a.get(rest[0])):
        a[rest[0]] = _sample(params.get(rest[0], {}))
    elif form == "only_when" and not _empty(a.get(rest[0])) and str(a.get(rest[1])) != str(rest[2]):
        a.pop(rest[0], None)
    elif form == "format" and isinstance(a.get(rest[0]), str):
        a[rest[0]] = "_".join(a[rest[0]].lower().replace("-", " ").split()) or "key"
    elif form == "starts_with" and isinstance(a.get(rest[0]), str) and not a[rest[0]].startswith(tuple(rest[1])):
        a[rest[0]] = rest[1][-1] + a[rest[0]].split("://")[-1]
    return a


def _break(r: ToolRule, args: dict, params: dict) -> dict:
    """``args`` changed to break argument rule ``r``."""
    form, *rest = r.values
    a = dict(args)
    if form == "range":
        lo, hi = rest
        if (unwrap(params.get(r.field) or {}) or {}).get("type") == "array":
            item = (a.get(r.field) or ["x"])[0] if isinstance(a.get(r.field), list) and a.get(r.field) else "x"
            a[r.field] = [item] * (int(hi) + 1) if hi is not None else []
        else:
            a[r.field] = (lo - 1) if lo is not None else (hi + 1)
    elif form == "one_of":
        for x in rest[:2]:
            a.pop(x, None)
    elif form == "excludes":
        for x in rest[:2]:
            if _empty(a.get(x)):
                a[x] = _sample(params.get(x, {}))
    elif form == "required_when":
        a[rest[1]] = rest[2]
        a.pop(rest[0], None)
    elif form == "only_when":
        a[rest[0]] = a.get(rest[0]) if not _empty(a.get(rest[0])) else _sample(params.get(rest[0], {}))
        a[rest[1]] = _sample(params.get(rest[1], {}), avoid=rest[2])
        if str(a[rest[1]]) == str(rest[2]):
            a[rest[1]] = f"not_{rest[2]}"
    elif form == "format":
        a[rest[0]] = "Has Spaces"
    elif form == "starts_with":
        a[rest[0]] = "ftp://" + str(a.get(rest[0]) or "x").split("://")[-1]
    return a


def probe_argument_rules(env: Any, tool: Any, rules: list[ToolRule], state: dict, args_for: Any,
                         tries: int = 8) -> list[ToolRule]:
    """Probe every enforced argument rule of ``tool``: a call that keeps all of them succeeds, and
    the same call changed to break one is refused with an error observation, the state unchanged."""
    enforced = [r for r in rules if r.enforcement == "code" and is_argument_rule(r)]
    if not enforced:
        return rules
    params = props(tool.parameters)

    def call(args: dict):
        st = copy.deepcopy(state)
        env.reset(st)
        return env.call(tool.name, args), env.get_state(), st

    base, last = None, "no call"
    for idx in range(tries):
        args = args_for(state, idx)
        for r in enforced:
            args = _keep(r, args, params)
        obs, _, _ = call(args)
        if obs.ok:
            base = args
            break
        last = obs.to_text()[:200]
    for r in enforced:
        if base is None:
            res = ("failed", f"no call that keeps the rule succeeded: {last}")
        else:
            bad = _break(r, base, params)
            obs, after, before = call(bad)
            if obs.ok:
                res = ("failed", f"a call that breaks it was not refused: {json_args(bad)} -> {obs.to_text()[:160]}")
            elif after != before:
                res = ("failed", "the refused call changed the state")
            else:
                res = ("passed", f"refused {json_args(bad)}: {obs.to_text()[:160]}; kept: accepted")
        i = rules.index(r)
        rules[i] = r.model_copy(update={"probe": res[0], "probe_detail": res[1][:1000]})
    return rules


def json_args(args: dict) -> str:
    return json.dumps(args, sort_keys=True, default=str)[:200]


def rule_counts(rules: list[ToolRule]) -> dict[str, Any]:
    """found / enforced / probe_passed / probe_failed / not_enforced, and the not-enforced ones by kind."""
    by_kind: dict[str, int] = {}
    for r in rules:
        if r.enforcement != "code":
            by_kind[r.kind] = by_kind.get(r.kind, 0) + 1
    return {"found": len(rules), "enforced": sum(r.enforcement == "code" for r in rules),
            "probe_passed": sum(r.probe == "passed" for r in rules),
            "probe_failed": sum(r.probe == "failed" for r in rules),
            "not_enforced": sum(r.enforcement != "code" for r in rules), "not_enforced_by_kind": by_kind}


# --------------------------------------------------------------------------- probing one environment


class Probes:
    """The rule probes of one environment, on one sandboxed Environment of its accepted tools,
    opened at the first tool that has an enforced rule. A probe that raises (the sandbox, the
    tool's output) marks that tool's enforced rules ``probe: failed`` with what was raised, and
    the next probe gets a fresh Environment."""

    def __init__(self, accepted: list[ToolCode], env_id: str):
        self.accepted, self.env_id, self.env = accepted, env_id, None

    def run(self, tool: ToolCode, spec: ToolSpec, rows: list[ToolRule], state: dict, schema: StateSchema,
            kind: str) -> list[ToolRule]:
        if not any(r.enforcement == "code" for r in rows):
            return rows
        from autoforge.envs.runtime import Environment

        try:
            self.env = self.env or Environment(self.accepted, env_id=self.env_id)
            return probe_tool(self.env, tool, spec, rows, state, schema, kind)
        except Exception as exc:  # noqa: BLE001 - a probe that cannot run fails its rules, not the stage
            self.close()
            detail = f"the probe of {tool.name} raised {describe(exc)}"
            return [r.model_copy(update={"probe": "failed", "probe_detail": detail}) if r.enforcement == "code" else r
                    for r in rows]

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            try:
                env.close()
            except Exception:  # noqa: BLE001, S110 - a sandbox that will not close is gone already
                pass

    def __enter__(self) -> "Probes":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def probe_tool(env: Any, tool: ToolCode, spec: ToolSpec, rows: list[ToolRule], state: dict, schema: StateSchema,
           kind: str) -> list[ToolRule]:
    """Every enforced rule of one tool probed in ``env``: status and timestamp rules, then argument rules,
    with smoke-call arguments around the sample records."""
    def args_for(st: dict, idx: int) -> dict:
        return smoke_arguments(spec, st, schema, tool.collection, kind, idx, tool.arg_map)

    rows = probe_rules(env, tool, spec, rows, state, schema, tool.collection, kind, args_for)
    return probe_argument_rules(env, tool, rows, state, args_for)


def public_names(rule: ToolRule, public: dict[str, str]) -> ToolRule:
    """A rule as the user reads it: the parameters it names by their documented names."""
    values = [public.get(v, v) if isinstance(v, str) else v for v in rule.values] if rule.kind == "constraint" else rule.values
    return rule.model_copy(update={"field": public.get(rule.field, rule.field) if rule.field else None, "values": values})
