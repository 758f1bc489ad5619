"""The tool graph of one environment: an edge A -> B when an output of A can feed an input of B.

Paper (arXiv 2512.22857, Sec. 3.2; "motivated by AgentScaler"): all tools of an environment
are nodes of a directed graph whose edges an LLM decides from the docs, by whether "the
output of one tool is likely to be a valid input for another tool". Here:

- offline (the default): name/type binding of ``ToolCode.output_schema`` against
  ``ToolCode.parameters``. Every leaf of the output schema gets a dotted path
  (``user_id``, ``orders.*.order_id``); a leaf binds a parameter of the same name and a
  compatible type. With ``keys_only=True`` (default) only identifier parameters bind
  (``*_id``, ``*Id``, ``id``, a primary key or reference field of the state schema in any
  spelling): a user's ``name`` feeding a product search by ``name`` is a name clash, not a
  data flow.
- entity binding (offline and online candidates): real docs rarely name one identifier the
  same way twice (``get_ticket`` returns ``id``, ``close_ticket`` takes ``ticket_id``;
  ``findPetsByStatus`` returns pets, ``getPetById`` takes ``petId``). A leaf binds a
  parameter when both name the identifier of the same entity (:class:`EntityIndex`): the
  leaf is ``id`` of a record of entity E (E from the list or object field holding the
  record, else the tool's collection, else its name), a primary key, a reference field, an
  ``x-ref`` or an ``E_id``-style name; the parameter is ``E_id``/``EId``/``Eid``/``id_E``,
  E's primary key, a reference field to E, the tool's own ``id`` (not on a create: that id
  is new), or a bare ``E`` whose schema says it is an identifier. Types stay compatible.
- state edges (offline and online): a write that no read reaches through data edges gets an
  edge from each read that shows what it changes: a read of the same collection (list the
  articles, then create one), or one whose output names a field the write's collection holds
  (``displayCarStatus`` reports ``fuel_level``, which ``fillFuelTank`` changes). Such an edge
  has no binding (``GraphEdge.kind="state"``): the task checks before it acts.
- online (``client`` not offline): every pair with a same-name binding (keys or not) is
  a *candidate*; the LLM judges the candidates in one structured reply per chunk and only
  accepted edges, with bindings among the candidate ones, are kept.
"""

from __future__ import annotations

import json
import logging
import re
from collections import defaultdict
from typing import Any, Iterable

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field

from autoforge.domain.keys import NUMERIC_TYPES, is_key_param, key_canon, key_fields, leaf, name_tokens, output_paths, param_schemas, value_types
from autoforge.domain.tool_kinds import in_tasks
from autoforge.types import Binding, EnvironmentRecord, GraphEdge, ToolCode, ToolGraph, content_id

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------- entities

# Leading verbs of tool names (``getPetById`` -> pet, ``list_user_orders`` -> user order).
_VERBS = {"get", "find", "list", "search", "fetch", "retrieve", "read", "view", "show", "lookup", "look", "query",
          "create", "add", "new", "insert", "register", "post", "place", "make", "open", "book", "submit", "upload",
          "update", "edit", "modify", "change", "set", "patch", "put", "replace", "delete", "remove", "cancel", "close",
          "resolve", "archive", "all", "my", "current"}
# Verbs of tools that make a new record: an ``id`` they take is the new record's (client-supplied), not one to look up.
_CREATE_VERBS = {"create", "add", "new", "insert", "register", "post", "place", "make", "open", "book", "submit"}
# Output fields that wrap records without naming them (``{"data": [...]}``, ``{"results": [...]}``).
_WRAPPERS = {"data", "result", "results", "items", "item", "records", "record", "entries", "entry", "response", "payload",
             "hits", "rows", "objects", "list", "values", "content", "contents", "matches", "page", "output"}
_ID_WORDS = re.compile(r"\b(?:id|ids|identifier|identifiers|uuid|guid)\b", re.IGNORECASE)


