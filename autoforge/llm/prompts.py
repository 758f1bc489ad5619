"""Prompt templates for every step the paper gives to an LLM, in one place.

Each template is a plain function returning chat messages (``list[dict]``) that a stage sends
through ``client.structured(step, messages, ResponseModel)`` (or ``client.chat`` for the
simulated user). The response model belongs to the stage; the JSON schema travels in the
request's ``response_format``, so prompts describe the *task*, not the format. Inputs are
records from :mod:`autoforge.types` or plain dicts; payloads are sent as canonical JSON, so
identical inputs give identical prompts and hit the response cache on a re-run.

Steps follow arXiv 2512.22857 (Sec. 3.1 environment synthesis, Sec. 3.2 tool graph, walks,
merging and reasoning nodes, Sec. 3.3 task generation, Sec. 4 ERPO's user-error judge).
Look a template up with :func:`get_prompt`; an unknown step name raises with the valid ones.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel

from autoforge.errors import ConfigError
from autoforge.types import Message, canonical_json

PromptFn = Callable[..., list[dict]]
PROMPTS: dict[str, PromptFn] = {}


def register(step: str) -> Callable[[PromptFn], PromptFn]:
    def deco(fn: PromptFn) -> PromptFn:
        if step in PROMPTS:
            raise ConfigError(f"prompt step {step!r} is registered twice")
        PROMPTS[step] = fn
        return fn

    return deco


def get_prompt(step: str) -> PromptFn:
    try:
        return PROMPTS[step]
    except KeyError:
        raise ConfigError(f"no prompt template for step {step!r}; known steps: {', '.join(sorted(PROMPTS))}") from None


def _dump(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump(mode="json", exclude_none=True)
    if isinstance(obj, (list, tuple)):
        return [_dump(o) for o in obj]
    if isinstance(obj, dict):
        return {k: _dump(v) for k, v in obj.items()}
    return obj


def _tool_brief(tool: Any) -> dict:
    """Name, description, parameters and output schema of a ToolSpec/ToolCode/dict."""
    d = _dump(tool)
    return {k: d[k] for k in ("name", "description", "parameters", "output_schema", "effect") if d.get(k) not in (None, "")}


def _msgs(system: str, payload: dict) -> list[dict]:
    return [{"role": "system", "content": system}, {"role": "user", "content": canonical_json(_dump(payload))}]


# --------------------------------------------------------------------------- ingest


@register("tool_docs")
def tool_docs(text: str, *, path: str = "") -> list[dict]:
    """Markdown/prose tool documentation -> tool schemas (OpenAI function-calling style)."""
    system = (
        "You convert prose tool documentation into tool definitions. For every tool the text "
        "describes, give its snake_case name, a one-sentence description, and its parameters as a "
        "JSON Schema object (types, required, enums). Invent nothing the text does not support."
    )
    return _msgs(system, {"path": path, "documentation": text})


# --------------------------------------------------------------------------- environment synthesis


@register("state_schema")
def state_schema(toolset: str, tools: list[Any]) -> list[dict]:
    """Tool docs -> the environment's state structure S (collections of records keyed by id)."""
    system = (
        "You design the database behind a set of tools. Give the collections the tools read and "
        "write: plural name (orders), entity (order), primary key (order_id), a 1-3 letter id prefix "
        "(O -> O0001), and fields with types; a field holding another entity's id names that "
        "collection in `ref`; status fields list their `enum` values. Every id parameter and every "
        "field of every tool output must live in some collection."
    )
    return _msgs(system, {"toolset": toolset, "tools": [_tool_brief(t) for t in tools]})


def _tool_code_contract() -> str:
    """The calling convention :mod:`autoforge.envs.sandbox` enforces, told to the LLM.

    Built from the sandbox's own constants (clock, helpers, allowed imports), so the prompt
    cannot drift from what the checks accept."""
    from autoforge.envs import sandbox  # stdlib-only module: no cycle

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
        "success (output_schema), its effect (read or write) and the main collection."
    )


TOOL_CODE_CONTRACT = _tool_code_contract()


def _python_names(tool: Any, function_name: str | None, arg_names: dict[str, str] | None) -> dict:
    """The Python names the code must use (``python`` in the payload), from the tool's public names."""
    from autoforge.envs import naming

    brief = _tool_brief(tool)
    params = list(((brief.get("parameters") or {}).get("properties") or {}))
    return {"function_name": function_name or naming.function_name(str(brief.get("name", "tool"))),
            "parameters": arg_names if arg_names is not None else naming.argument_names(params)}


@register("tool_code")
def tool_code(tool: Any, schema: Any, *, sample_state: dict | None = None, contract: str = TOOL_CODE_CONTRACT,
              function_name: str | None = None, arg_names: dict[str, str] | None = None) -> list[dict]:
    """One tool's documentation + the state schema -> the tool's Python source.

    ``contract`` is the runtime's calling convention (the environment runtime owns it; pass
    its text if it differs from the default). ``function_name``/``arg_names`` are the Python
    names to use (ToolCode.function_name, public -> Python argument names); by default they
    are derived from the tool's public names (:mod:`autoforge.envs.naming`)."""
    system = "You implement tools of a simulated environment over an in-memory database. " + contract
    payload = {"tool": _tool_brief(tool), "python": _python_names(tool, function_name, arg_names), "state_schema": schema}
    if sample_state is not None:
        payload["sample_state"] = sample_state
    return _msgs(system, payload)


