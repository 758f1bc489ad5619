"""The tool graph of one environment: an edge A -> B when an output of A can feed an input of B.

Paper (arXiv 2512.22857, Sec. 3.2; "motivated by AgentScaler"): all tools of an environment
are nodes of a directed graph whose edges an LLM decides from the docs, by whether "the
output of one tool is likely to be a valid input for another tool". Here:

- offline (the default): name/type binding of ``ToolCode.output_schema`` against
  ``ToolCode.parameters``. Every leaf of the output schema gets a dotted path
  (``user_id``, ``orders.*.order_id``); a leaf binds a parameter of the same name and a
  compatible type. With ``keys_only=True`` (default) only identifier parameters bind
  (``*_id``, ``id``, a primary key or reference field of the state schema): a user's
  ``name`` feeding a product search by ``name`` is a name clash, not a data flow.
- online (``client`` not offline): every pair with a same-name binding (keys or not) is
  a *candidate*; the LLM judges the candidates in one structured reply per chunk and only
  accepted edges, with bindings among the candidate ones, are kept.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any, Iterable

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field

from autoforge.types import Binding, EnvironmentRecord, GraphEdge, ToolCode, ToolGraph, content_id

log = logging.getLogger(__name__)

_NUMERIC = {"integer", "number"}
# Entities that are people: a task's user is one of them ("me"); their identifiers and the
# details they are looked up by (email, phone) are the user's own, known but not volunteered.
PERSON = {"user", "customer", "member", "patient", "employee", "passenger", "guest", "client", "contact", "student",
          "owner", "driver", "author", "agent", "person", "traveler", "traveller", "applicant", "tenant", "account", "staff"}


# --------------------------------------------------------------------------- schema helpers


def value_types(schema: dict[str, Any]) -> set[str]:
    t = schema.get("type")
    if isinstance(t, list):
        return {x for x in t if x != "null"}
    if isinstance(t, str):
        return {t}
    for alt in schema.get("anyOf", []) + schema.get("oneOf", []):
        if isinstance(alt, dict):
            return value_types(alt)
    return set()


def output_paths(schema: dict[str, Any] | None, prefix: str = "", depth: int = 0) -> dict[str, set[str]]:
    """Every scalar leaf of an output JSON Schema as ``{dotted path: types}``.

    Objects add ``.field``, arrays add ``.*``: ``{"orders": [{"order_id": ..}]}`` gives
    ``orders.*.order_id``. Objects and arrays themselves are listed too (type object/array)
    so that reasoning nodes can find lists of records.
    """
    out: dict[str, set[str]] = {}
    if not isinstance(schema, dict) or depth > 4:
        return out
    types = value_types(schema)
    props = schema.get("properties")
    if isinstance(props, dict) and ("object" in types or not types):
        for name, sub in props.items():
            path = f"{prefix}.{name}" if prefix else name
            sub = sub if isinstance(sub, dict) else {}
            out[path] = value_types(sub) or {"unknown"}
            out.update(output_paths(sub, path, depth + 1))
    elif "array" in types and isinstance(schema.get("items"), dict):
        path = f"{prefix}.*" if prefix else "*"
        sub = schema["items"]
        out[path] = value_types(sub) or {"unknown"}
        out.update(output_paths(sub, path, depth + 1))
    return out


def leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def param_schemas(tool: ToolCode) -> dict[str, dict[str, Any]]:
    props = (tool.parameters or {}).get("properties") or {}
    return {k: (v if isinstance(v, dict) else {}) for k, v in props.items()}


def required_params(tool: ToolCode) -> list[str]:
    req = (tool.parameters or {}).get("required") or []
    props = param_schemas(tool)
    return [p for p in req if p in props] + [p for p in req if p not in props]


def key_fields(env: EnvironmentRecord | None) -> set[str]:
    """Identifier names of a state schema: primary keys and reference (foreign-key) fields."""
    if env is None:
        return set()
    out = set()
    for c in env.state_schema.collections:
        out.add(c.primary_key)
        out.update(f.name for f in c.fields if f.ref)
    return out


def is_key_param(name: str, keys: set[str]) -> bool:
    return name == "id" or name.endswith("_id") or name in keys


def _compatible(out_types: set[str], param_types: set[str]) -> bool:
    if not out_types or not param_types or "unknown" in out_types:
        return True
    if out_types & param_types:
        return True
    return bool(out_types & _NUMERIC and param_types & _NUMERIC)


def candidate_bindings(src: ToolCode, dst: ToolCode, keys: set[str], *, keys_only: bool) -> list[Binding]:
    """Bindings of ``src``'s output leaves to ``dst``'s parameters by name and type."""
    if src.name == dst.name:
        return []
    paths = output_paths(src.output_schema)
    out = []
    for param, pschema in param_schemas(dst).items():
        if keys_only and not is_key_param(param, keys):
            continue
        for path, types in sorted(paths.items()):
            if leaf(path) == param and types - {"object", "array"} and _compatible(types, value_types(pschema)):
                out.append(Binding(output_path=path, param=param))
    return out


# --------------------------------------------------------------------------- LLM judgement


class EdgeVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    src: str
    dst: str
    valid: bool = Field(description="true when an output of src is likely a valid input of dst")
    bindings: list[Binding] = Field(default_factory=list, description="which output path feeds which parameter")


class EdgeJudgement(BaseModel):
    """The structured reply the LLM gives for a chunk of candidate edges."""

    model_config = ConfigDict(extra="forbid")
    edges: list[EdgeVerdict]


_EDGE_SYSTEM = (
    "You build a tool dependency graph for a simulated environment. For each candidate pair "
    "(src -> dst), decide whether an output of src is likely a valid input for dst, and list the "
    "bindings (output_path of src -> param of dst) that make sense. Reply with JSON only."
)


def _tool_brief(t: ToolCode) -> dict[str, Any]:
    return {"name": t.name, "effect": t.effect, "collection": t.collection,
            "parameters": t.parameters, "output_schema": t.output_schema}


def judge_edges(client: Any, tools: list[ToolCode], candidates: dict[tuple[str, str], list[Binding]],
                *, chunk: int = 40) -> dict[tuple[str, str], list[Binding]]:
    """Ask the LLM to accept or reject each candidate edge (``client.structured``, step ``tool_graph``)."""
    by_name = {t.name: t for t in tools}
    accepted: dict[tuple[str, str], list[Binding]] = {}
    pairs = sorted(candidates)
    for i in range(0, len(pairs), chunk):
        part = pairs[i : i + chunk]
        involved = sorted({n for p in part for n in p})
        payload = {
            "tools": [_tool_brief(by_name[n]) for n in involved],
            "candidates": [{"src": s, "dst": d, "bindings": [b.model_dump() for b in candidates[(s, d)]]} for s, d in part],
        }
        messages = [{"role": "system", "content": _EDGE_SYSTEM},
                    {"role": "user", "content": json.dumps(payload, sort_keys=True)}]
        reply: EdgeJudgement = client.structured("tool_graph", messages, EdgeJudgement)
        allowed = set(part)
        for v in reply.edges:
            key = (v.src, v.dst)
            if key not in allowed:
                log.warning("tool_graph: LLM judged %s -> %s, which was not a candidate; ignored", v.src, v.dst)
                continue
            if not v.valid:
                continue
            cand = {(b.output_path, b.param) for b in candidates[key]}
            chosen = [b for b in v.bindings if (b.output_path, b.param) in cand] or list(candidates[key])
            accepted[key] = chosen
    return accepted


# --------------------------------------------------------------------------- graph


def build_graph(env: EnvironmentRecord, tools: Iterable[ToolCode], client: Any = None, *,
                keys_only: bool = True, run_id: str | None = None) -> ToolGraph:
    """The tool graph of ``env`` over its accepted tools (offline binding or LLM judgement)."""
    accepted = sorted((t for t in tools if t.env_id == env.env_id and t.status == "accepted"), key=lambda t: t.name)
    keys = key_fields(env)
    online = client is not None and not getattr(client, "is_offline", True)
    edges: dict[tuple[str, str], list[Binding]] = {}
    for a in accepted:
        for b in accepted:
            bs = candidate_bindings(a, b, keys, keys_only=keys_only and not online)
            if bs:
                edges[(a.name, b.name)] = bs
    method = "offline"
    if online:
        edges = judge_edges(client, accepted, edges) if edges else {}
        method = getattr(client, "name", "llm")
    glist = [GraphEdge(src=s, dst=d, bindings=bs) for (s, d), bs in sorted(edges.items())]
    names = [t.name for t in accepted]
    return ToolGraph(
        graph_id=content_id("graph", env.env_id, [e.model_dump() for e in glist]),
        env_id=env.env_id, tools=names, edges=glist, method=method, run_id=run_id,
    )


def build_graphs(envs: Iterable[EnvironmentRecord], tools: Iterable[ToolCode], client: Any = None, *,
                 keys_only: bool = True, run_id: str | None = None) -> list[ToolGraph]:
    """One graph per environment (``tools`` may hold the tools of many environments)."""
    by_env: dict[str, list[ToolCode]] = defaultdict(list)
    for t in tools:
        by_env[t.env_id].append(t)
    return [build_graph(e, by_env.get(e.env_id, []), client, keys_only=keys_only, run_id=run_id) for e in envs]


def to_networkx(graph: ToolGraph) -> nx.DiGraph:
    """The graph as a networkx DiGraph; each edge carries ``bindings`` (list of Binding)."""
    g = nx.DiGraph()
    g.add_nodes_from(graph.tools)
    for e in graph.edges:
        g.add_edge(e.src, e.dst, bindings=list(e.bindings))
    return g