def singular(word: str) -> str:
    w = word.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 4 and w.endswith(("sses", "xes", "ches", "shes", "uses")):
        return w[:-2]
    if len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def entity_word(tokens: list[str]) -> str:
    """The singular entity a list of words names: ``[issue, types]`` -> ``issue_type``."""
    return "_".join(tokens[:-1] + [singular(tokens[-1])]) if tokens else ""


def _id_entity_tokens(name: str) -> list[str] | None:
    """The words before (or after) ``id`` in an identifier name, None when it is not ``E_id``-style."""
    toks = name_tokens(name)
    if len(toks) > 1 and toks[-1] == "id":
        return toks[:-1]
    if len(toks) > 1 and toks[0] == "id":
        return toks[1:]
    return None


def schema_at(schema: dict[str, Any] | None, path: str) -> dict[str, Any]:
    """The sub-schema at a dotted output path (``orders.*.order_id``), {} when absent."""
    cur: Any = schema or {}
    for part in path.split(".") if path else []:
        if not isinstance(cur, dict):
            return {}
        cur = cur.get("items", {}) if part == "*" else (cur.get("properties") or {}).get(part, {})
    return cur if isinstance(cur, dict) else {}


class EntityIndex:
    """Which entity an output leaf or a parameter is the identifier of, from the state schema
    (collections: name, entity, primary key, reference fields) and the names in the docs.

    Entities are singular snake-case words (``pet``, ``issue_type``); a word that names a
    collection (``tickets``, ``ticket``, the ``pet`` of ``pet_id``) maps to its entity, any
    other word stands for itself (``category`` of ``category.id``)."""

    def __init__(self, env: EnvironmentRecord | None):
        cols = env.state_schema.collections if env is not None else []
        self.colls = {c.name: c for c in cols}
        self.by_word: dict[str, str] = {}
        self.pk_owner: dict[str, str] = {}  # key_canon(primary key) -> entity
        self.refs: dict[str, dict[str, str]] = {}  # collection -> key_canon(ref field) -> referenced entity
        refs_any: dict[str, set[str]] = defaultdict(set)
        for c in cols:
            ent = entity_word(name_tokens(c.entity)) or entity_word(name_tokens(c.name))
            words = [entity_word(name_tokens(c.entity)), entity_word(name_tokens(c.name))]
            pk_words = _id_entity_tokens(c.primary_key)
            if pk_words:
                words.append(entity_word(pk_words))
            for w in words:
                if w:
                    self.by_word.setdefault(w, ent)
                    self.by_word.setdefault(w.replace("_", ""), ent)
            self.pk_owner.setdefault(key_canon(c.primary_key), ent)
        for c in cols:
            for f in c.fields:
                if f.ref and f.ref in self.colls:
                    target = self.coll_entity(f.ref)
                    self.refs.setdefault(c.name, {})[key_canon(f.name)] = target
                    refs_any[key_canon(f.name)].add(target)
        self.refs_any = {k: next(iter(v)) for k, v in refs_any.items() if len(v) == 1}

    # -------------------------------------------------------------- words
    def entity(self, tokens: list[str]) -> str:
        w = entity_word(tokens)
        return self.by_word.get(w) or self.by_word.get(w.replace("_", "")) or w

    def known(self, tokens: list[str]) -> bool:
        w = entity_word(tokens)
        return w in self.by_word or w.replace("_", "") in self.by_word

    def coll_entity(self, coll: str) -> str:
        c = self.colls[coll]
        return entity_word(name_tokens(c.entity)) or entity_word(name_tokens(c.name))

    def tool_entity(self, tool: ToolCode) -> str | None:
        """The entity a tool reads or writes: its collection's, else the one its name names."""
        if tool.collection and tool.collection in self.colls:
            return self.coll_entity(tool.collection)
        toks = name_tokens(tool.name)
        if "by" in toks:
            toks = toks[: toks.index("by")]
        while toks and toks[0] in _VERBS:
            toks = toks[1:]
        if not toks:
            return self.entity(name_tokens(tool.collection)) if tool.collection else None
        for n in range(len(toks), 0, -1):  # the longest run of words that names a known entity, last first
            for i in range(len(toks) - n, -1, -1):
                if self.known(toks[i : i + n]):
                    return self.entity(toks[i : i + n])
        return self.entity(toks[-1:])

    def is_create(self, tool: ToolCode) -> bool:
        toks = name_tokens(tool.name)
        return tool.kind == "create" or bool(toks and toks[0] in _CREATE_VERBS)

    # -------------------------------------------------------------- outputs
    def record_entity(self, src: ToolCode, parent: str) -> str | None:
        """The entity of the record at output path ``parent`` ('' = the output itself): the field
        holding it (``tickets.*`` -> ticket, ``category`` -> category; wrappers such as ``data`` or
        ``results`` name nothing), else the tool's."""
        for part in reversed([p for p in parent.split(".") if p] if parent else []):
            if part != "*" and part.lower() not in _WRAPPERS:
                return self.entity(name_tokens(part)) or None
        return self.tool_entity(src)

    def leaf_entity(self, src: ToolCode, path: str) -> tuple[str, str] | None:
        """(entity, why) when the output leaf at ``path`` is the identifier of an entity."""
        name = leaf(path)
        parent = path[: -len(name) - 1] if "." in path else ""
        if name == "*" and parent:  # an item of a list of ids: ``order_ids.*``
            words = _id_entity_tokens(singular(leaf(parent)))
            return (self.entity(words), "item of an id list") if words else None
        xref = schema_at(src.output_schema, path).get("x-ref")
        if isinstance(xref, str) and xref in self.colls:
            return self.coll_entity(xref), f"x-ref {xref}"
        c = key_canon(name)
        if c == "id":
            ent = self.record_entity(src, parent)
            return (ent, f"id of a {ent} record") if ent else None
        if c in self.pk_owner:
            return self.pk_owner[c], "primary key"
        rec = self.record_entity(src, parent)
        coll = next((k for k in self.colls if self.coll_entity(k) == rec), None)
        if coll and c in self.refs.get(coll, {}):
            return self.refs[coll][c], "reference field"
        if c in self.refs_any:
            return self.refs_any[c], "reference field"
        words = _id_entity_tokens(name)
        if words:
            return self.entity(words), "E_id name"
        return None

    # -------------------------------------------------------------- parameters
    def param_entity(self, dst: ToolCode, param: str, schema: dict[str, Any]) -> tuple[str, str] | None:
        """(entity, why) when parameter ``param`` of ``dst`` takes the identifier of an entity."""
        ptypes = value_types(schema)
        if ptypes and not ptypes & {"string", "integer", "number"}:
            return None
        code_name = (dst.arg_map or {}).get(param)
        if code_name and code_name != param and _id_entity_tokens(code_name) and not self.is_create(dst):
            # the synthesizer read ``slug`` as the article's key (autoforge.domain.canonical.natural_keys)
            return self.entity(_id_entity_tokens(code_name)), f"natural key ({code_name})"
        c = key_canon(param)
        if c == "id":
            if self.is_create(dst):
                return None  # the new record's own id, chosen by the caller
            ent = self.tool_entity(dst)
            return (ent, "the tool's own id") if ent else None
        if dst.collection and c in self.refs.get(dst.collection, {}):
            return self.refs[dst.collection][c], "reference field"
        if c in self.pk_owner:
            return self.pk_owner[c], "primary key"
        if c in self.refs_any:
            return self.refs_any[c], "reference field"
        words = _id_entity_tokens(param)
        if words:
            return self.entity(words), "E_id name"
        toks = name_tokens(param)
        if len(toks) == 1 and toks[0].endswith("id") and len(toks[0]) > 3 and toks[0][:-2] in self.by_word:
            return self.by_word[toks[0][:-2]], "Eid name"  # petid
        if toks and self.known(toks) and not schema.get("enum") and self._says_id(self.entity(toks), schema):
            return self.entity(toks), "bare entity name of an id"
        return None

    def _says_id(self, ent: str, schema: dict[str, Any]) -> bool:
        """Does the schema of a parameter named after an entity say it is that entity's identifier?"""
        desc = str(schema.get("description") or "")
        if value_types(schema) == {"integer"} and not desc.strip():
            return True  # an undocumented integer named after an entity (``pet: integer``) is its id
        if schema.get("pattern") or schema.get("format") in ("uuid",):
            return True
        if _ID_WORDS.search(desc):
            return True
        compact = re.sub(r"[^a-z0-9]", "", desc.lower())
        pks = [c.primary_key for c in self.colls.values() if self.coll_entity(c.name) == ent]
        return any(len(k) > 3 and key_canon(k) in compact and key_canon(k) != "id" for k in pks)


