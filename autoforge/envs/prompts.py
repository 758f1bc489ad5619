"""Prompt templates of environment synthesis (arXiv 2512.22857, Sec. 3.1).

``state_schema`` (tool docs -> the state structure S), ``tool_code`` (one tool -> its Python
source) and ``tool_repair`` (a rejected source and its failure -> a corrected source), used by
:mod:`autoforge.envs.synthesis`. :data:`TOOL_CODE_CONTRACT` is the calling convention
:mod:`autoforge.envs.sandbox` enforces, told to the LLM. See :mod:`autoforge.llm.prompting`
for what a template is and how it is registered.
"""

from __future__ import annotations

from typing import Any

from autoforge.envs import pynames, sandbox
from autoforge.llm.messages import clip
from autoforge.llm.prompting import msgs, register, tool_brief

MAX_FAILURE_CHARS = 4000  # of a check's message in a repair prompt: the cause, not a whole runaway output


@register("state_schema")
def state_schema(toolset: str, tools: list[Any]) -> list[dict]:
    """Tool docs -> the environment's state structure S (collections of records keyed by id)."""
    system = (
        "You design the database behind a set of tools. Give the collections the tools read and "
        "write: plural name (orders), entity (order), primary key (order_id), a 1-3 letter id prefix "
        "(O -> O0001), and fields with types; a field holding another entity's id names that "
        "collection in `ref`; status fields list their `enum` values. Every id parameter and every "
        "field of every tool output must live in some collection. Link the records the way the docs "
        "imply, in both directions where a read would show it (a user lists its order ids, an order "
        "its items, amounts and payment method). Where the tools select a record by a key that is not "
        "called an id (a slug, a username, a key, a symbol), make that the primary key. A tool set "
        "with no ids at all (a device, a session) is one record per part."
    )
    return msgs(system, {"toolset": toolset, "tools": [tool_brief(t) for t in tools]})


def _tool_code_contract() -> str:
    """The calling convention :mod:`autoforge.envs.sandbox` enforces, told to the LLM.

    Built from the sandbox's own constants (clock, helpers, allowed imports), so the prompt
    cannot drift from what the checks accept."""
    modules = ", ".join(sorted(sandbox.MODULES))
    return (
        "Write one Python function named exactly as `python.function_name` says: "
        "`def <function_name>(state, <param>, <optional_param>=None, ...)`, one keyword parameter per tool "
        "argument, named as `python.parameters` maps the argument's public name (names that are not Python "
        "identifiers, are keywords or would shadow a helper are renamed: `order-id` -> `order_id`, `from` -> "
        "`from_`, `state` -> `state_`); optional ones default to None. `state` is a dict of collections, each "
        "a dict of records keyed by id (records also hold their own id field). Read and mutate `state` in "
        "place; return a JSON-serialisable dict. On a failed precondition (unknown id, wrong status, not "
        "enough balance) return error(\"<reason>\") (that is {\"error\": \"<reason>\"}) without changing "
        "state; never raise. Deterministic: new ids from next_id(state, collection, prefix) (O0007 after "
        f"O0006), the clock is the constants NOW ({sandbox.NOW!r}) and TODAY ({sandbox.TODAY!r}); "
        "add_days(date, n), copy(value) (deep copy) and error(msg) are available without import. No "
        "randomness, clock calls, files, network, print, classes, `global`, or names/attributes starting "
        f"with '_'. Imports only from: {modules}. Also give the JSON Schema of what the function returns on "
        "success (output_schema), its effect (read or write) and the main collection. Enforce every rule in "
        "`rules` (read from the docs): check source statuses and argument rules (ranges, one of, cannot be "
        "combined, required when, format) first and refuse with error() before changing anything; set the "
        "stated result status and timestamps. Each rule is probed: a call that breaks it must be refused "
        "and leave state unchanged, a call that keeps it must succeed."
    )


TOOL_CODE_CONTRACT = _tool_code_contract()


def _python_names(tool: Any, function_name: str | None, arg_names: dict[str, str] | None) -> dict:
    """The Python names the code must use (``python`` in the payload), from the tool's public names."""
    brief = tool_brief(tool)
    params = list(((brief.get("parameters") or {}).get("properties") or {}))
    return {"function_name": function_name or pynames.function_name(str(brief.get("name", "tool"))),
            "parameters": arg_names if arg_names is not None else pynames.argument_names(params)}


