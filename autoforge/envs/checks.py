"""The checks a tool's code passes before it is accepted (offline and LLM code alike).

Paper (arXiv 2512.22857, Sec. 3.1): generated tool code is validated before it joins the
environment. Ours, in order (the first failure is the reason stored with the rejection):

1. ``syntax_error``      it parses;
2. ``unsafe_code``       only allowed syntax, names, attributes and imports, and it compiles
                          (:func:`autoforge.envs.static_checks.check_source`);
3. smoke call            on the sample state, with arguments built from the tool's JSON Schema
                          (values that exist in the state preferred), in the sandbox
                          (:func:`autoforge.envs.runtime.smoke_check`): the call must succeed or
                          return a well-formed error ``{"error": "<text>"}`` —
                          ``invalid_arguments`` (the smoke arguments fail its own schema or its
                          signature), ``crashed`` (it raised or returned non-JSON), ``timeout``,
                          ``memory_limit``, ``malformed_error`` (an error observation that is not
                          ``{"error": str}``);
4. ``nondeterministic``  two identical calls on copies of the state, each in a fresh worker
                          process with its own string-hash seed, give identical output and identical
                          state (output built from memory addresses or from a set's order fails);
                          ``error_changed_state``: the tool wrote to the state and then returned an
                          error (the runtime undoes such writes, but the code should check every
                          precondition first);
5. ``output_mismatch``   a successful output fits the output schema the tool declares (keys it
                          promises are there, types agree; ``null`` is allowed for any value) —
                          later stages bind outputs to inputs by this schema, so it must be true.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from autoforge.envs import static_checks
from autoforge.envs.runtime import smoke_check, tool_function
from autoforge.envs.validation import safe_validator_class, schema_error
from autoforge.errors import AutoforgeError, UnsafeCodeError
from autoforge.patterns import PatternTimeout
from autoforge.types import ToolCode, canonical_json, state_hash

OUTPUT_CHECK_S = 2.0  # time the output-schema check may spend matching patterns


@dataclass
class CheckResult:
    ok: bool
    reason: str | None = None  # short category (stored as Rejection.reason)
    detail: str | None = None  # the full message (Rejection.detail, and what the LLM repairs from)
    arguments: dict[str, Any] = field(default_factory=dict)
    output: Any = None

    def message(self) -> str:
        return f"{self.reason}: {self.detail}" if self.reason else "ok"


def _nullable(schema: Any, depth: int = 0) -> Any:
    """A copy of ``schema`` where every typed value may also be null (records start with nulls)."""
    if not isinstance(schema, dict) or depth > 12:
        return schema
    out = {k: v for k, v in schema.items() if k not in ("x-ref",)}
    t = out.get("type")
    if isinstance(t, str) and t != "null":
        out["type"] = [t, "null"]
        if t == "number":
            out["type"] = ["number", "integer", "null"]
    elif isinstance(t, list) and "null" not in t:
        out["type"] = list(t) + ["null"]
    if "enum" in out:
        out["enum"] = list(out["enum"]) + ([None] if None not in out["enum"] else [])
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _nullable(v, depth + 1) for k, v in out["properties"].items()}
    if isinstance(out.get("items"), dict):
        out["items"] = _nullable(out["items"], depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(out.get(key), list):
            out[key] = [_nullable(v, depth + 1) for v in out[key]]
    return out


def output_fits(output: Any, schema: dict | None) -> str | None:
    """None when ``output`` fits ``schema`` (nulls allowed), else the first mismatch, or what is
    wrong with the schema (a dangling ``$ref``, a pattern that takes too long) — never an exception."""
    if not schema:
        return None
    try:
        validator = safe_validator_class(schema)(_nullable(schema))
        err = schema_error(validator, output, deadline=time.monotonic() + OUTPUT_CHECK_S)
    except (jsonschema.SchemaError, TypeError, ValueError) as e:
        return f"the declared output schema is not valid JSON Schema: {e}"
    except PatternTimeout as e:
        return f"the declared output schema could not be checked in {OUTPUT_CHECK_S:g} s: {e}"
    except RecursionError:
        return "the declared output schema is nested too deeply to check"
    if err is None:
        return None
    if isinstance(err, str):
        return f"the declared output {err}"
    where = "/".join(str(p) for p in err.absolute_path) or "<top>"
    return f"output at {where}: {err.message[:300]}"


def static_check(source: str, name: str) -> CheckResult:
    """Checks 1-2 (parse, allow-list, compile) without running anything."""
    try:
        static_checks.check_source(source, name)
    except UnsafeCodeError as e:
        reason = "syntax_error" if "syntax error" in str(e) else "unsafe_code"
        return CheckResult(False, reason, str(e))
    return CheckResult(True)


def check_tool(tool: ToolCode, state: dict, arguments: dict, *, timeout_s: float | None = None,
               memory_mb: int | None = None) -> CheckResult:
    """Run every check on ``tool`` (its ``source``, ``parameters`` and ``output_schema``)."""
    res = static_check(tool.source, tool_function(tool))
    if not res.ok:
        res.arguments = arguments
        return res
    try:
        first, second = smoke_check(tool, state, arguments, timeout_s=timeout_s, memory_mb=memory_mb)
    except UnsafeCodeError as e:  # pragma: no cover - static_check ran the same checks
        return CheckResult(False, "unsafe_code", str(e), arguments)
    except AutoforgeError as e:
        return CheckResult(False, "sandbox_error", str(e), arguments)
    call = f"smoke call {tool.name}({_short(arguments)}) on the sample state"
    for obs in (first, second):
        if obs.kind in ("crashed", "timeout", "memory_limit", "invalid_arguments", "unknown_tool"):
            return CheckResult(False, obs.kind, f"{call}: {obs.error}", arguments, obs.output)
        if obs.kind == "tool_error" and not (isinstance(obs.output, dict) and isinstance(obs.output.get("error"), str)):
            return CheckResult(False, "malformed_error", f"{call}: an error observation must be "
                                                         f"{{'error': '<text>'}}, got {_short(obs.output)}", arguments, obs.output)
    same_output = canonical_json(first.output) == canonical_json(second.output)
    if not same_output or first.state_hash != second.state_hash:
        what = "output" if not same_output else "final state"
        return CheckResult(False, "nondeterministic", f"{call}: two identical calls, each in a fresh sandbox "
                                                      f"process, gave a different {what} (use next_id, NOW/TODAY, no "
                                                      "randomness; sort sets before returning or storing them; never "
                                                      "return repr() of functions or objects)", arguments, first.output)
    if first.kind == "tool_error" and (first.rolled_back or (first.state_hash and first.state_hash != state_hash(state))):
        return CheckResult(False, "error_changed_state", f"{call}: it returned an error after changing the state "
                                                         "(the runtime undid the change); check every precondition "
                                                         "before writing", arguments, first.output)
    if first.ok:
        mismatch = output_fits(first.output, tool.output_schema)
        if mismatch:
            return CheckResult(False, "output_mismatch", f"{call}: the output does not fit the declared output "
                                                         f"schema: {mismatch}", arguments, first.output)
    return CheckResult(True, None, None, arguments, first.output)


def _short(value: Any, n: int = 160) -> str:
    text = canonical_json(value)
    return text if len(text) <= n else text[: n - 3] + "..."
