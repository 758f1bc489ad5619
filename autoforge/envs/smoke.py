"""Smoke calls and checks that raise: how synthesis calls a tool on the sample state.

:func:`smoke_arguments` picks arguments around one sample record (real ids and field values;
synthesis tries the records in turn until a call succeeds); :func:`guarded_check` / :func:`raised_check`
turn anything a check raises into that tool's failed check (a reason, what was raised, a hint
the LLM can repair from), so a bad tool is rejected, never a crash.
"""

from __future__ import annotations

import sys
from typing import Callable

from autoforge.envs.checks import CheckResult
from autoforge.envs.sample import collection_for, sample_arguments
from autoforge.llm.messages import clip
from autoforge.types import StateSchema, ToolSpec


def smoke_arguments(spec: ToolSpec, state: dict, schema: StateSchema, collection: str | None, kind: str,
                    record_index: int = 0, arg_map: dict[str, str] | None = None) -> dict:
    """Smoke-call arguments around record ``record_index`` of the tool's main collection: real
    ids and field values of the sample state where they fit.

    ``arg_map`` (ToolCode.arg_map): the values are chosen by the code's Python names (``assetTag``
    -> ``asset_id`` finds the assets), the arguments keep the public names. A link tool gets a
    linked record other than the one already linked, so the call does not hit "already assigned"."""
    if arg_map:
        params = spec.parameters or {}
        renamed = {**params, "properties": {arg_map.get(k, k): v for k, v in (params.get("properties") or {}).items()},
                   "required": [arg_map.get(r, r) for r in params.get("required") or []]}
        public = {py: p for p, py in arg_map.items()}
        inner = smoke_arguments(spec.model_copy(update={"parameters": renamed}), state, schema, collection, kind,
                                record_index)
        return {public.get(k, k): v for k, v in inner.items()}
    args = sample_arguments(spec.parameters, state, schema, collection, record_index=record_index,
                            fresh=kind == "create")
    if kind == "link" and collection:
        main = sorted(state.get(collection, {}))
        current = state[collection][main[record_index % len(main)]] if main else {}
        for p, v in list(args.items()):
            coll = collection_for(p, schema, collection)
            keys = sorted(state.get(coll.name, {})) if coll is not None and coll.name != collection else []
            taken = {x for val in current.values() for x in (val if isinstance(val, list) else [val]) if isinstance(x, str)}
            if isinstance(v, str) and v in taken:
                args[p] = next((k for k in keys if k not in taken), v)
    return args


def guarded_check(where: str, check: Callable[[], CheckResult]) -> CheckResult:
    """``check()``, or :func:`raised_check` of whatever it raised: a bad tool is rejected, never a crash."""
    try:
        return check()
    except Exception as exc:  # noqa: BLE001 - see the module docstring
        return raised_check(exc, where)


def describe(exc: BaseException, limit: int = 500) -> str:
    """``Type: message`` of ``exc``, clipped; safe for exceptions whose ``str()`` itself raises."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - e.g. a referencing error built without its resource
        text = f"(its message could not be formatted; args {clip(repr(getattr(exc, 'args', ())), limit)})"
    return f"{type(exc).__name__}: {clip(text, limit) or '(no message)'}"


def raised_check(exc: BaseException, where: str, arguments: dict | None = None) -> CheckResult:
    """The failed check that ``where`` raising ``exc`` stands for: a reason, what was raised, and
    how the code can avoid it (the LLM repairs from this text)."""
    if isinstance(exc, RecursionError):
        reason, hint = "too_deep", (f"the code, its output or its output schema nests deeper than the checks can follow "
                                    f"(Python's recursion depth limit is {sys.getrecursionlimit()}); flatten deeply "
                                    "nested expressions, brackets and data")
    elif isinstance(exc, MemoryError):
        reason, hint = "memory_limit", "checking it ran out of memory; build smaller values"
    elif type(exc).__module__.split(".")[0] in ("jsonschema", "referencing"):
        reason, hint = "invalid_output_schema", ("the declared output_schema is not usable JSON Schema (every $ref must "
                                                 "resolve inside the schema itself); fix it or leave it out")
    elif isinstance(exc, OverflowError):
        reason, hint = "check_error", "a number is out of range; numbers must fit a 64-bit float"
    else:
        reason, hint = "check_error", ("the checks could not handle the code or its output; return plain JSON values "
                                       "(numbers that fit a 64-bit float, strings, lists, dicts)")
    return CheckResult(False, reason, f"{where} raised {describe(exc)}; {hint}", arguments or {})
