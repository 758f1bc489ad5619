"""What to change in the doc: why an environment yields no task, in the user's terms, naming the tool and field.

``v_environment_funnel.why_empty`` names the first stage that came up empty and its internal drop
reasons (``unresolvable_list``, ``ambiguous_reasoning``). :func:`doc_advice` turns the top drops
of that stage into advice about the documentation: which tool, which parameter or output field,
and what to write instead, with an example built from the tool set's own names. :data:`ADVICE` is
the mapping, one function per drop reason; a reason without one gets no advice (the funnel's
reason still says what happened).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from autoforge.domain.keys import is_key_param
from autoforge.domain.tools import analyze_tool
from autoforge.tooldocs.schema import props
from autoforge.types import ToolSpec
from autoforge.warehouse import query, read_records

__all__ = ["ADVICE", "Drop", "doc_advice", "environment_advice"]


@dataclass
class Drop:
    """One drop reason of one stage: how often, and one message (the rejection's detail)."""

    stage: str
    reason: str
    n: int
    detail: str = ""


@dataclass
class Docs:
    """What the advice reads of a tool set's docs: its tools by name."""

    tools: dict[str, ToolSpec] = field(default_factory=dict)

    def named_in(self, text: str) -> list[str]:
        """The tools ``text`` names, in the order it names them."""
        found = [(m.start(), name) for name in self.tools for m in [re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)] if m]
        return [name for _, name in sorted(found)]

    def params(self, tool: str) -> list[str]:
        return list(props(self.tools[tool].parameters)) if tool in self.tools else []

    def list_items(self, tool: str) -> tuple[str | None, list[str]]:
        """The first array of objects in ``tool``'s output schema: its name and its items' fields."""
        out = props(self.tools[tool].output_schema) if tool in self.tools else {}
        for name, schema in out.items():
            if isinstance(schema, dict) and schema.get("type") == "array":
                return name, list(props(schema.get("items") or {}))
        return None, []


def _code(names: list[str]) -> str:
    return " or ".join(f"`{n}`" for n in names)


def _entity(list_name: str) -> str:
    return list_name[:-1] if list_name.endswith("s") else list_name


def unresolvable_list(drop: Drop, docs: Docs) -> str | None:
    m = re.match(r"(\w+)\.([\w.]+) has no field", drop.detail)
    if not m:
        return None
    tool, path = m.group(1), m.group(2)
    entity = _entity(path.split(".")[-1])
    example = {path: {"type": "array", "items": {"type": "object", "properties": {
        f"{entity}_id": {"type": "string"}, "name": {"type": "string"}, "created_at": {"type": "string", "format": "date"},
        "status": {"type": "string", "enum": ["..."]}}}}}
    return (f"`{tool}` returns a list (`{path}`) but names no field to choose an item by: say what each result holds "
            f"(a name, a number or date to compare, a status) in its description, e.g. \"Returns the {path} with their "
            f"{entity}_id, name, created_at and status\", or in an output schema, e.g. "
            f"`\"output_schema\": {json.dumps({'type': 'object', 'properties': example})}`")


def ambiguous_reasoning(drop: Drop, docs: Docs) -> str | None:
    tools = docs.named_in(drop.detail)
    if not tools:
        return None
    tool = tools[0]
    if "no items" in drop.detail:
        list_name, fields = docs.list_items(tool)
        fields = [f for f in fields if not is_key_param(f, set())]
        loose = [p for p in docs.params(tool) if p not in fields and not is_key_param(p, set())]
        what = f" (`{'`, `'.join(loose)}` matches no field of its results)" if loose and fields else ""
        instead = f", e.g. {_code(fields[:2])}" + (f" instead of `{loose[0]}`" if loose else "") if fields else ""
        lists = f"`{list_name}`" if list_name else "its results"
        return (f"`{tool}` found nothing for the values drawn for its parameters{what}, so {lists} had no item to "
                f"choose from: name each search parameter after the field of the results it matches{instead}, and "
                f"list those fields in `{tool}`'s output schema")
    m = re.search(r"no value of (\w+) singles out", drop.detail)
    if m:
        return (f"the results of `{tool}` all share their `{m.group(1)}`, so no one result can be picked by it: give "
                f"each result a field whose values differ (a name, a date, a number) in `{tool}`'s output schema")
    return None


