"""Python names of public names: the identifiers tool code gives tool and argument names.

Tool names and argument names come from the docs (MCP allows ``orders.get``, OpenAI
``get-order``, OpenAPI anything in an operationId; a parameter may be ``order-id``,
``from`` or ``state``). The agent and the JSON Schema keep those public names; the code
gets a deterministic Python name for each, and ToolCode records the mapping
(``function_name``, ``arg_map``) so the runtime translates a call before it runs.
"""

from __future__ import annotations

import keyword

from autoforge.domain.words import snake
from autoforge.envs import sandbox


def _code_reserved() -> frozenset[str]:
    """Names tool code relies on: keywords, ``state``, the injected helpers, safe builtins, modules.

    Forbidden builtins (``type``, ``id``, ``open`` ...) are not reserved: tool code cannot
    call them, so a parameter may take the name (it is bound, which the checks allow)."""
    return frozenset(keyword.kwlist) | {"state"} | set(sandbox.HELPERS) | set(sandbox.SAFE_BUILTIN_NAMES) | set(
        sandbox.MODULES)


CODE_RESERVED = _code_reserved()
# A tool function named like a forbidden builtin would still read as one: rename those too.
FUNCTION_RESERVED = CODE_RESERVED | {"open", "exec", "eval", "compile", "print", "input", "globals", "locals",
                                     "vars", "getattr", "setattr", "delattr", "hasattr", "type", "object", "super",
                                     "id", "hash", "dir", "help", "exit", "quit", "breakpoint"}


def python_name(public: str, reserved: frozenset[str] | set[str] = CODE_RESERVED, taken: set[str] | None = None,
                fallback: str = "tool") -> str:
    """A Python identifier for a public name, deterministic and free of ``reserved``/``taken``.

    A valid identifier that is not reserved and does not start with ``_`` is kept as it is
    (``findCustomerByEmail``); otherwise: ``orders.get`` -> ``orders_get``, ``Orders/Cancel`` ->
    ``orders_cancel``, ``order-id`` -> ``order_id``, ``2fa-reset`` -> ``t_2fa_reset``,
    ``import`` -> ``import_``, ``state`` -> ``state_``, a name with no ASCII letters or digits ->
    ``fallback``. A clash with ``taken`` appends ``_2``, ``_3`` ...
    """
    taken = taken if taken is not None else set()
    if public.isidentifier() and public.isascii() and not public.startswith("_") and public not in reserved \
            and public not in taken:
        return public
    base = snake(public) or fallback
    if base[0].isdigit():
        base = f"t_{base}"
    if base in reserved or keyword.iskeyword(base):
        base += "_"
    out, n = base, 2
    while out in taken or out in reserved:
        out, n = f"{base}_{n}", n + 1
    return out


def function_name(tool_name: str) -> str:
    """The Python function name of a tool (``orders.get`` -> ``orders_get``, ``return`` -> ``return_``)."""
    return python_name(tool_name, FUNCTION_RESERVED)


def argument_names(params: list[str], reserved: frozenset[str] | set[str] = CODE_RESERVED) -> dict[str, str]:
    """Public argument name -> Python parameter name, for every parameter (identity where allowed).

    Injective: parameters that can keep their name claim it first, the others are renamed in
    documented order around them (``order-id`` and ``order_id`` -> ``order_id_2`` for the first)."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for p in params:
        if p.isidentifier() and p.isascii() and not p.startswith("_") and p not in reserved:
            out[p] = p
            taken.add(p)
    for p in params:
        if p not in out:
            out[p] = python_name(p, reserved, taken, fallback="arg")
            taken.add(out[p])
    return {p: out[p] for p in params}