def _compatible(out_types: set[str], param_types: set[str]) -> bool:
    if not out_types or not param_types or "unknown" in out_types:
        return True
    if out_types & param_types:
        return True
    return bool(out_types & NUMERIC_TYPES and param_types & NUMERIC_TYPES)


def binding_reasons(src: ToolCode, dst: ToolCode, keys: set[str], *, keys_only: bool = True,
                    index: EntityIndex | None = None) -> list[tuple[Binding, str]]:
    """Bindings of ``src``'s output leaves to ``dst``'s parameters, each with why it binds.

    ``same name``: a leaf of the parameter's name (an identifier when ``keys_only``), except a
    bare ``id`` to an ``id``, which binds only as an entity binding (``category.id`` is not a
    user's ``id``). ``<entity>: <leaf why> -> <param why>``: both name the id of one entity
    (:class:`EntityIndex`; ``index`` None: no entity binding). Types must be compatible."""
    if src.name == dst.name:
        return []
    paths = {p: t for p, t in sorted(output_paths(src.output_schema).items()) if t - {"object", "array"}}
    leaf_ents = {p: index.leaf_entity(src, p) for p in paths} if index is not None else {}
    out: list[tuple[Binding, str]] = []
    for param, pschema in param_schemas(dst).items():
        ptypes = value_types(pschema)
        pent = index.param_entity(dst, param, pschema) if index is not None else None
        seen: set[str] = set()
        if not keys_only or is_key_param(param, keys):
            for path, types in paths.items():
                if leaf(path) == param and param != "id" and _compatible(types, ptypes):
                    out.append((Binding(output_path=path, param=param), "same name"))
                    seen.add(path)
        if pent is None:
            continue
        for path, types in paths.items():
            lent = leaf_ents.get(path)
            if path in seen or lent is None or lent[0] != pent[0] or not _compatible(types, ptypes):
                continue
            out.append((Binding(output_path=path, param=param), f"{pent[0]}: {lent[1]} -> {pent[1]}"))
    return out