def _at_tool(drop: Drop, docs: Docs, pattern: str) -> tuple[str, tuple[str, ...]] | None:
    """The first tool ``drop``'s detail names and the groups of ``pattern`` in it; None when either is missing."""
    m = re.search(pattern, drop.detail)
    tools = docs.named_in(drop.detail)
    return (tools[0], m.groups()) if m and tools else None


def no_candidate(drop: Drop, docs: Docs) -> str | None:
    if not (hit := _at_tool(drop, docs, r"no record to take (\w+) from")):
        return None
    tool, (arg,) = hit
    return (f"`{tool}` needs `{arg}`, but no record holds one: say which record it belongs to (name it as the field "
            f"another tool returns, e.g. `<entity>_id`), or give its values (an enum or an example)")


def ambiguous_lookup(drop: Drop, docs: Docs) -> str | None:
    if not (hit := _at_tool(drop, docs, r"no (\w+) has a unique (.+?)(?: \(at |$)")):
        return None
    tool, (entity, fields) = hit
    return (f"`{tool}` finds a {entity} by {fields}, which no {entity} has alone: look it up by a field that is "
            f"unique (an id, an email, a code) and say so in the parameter's description")


def gold_call_error(drop: Drop, docs: Docs) -> str | None:
    tools = docs.named_in(drop.detail)
    if not tools:
        return None
    err = drop.detail.split("failed:", 1)[-1].split(" (at ")[0].strip()[:160]
    return (f"`{tools[0]}` refused arguments its docs allow ({err}): state the limit in the parameter's schema or "
            f"description (an enum, a pattern, a minimum, 'only pending orders can be cancelled'), so tasks keep to it")


def policy_rule(drop: Drop, docs: Docs) -> str | None:
    """A gold run the rule engine refused, or whose calls broke a judged rule (issue 33): the detail is
    ``rule <id>: <tool>(<args>) was refused: policy rule <id>: <message>`` or the judged rule's why."""
    tools = docs.named_in(drop.detail)
    if not tools:
        return None
    m = re.search(r"\brule (\S+?):", drop.detail)
    rule = m.group(1) if m else "?"
    said = drop.detail.rsplit(f"policy rule {rule}:", 1)[-1].split(" (at ")[0].strip()[:160]
    if "before any lookup" in drop.detail:
        return (f"tasks that call `{tools[0]}` do not look the user up first, which rule {rule} requires ({said}): "
                f"make sure a lookup that identifies the user returns what `{tools[0]}` takes (its ids), so a "
                f"task can go through it")
    return (f"tasks keep running `{tools[0]}` into rule {rule} ({said}): say in its parameters' schema or "
            f"descriptions what the rule allows (an enum of the statuses it accepts, a maximum, a pattern), "
            f"so the values and records a task picks keep it")


def boundary_hidden(drop: Drop, docs: Docs) -> str | None:
    m = re.search(r"no read shows the (\w+) of (\w+)", drop.detail)
    if not m:
        return None
    field_, entity = m.groups()
    return (f"no read returns the {entity}'s `{field_}`, which a rule checks, so an agent cannot find out why a "
            f"request breaks it: list `{field_}` in the output schema of a tool that gets the {entity} by its id")


def say_what_it_changes(docs: Docs, write: str) -> str:
    """How to state a write's effect, with the write's own entity in the example."""
    entity = analyze_tool(docs.tools[write], set()).entity if write in docs.tools else "record"
    return (f"say in its description what it changes, in the fields the reads return (e.g. 'sets the {entity}'s "
            f"status to <new status>', 'adds the <item> to the {entity}'s <items>')")


def no_state_change(drop: Drop, docs: Docs) -> str | None:
    writes = [t.name for t in docs.tools.values() if t.effect == "write"]
    if not writes:
        return None
    shown = ", ".join(f"`{w}`" for w in writes[:3]) + (" ..." if len(writes) > 3 else "")
    return f"the writes ({shown}) left the state as it was: for each, " + say_what_it_changes(docs, writes[0])


def unobservable_write(drop: Drop, docs: Docs) -> str | None:
    tools = docs.named_in(drop.detail)
    if not tools:
        return None
    return (f"`{tools[0]}` changes nothing a read of the tool set shows, so no task can check it: "
            + say_what_it_changes(docs, tools[0]))