@register("tool_repair")
def tool_repair(tool: Any, schema: Any, source: str, failure: str, *, contract: str = TOOL_CODE_CONTRACT,
                function_name: str | None = None, arg_names: dict[str, str] | None = None) -> list[dict]:
    """A rejected tool's source and the check that failed -> a corrected source."""
    system = (
        "You fix a tool implementation that failed an automatic check. Keep what works, fix the "
        "cause named in `failure`, and return the whole corrected function. " + contract
    )
    return _msgs(system, {"tool": _tool_brief(tool), "python": _python_names(tool, function_name, arg_names),
                          "state_schema": schema, "source": source, "failure": failure})


# --------------------------------------------------------------------------- graph, walks, DAGs


@register("edges")
def edges(tools: list[Any], candidates: list[dict] | None = None) -> list[dict]:
    """Tools -> edges A->B where an output of A is likely a valid input of B, with bindings."""
    system = (
        "You build a tool dependency graph. An edge src -> dst means a value in src's output is a "
        "likely valid argument of dst; give each binding as output_path (dotted path in src's output, "
        "`*` for list items, e.g. orders.*.order_id) -> param of dst. Only bind values of the same "
        "entity and type. If `candidates` are given, judge only those."
    )
    payload: dict[str, Any] = {"tools": [_tool_brief(t) for t in tools]}
    if candidates is not None:
        payload["candidates"] = candidates
    return _msgs(system, payload)


@register("merge")
def merge(first: list[str], second: list[str], tools: list[Any]) -> list[dict]:
    """Two tool sequences -> one multi-requirement sequence with redundant calls removed."""
    system = (
        "You merge two tool-call sequences, each serving one user requirement, into one sequence a "
        "single user request could need. Keep each sequence's order, drop a call that repeats an "
        "earlier identical lookup, and say for every kept call which requirement (0 or 1) it serves."
    )
    return _msgs(system, {"first": first, "second": second, "tools": [_tool_brief(t) for t in tools]})


@register("reasoning")
def reasoning(sequence: list[str], tools: list[Any], ops: dict[str, Any]) -> list[dict]:
    """A tool sequence -> reasoning nodes (ops over earlier outputs) and reasoning edges: a DAG."""
    system = (
        "You turn a tool sequence into a task blueprint (a DAG). Insert reasoning nodes where a later "
        "argument must be computed from earlier outputs (pick the cheapest, add days to a date, "
        "compare totals) using only the listed operations, and say for every argument where its "
        "value comes from: a user fact, an earlier node's output path, or a constant."
    )
    return _msgs(system, {"sequence": sequence, "tools": [_tool_brief(t) for t in tools], "operations": ops})


# --------------------------------------------------------------------------- tasks


@register("task_text")
def task_text(dag: Any, user_facts: dict, gold_calls: list[Any]) -> list[dict]:
    """A DAG with its gold calls -> the user's request, holding only the minimum information."""
    system = (
        "You write what a user would say to a support agent to get this work done. State the goal "
        "of every requirement in plain words, but do not mention tools, ids the user would not know, "
        "or the steps. Mention only the facts needed to start; the other facts in `user_facts` stay "
        "hidden (the user reveals them when asked). Write in the first person, 1-3 sentences."
    )
    return _msgs(system, {"dag": dag, "user_facts": user_facts, "gold_calls": gold_calls})


USER_STOP = "###STOP###"


@register("user_sim")
def user_sim(request: str, user_facts: dict, conversation: list[dict | Message]) -> list[dict]:
    """Messages for the simulated user's next turn (``client.chat``).

    Roles are flipped: the agent's messages become ``user`` turns and the simulated user's
    own earlier turns ``assistant`` turns; tool traffic is hidden from the user. The user ends
    the episode by replying with :data:`USER_STOP`."""
    system = (
        "You play a customer talking to a support agent. Your goal: " + request + "\n"
        "Facts you know (reveal one only when the agent asks for it; never invent others): "
        + canonical_json(user_facts) + "\n"
        "Write short, natural replies. Confirm an action only if it matches your goal. "
        f"When every part of your goal is done, reply with exactly {USER_STOP}. Do not stop while a "
        "change you asked for is still pending."
    )
    out: list[dict] = [{"role": "system", "content": system}]
    for m in conversation:
        d = _dump(m)
        role, content = d.get("role"), d.get("content") or ""
        if role == "assistant" and content:
            out.append({"role": "user", "content": content})
        elif role == "user":
            if len(out) == 1:  # chat templates want a user turn first: the agent's greeting
                out.append({"role": "user", "content": "Hi! How can I help you today?"})
            out.append({"role": "assistant", "content": content})
    return out


@register("judge")
def judge(user_facts: dict, request: str, conversation: list[dict | Message]) -> list[dict]:
    """ERPO's user-error judge (masking): did the simulated user give incorrect information?"""
    system = (
        "You audit a simulated user. Given the facts the user was told and the dialogue, decide "
        "whether the user gave incorrect information: a value that contradicts a fact, a fact that "
        "was asked for but withheld, or ending the conversation while a requested change was still "
        "pending. The agent's mistakes do not count. Answer with user_error true/false and a reason."
    )
    turns = []
    for m in conversation:
        d = _dump(m)
        if d.get("role") in ("user", "assistant") and d.get("content"):
            turns.append({"role": d["role"], "content": d["content"]})
    return _msgs(system, {"request": request, "user_facts": user_facts, "dialogue": turns})


STEPS = tuple(PROMPTS)