def candidate_bindings(src: ToolCode, dst: ToolCode, keys: set[str], *, keys_only: bool,
                       index: EntityIndex | None = None) -> list[Binding]:
    """Bindings of ``src``'s output leaves to ``dst``'s parameters by name and type, and by
    entity when ``index`` is given (see :func:`binding_reasons`)."""
    return [b for b, _ in binding_reasons(src, dst, keys, keys_only=keys_only, index=index)]


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
    """The tool graph of ``env`` over its accepted tools (offline binding or LLM judgement); tools of
    a kind no task calls (a scratchpad, a calculator, a hand-off: :mod:`autoforge.domain.tool_kinds`)
    are not in it, so no walk passes through them."""
    accepted = sorted((t for t in tools if t.env_id == env.env_id and t.status == "accepted" and in_tasks(t.kind)),
                      key=lambda t: t.name)
    keys = key_fields(env)
    index = EntityIndex(env)
    online = client is not None and not getattr(client, "is_offline", True)
    edges: dict[tuple[str, str], list[Binding]] = {}
    for a in accepted:
        for b in accepted:
            found = binding_reasons(a, b, keys, keys_only=keys_only and not online, index=index)
            if found:
                edges[(a.name, b.name)] = [bd for bd, _ in found]
                log.debug("tool_graph %s: %s -> %s: %s", env.env_id, a.name, b.name,
                          "; ".join(f"{bd.output_path} -> {bd.param} ({why})" for bd, why in found))
    method = "offline"
    if online:
        edges = judge_edges(client, accepted, edges) if edges else {}
        method = getattr(client, "name", "llm")
    states = state_edges(env, accepted, edges)
    if online and states:  # the LLM judges the state candidates too
        states = sorted(judge_edges(client, accepted, {pair: [] for pair in states}))
    glist = [GraphEdge(src=s, dst=d, bindings=bs) for (s, d), bs in sorted(edges.items())]
    glist += [GraphEdge(src=s, dst=d, bindings=[], kind="state") for s, d in states]
    names = [t.name for t in accepted]
    return ToolGraph(
        graph_id=content_id("graph", env.env_id, [e.model_dump(exclude={"kind"} if e.kind == "data" else None) for e in glist]),
        env_id=env.env_id, tools=names, edges=glist, method=method, run_id=run_id,
    )


