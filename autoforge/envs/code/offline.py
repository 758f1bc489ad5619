"""The template registry: a tool's plan kind -> its template, and :func:`offline_tool_code`.

Every template kind is a kind of :data:`autoforge.domain.tool_kinds.TOOL_KINDS` (a test checks);
a hand-off is written as the create of a ``handoffs`` record (it records the transfer)."""

from __future__ import annotations

from autoforge.domain.tool_kinds import tool_kind
from autoforge.domain.tools import ToolPlan
from autoforge.envs.code.base import func_name, ToolDraft
from autoforge.envs.code.context import Ctx
from autoforge.envs.code.links import t_amount, t_link
from autoforge.envs.code.pure import t_calculator, t_scratchpad
from autoforge.envs.code.reads import t_get, t_list, t_lookup
from autoforge.envs.code.writes import t_create, t_delete, t_generic, t_status, t_update
from autoforge.envs.rule_engine import argument_checks
from autoforge.types import StateSchema, ToolSpec

TEMPLATES = {
    "lookup": t_lookup, "get": t_get, "list": t_list, "create": t_create, "update": t_update,
    "status": t_status, "delete": t_delete, "link": t_link, "unlink": lambda x: t_link(x, unlink=True),
    "amount": t_amount, "generic": t_generic,
    "scratchpad": t_scratchpad, "calculator": t_calculator, "handoff": t_create,
}


def offline_tool_code(spec: ToolSpec, plan: ToolPlan, schema: StateSchema,
                      public: dict[str, str] | None = None) -> ToolDraft:
    """Write one tool's source from the template its plan names (``public``: canonical -> documented
    parameter names, for the messages of refused calls)."""
    if plan.kind not in TEMPLATES:
        raise KeyError(f"unknown template kind {plan.kind!r}; valid: {sorted(TEMPLATES)}")
    x = Ctx(spec, plan, schema)
    source, out = TEMPLATES[plan.kind](x)
    checks = argument_checks(x.rules(), x.py, public)
    if checks:  # argument rules first: a refused call never touches the state
        lines = source.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("def ")) + 2
        source = "\n".join(lines[:at] + ["    " + c for c in checks] + lines[at:])
    collection = x.coll.name if tool_kind(plan.kind).stores else None
    return ToolDraft(name=spec.name, source=source, kind=plan.kind, collection=collection,
                     effect=plan.effect, output_schema=out, function_name=func_name(spec.name), arg_map=x.arg_map,
                     rules=x.rules())