@register("tool_code")
def tool_code(tool: Any, schema: Any, *, sample_state: dict | None = None, contract: str = TOOL_CODE_CONTRACT,
              function_name: str | None = None, arg_names: dict[str, str] | None = None,
              rules: list[dict] | None = None) -> list[dict]:
    """One tool's documentation + the state schema -> the tool's Python source.

    ``contract`` is the runtime's calling convention (the environment runtime owns it; pass
    its text if it differs from the default). ``function_name``/``arg_names`` are the Python
    names to use (ToolCode.function_name, public -> Python argument names); by default they
    are derived from the tool's public names (:mod:`autoforge.envs.pynames`)."""
    system = "You implement tools of a simulated environment over an in-memory database. " + contract
    payload = {"tool": tool_brief(tool), "python": _python_names(tool, function_name, arg_names), "state_schema": schema}
    if sample_state is not None:
        payload["sample_state"] = sample_state
    if rules:
        payload["rules"] = rules  # autoforge.domain.rules: kind, the sentence, the field, the values
    return msgs(system, payload)


@register("tool_repair")
def tool_repair(tool: Any, schema: Any, source: str, failure: str, *, contract: str = TOOL_CODE_CONTRACT,
                function_name: str | None = None, arg_names: dict[str, str] | None = None,
                repair: int = 1) -> list[dict]:
    """A rejected tool's source and the check that failed -> a corrected source. ``repair`` counts
    the repairs of this tool: from the second on the prompt says the last repair failed too, so a
    failure that repeats is a new question, not the cached answer to the last one."""
    system = (
        "You fix a tool implementation that failed an automatic check. Keep what works, fix the "
        "cause named in `failure`, and return the whole corrected function. " + contract
    )
    payload = {"tool": tool_brief(tool), "python": _python_names(tool, function_name, arg_names),
               "state_schema": schema, "source": source, "failure": clip(failure, MAX_FAILURE_CHARS)}
    if repair > 1:
        payload["note"] = f"repair {repair}: the previous repair failed its check too; try a different fix"
    return msgs(system, payload)


def _guard_forms() -> str:
    """The guard forms the rule engine checks, told to the LLM (from :mod:`autoforge.envs.guards`'s table)."""
    from autoforge.envs import guards

    doc = guards.__doc__ or ""
    return doc[doc.index("====="):doc.rindex("=====") + 5] if "=====" in doc else ", ".join(guards.OPS)


@register("policy_rules")
def policy_rules(toolset: str, tools: list[Any], schema: Any, policy: str) -> list[dict]:
    """A tool set's policy text + its tools and state schema -> its rules as typed records with checks."""
    system = (
        "You read the business policy of a tool-using service and list every rule it states, one record per "
        "rule: `kind` (source_status, time_window, cross_record, quantity_limit, count_limit, money, "
        "prohibition, conversation, procedure, or unparsed), `text` (the sentence, verbatim), `tools` (the names of the "
        "tools it governs), `enforcement` (runtime: a tool call can break it and `check` says how; judged: a "
        "conversation rule; not enforced: give `why`), and `check`. A runtime check is one of these forms, "
        "with `op` and its keys; `collection` and `field` name the state schema's collections and fields, "
        "`id_arg`, `arg`, `owner_arg` and `item_arg` name the tool's arguments (a collection with `session: true` "
        "holds the caller's own record: compare with it through `owner_from`):\n" + _guard_forms() + "\n"
        "A judged check is {\"op\": \"identify_first\", \"tools\": [writes], \"via\": [lookup tools]} (with no "
        "lookup, add \"label\": what identifies the user in the rule's words, and \"arg\": the writes' argument "
        "that carries it, where the rule names one) or "
        "{\"op\": \"confirm_first\", \"tools\": [writes]}, or, for a procedure (the order tools must be called "
        "in), {\"op\": \"call_before\", \"tools\": [later tools], \"via\": [tools one of which must come first]} or "
        "{\"op\": \"sequence\", \"steps\": [tools in their required order], \"tools\": [the same]}. List rules you cannot express as "
        "`not enforced` with `why`; never drop one. Every check is validated against the tools and the "
        "schema and probed in a sandbox: a call that breaks it must be refused, one that keeps it must succeed."
    )
    return msgs(system, {"toolset": toolset, "tools": [tool_brief(t) for t in tools], "state_schema": schema,
                         "policy": policy})