# Words of field names too common to say two tools touch the same thing.
GENERIC_WORDS = {"id", "ids", "status", "mode", "type", "name", "result", "results", "message", "messages", "count",
                 "success", "error", "value", "values", "data", "description", "option", "options", "info", "list",
                 "current", "new", "total", "number", "level", "state", "time", "date", "amount", "details", "detail",
                 "records", "record", "items", "item", "response", "output", "content", "unit", "key", "keys", "true",
                 "false", "flag", "enabled", "updated", "created", "last"}


# Short forms names use for the same word (``dir_id`` and ``current_directory_content``).
ABBREVIATIONS = {"dir": "directory", "repo": "repository", "msg": "message", "qty": "quantity", "addr": "address",
                 "doc": "document", "config": "configuration", "org": "organization", "env": "environment",
                 "img": "image", "pic": "picture", "temp": "temperature", "acct": "account", "txn": "transaction",
                 "cat": "category", "pwd": "password", "usr": "user", "loc": "location", "pkg": "package"}


def _specific_words(name: str) -> frozenset[str]:
    ws = (ABBREVIATIONS.get(w, w) for w in name_tokens(name))
    return frozenset(singular(w) for w in ws if len(w) > 2 and w not in GENERIC_WORDS)


def _shows(read_leaves: set[frozenset[str]], fields: list[frozenset[str]]) -> bool:
    """Does an output leaf name a field: all of the field's specific words are in the leaf's
    (``fuel_level`` shows fuel_level, ``door_status`` shows door, ``current_speed`` not fan_speed)."""
    return any(f and f <= leaf_words for f in fields for leaf_words in read_leaves)


def state_edges(env: EnvironmentRecord, tools: list[ToolCode], edges: dict[tuple[str, str], list[Binding]]) -> list[tuple[str, str]]:
    """(read, write) pairs for writes no read reaches through ``edges``: the read shows what the write changes.

    Same collection (the read lists the records the write changes or adds to), or the read's
    output names a field of the write's collection (:func:`_shows`: by specific words, never by
    generic ones such as ``status`` or ``mode``)."""
    g = nx.DiGraph()
    g.add_nodes_from(t.name for t in tools)
    g.add_edges_from(edges)
    reads = [t for t in tools if t.effect == "read"]
    reached: set[str] = set()
    for r in reads:
        reached |= nx.descendants(g, r.name)
    fields_of = {c.name: [_specific_words(f.name) for f in c.fields] for c in env.state_schema.collections}
    read_leaves = {r.name: {_specific_words(leaf(p)) for p in output_paths(r.output_schema) if leaf(p) != "*"} for r in reads}
    out: list[tuple[str, str]] = []
    for w in sorted((t for t in tools if t.effect == "write" and t.name not in reached), key=lambda t: t.name):
        mine = fields_of.get(w.collection or "", [])
        for r in sorted(reads, key=lambda t: t.name):
            if (r.collection and r.collection == w.collection) or _shows(read_leaves[r.name], mine):
                out.append((r.name, w.name))
    return out


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