def no_answer(drop: Drop, docs: Docs) -> str | None:
    tools = docs.named_in(drop.detail)
    if not tools:
        return None
    if "none or one" in drop.detail:
        return (f"`{tools[-1]}` returned one result or none for the values drawn, so counting them asks nothing: say "
                f"what each result holds (a name, a date, a status) in its output schema, so a task can ask for it")
    return (f"`{tools[-1]}` returns nothing a user could ask for: give it an output schema that names what it "
            f"returns (a count, a name, a date, a status)")


ADVICE: dict[str, Callable[[Drop, Docs], str | None]] = {
    "unresolvable_list": unresolvable_list,
    "ambiguous_reasoning": ambiguous_reasoning,
    "no_candidate": no_candidate,
    "ambiguous_lookup": ambiguous_lookup,
    "gold_call_error": gold_call_error,
    "policy_rule": policy_rule,
    "boundary_hidden": boundary_hidden,
    "no_state_change": no_state_change,
    "unobservable_write": unobservable_write,
    "no_answer": no_answer,
}


def no_edges(docs: Docs) -> str:
    """Advice for a tool graph without edges: ids one tool returns and another takes."""
    takes = next(((t, p) for t in docs.tools for p in docs.params(t) if is_key_param(p, set())), None)
    if takes is None:
        return ("no tool's output feeds another tool's input: say what each tool returns in an output schema, "
                "with the ids the other tools take (e.g. `order_id`)")
    tool, param = takes
    givers = [t for t in docs.tools if t != tool]
    via = f"`{givers[0]}`" if givers else "a lookup or search"
    return (f"no tool's output feeds another tool's input: `{tool}` takes `{param}`, so say which tool returns it, "
            f"e.g. an output schema on {via} with `{param}` in each result")


def doc_advice(row: dict[str, Any], drops: list[Drop], docs: Docs) -> list[str]:
    """What to change in the doc for one environment of ``v_environment_funnel`` (``row``) that
    yields nothing, from the drops of the stage that came up empty; [] when no advice applies."""
    if row.get("n_verified") or not row.get("n_tools_accepted"):
        return []
    if not row.get("n_edges") and not row.get("n_sequences") and row.get("kind") != "stateless":
        return [no_edges(docs)]
    stage = "sample" if not row.get("n_dags") else "generate" if not row.get("n_generated") else "verify"
    out: list[str] = []
    for drop in sorted((d for d in drops if d.stage == stage), key=lambda d: (-d.n, d.reason)):
        advise = ADVICE.get(drop.reason)
        text = advise(drop, docs) if advise else None
        if text and text not in out:
            out.append(text)
    return out[:3]


def _drops(warehouse: str | None, env_id: str) -> list[Drop]:
    """The drops of one environment's items (its sequences, DAGs, tasks, tools), per stage and reason."""
    rows = query(warehouse, """
        SELECT stage, reason, detail FROM rejections
        WHERE split_part(item_id, '#', 1) IN (
            SELECT seq_id FROM tool_sequences WHERE env_id = :e UNION ALL SELECT dag_id FROM task_dags WHERE env_id = :e
            UNION ALL SELECT task_id FROM tasks WHERE env_id = :e UNION ALL SELECT tool_id FROM tool_code WHERE env_id = :e
            UNION ALL SELECT :e)
        ORDER BY stage, reason, detail""", {"e": env_id}, read_only_check=False)
    counts = Counter((r["stage"], r["reason"]) for r in rows)
    first = {}
    for r in rows:
        first.setdefault((r["stage"], r["reason"]), r["detail"] or "")
    return [Drop(stage, reason, n, first[(stage, reason)]) for (stage, reason), n in counts.items()]


def _docs(warehouse: str | None, env_id: str) -> Docs:
    ids = [r["tool_id"] for r in query(warehouse, "SELECT tool_id FROM tool_code WHERE env_id = :e", {"e": env_id},
                                       read_only_check=False)]
    if not ids:
        return Docs()
    from autoforge.pipeline.corpus import ids_clause

    where, params = ids_clause("tool_id", ids)
    return Docs({s.name: s for s in read_records(warehouse, ToolSpec, where, params, order_by="name")})


def environment_advice(warehouse: str | None, row: dict[str, Any]) -> list[str]:
    """:func:`doc_advice` for one row of ``v_environment_funnel``, read from the warehouse."""
    if row.get("n_verified") or not row.get("n_tools_accepted"):
        return []
    return doc_advice(row, _drops(warehouse, row["env_id"]), _docs(warehouse, row["env_id"]))
