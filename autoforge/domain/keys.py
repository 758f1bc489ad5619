"""Identifiers and tool signatures as the docs spell them: which parameters are keys, what a tool's
output holds, and one spelling of an identifier name.

Read by the tool graph (:mod:`autoforge.dags.graph`: which output can feed which input), by DAG
building and task generation and verification (which arguments must be bound to something the
user was told or an earlier call returned) and by synthesis' reachability checks
(:mod:`autoforge.pipeline.synthesize`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from autoforge.types import EnvironmentRecord, ToolCode

NUMERIC_TYPES = {"integer", "number"}
# Entities that are people: a task's user is one of them ("me"); their identifiers and the
# details they are looked up by (email, phone) are the user's own, known but not volunteered.
PERSON = {"user", "customer", "member", "patient", "employee", "passenger", "guest", "client", "contact", "student",
          "owner", "driver", "author", "agent", "person", "traveler", "traveller", "applicant", "tenant", "account", "staff"}


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


_CAMEL_ID = re.compile(r"[a-z0-9](?:Id|ID)$")


def is_key_param(name: str, keys: set[str]) -> bool:
    """An identifier name: ``id``, ``*_id``, camelCase ``*Id``/``*ID``, or a key field of ``keys``
    in any spelling (``petId``, ``PetID``, ``petid`` and ``id_pet`` all spell ``pet_id``)."""
    if name == "id" or name.lower().endswith("_id") or name in keys or _CAMEL_ID.search(name):
        return True
    c = key_canon(name)
    return any(key_canon(k) == c for k in keys)


_TOKEN = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def name_tokens(name: str) -> list[str]:
    """Lower-case words of an identifier in any style: ``getPetById`` -> get pet by id, ``userID`` -> user id."""
    return [t.lower() for part in re.split(r"[^A-Za-z0-9]+", name or "") for t in _TOKEN.findall(part)]


@lru_cache(maxsize=4096)
def key_canon(name: str) -> str:
    """One spelling of an identifier name: ``pet_id``, ``petId``, ``PetID``, ``petid``, ``id_pet`` -> ``petid``."""
    toks = name_tokens(name)
    if len(toks) > 1 and toks[0] == "id":
        toks = toks[1:] + ["id"]
    return "".join(toks)
