"""A canonical view of a tool set's docs for the offline backend: snake_case names, ids as ``<entity>_id``.

The offline rules (:mod:`autoforge.envs.schema_offline`, :mod:`autoforge.envs.templates`) read
entities from names shaped like ``order_id``. Real docs name the same things ``orderId``,
``assetTag`` (pattern ``^AT\\d{5}$``), ``employeeNumber``, ``customer`` (pattern ``^C-\\d{5}$``),
``heldBy`` or ``trackingNumber``. Paper (arXiv 2512.22857, Sec. 3.1) leaves reading docs to an
LLM; this module is the offline stand-in for that reading, before any rule runs:

* every parameter and output property gets its snake_case name (``weightKg`` -> ``weight_kg``);
* a property whose schema documents an id pattern (:func:`schema_offline.id_pattern`:
  ``^AT\\d{5}$``, ``^PET-\\d{4}$``) is an id: ``asset_tag`` -> ``asset_id``, ``asset_tags``
  -> ``asset_ids``, ``customer`` -> ``customer_id``, ``origin_depot`` -> ``origin_depot_id``;
  when the name does not say which entity (``tracking_number``, ``held_by``), the entity is
  the one most names and tool names with the same pattern point at (``trackShipment``,
  ``cancelShipment`` -> shipment).

Only the synthesizer sees the canonical names. What agents call and what the JSON Schema
validates stays public: the canonical parameter names become the code's Python parameters and
ToolCode.arg_map maps public -> Python, which the runtime applies to every call.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from autoforge.envs import naming as nm
from autoforge.envs.schema_offline import ROLE_PREFIXES, id_pattern
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import ToolSpec

# Last words of a name that say "this is an identifier of the words before me".
ID_WORDS = {"id", "ids", "tag", "tags", "number", "numbers", "num", "no", "code", "codes", "key", "keys", "ref",
            "refs", "reference", "identifier", "handle"}
# First words of such a name that are not an entity: tracking_number is the shipment's id.
NOT_ENTITIES = {"tracking", "serial", "confirmation", "reference", "external", "internal", "public", "short", "unique",
                "lookup", "barcode", "display", "record", "item", "entity", "object", "resource", "primary", "ref"}


def _pattern_of(schema: Any) -> tuple[str, int] | None:
    s = unwrap(schema) if isinstance(schema, dict) else {}
    return id_pattern(s) or (id_pattern(unwrap(s.get("items"))) if isinstance(s.get("items"), dict) else None)


def _strip_role(base: str) -> str:
    for pre in ROLE_PREFIXES:
        if base.startswith(pre) and len(base) > len(pre):
            return base[len(pre):]
    return base


def _name_entity(sp: str) -> tuple[str | None, bool]:
    """(entity the name itself gives, whether it ends with an id word): ``asset_tag`` -> (asset, True),
    ``customer`` -> (customer, False), ``tracking_number`` / ``held_by`` -> (None, ...)."""
    ws = sp.split("_")
    has_id_word = len(ws) > 1 and ws[-1] in ID_WORDS
    base_words = ws[:-1] if has_id_word else ws
    if not base_words or any(w in nm.PREPOSITIONS for w in base_words) or base_words[0] in NOT_ENTITIES:
        return None, has_id_word
    base = _strip_role("_".join(base_words))
    if base.split("_")[0] in NOT_ENTITIES:
        return None, has_id_word
    return nm.singular(base), has_id_word


def _tool_entity(name: str) -> str | None:
    """The entity a tool name is about (``trackShipment`` -> shipment, ``pets.get`` -> pet)."""
    _, rest = nm.verb_of(name)
    head: list[str] = []
    for w in rest:
        if w in nm.PREPOSITIONS:
            break
        head.append(w)
    while head and head[-1] in nm.NAME_SUFFIXES:
        head = head[:-1]
    return nm.singular(head[-1]) if head else None


def _walk(schema: Any, depth: int = 0):
    """Every ``(snake name, schema)`` of an object property, at any depth."""
    s = unwrap(schema) if isinstance(schema, dict) else {}
    if depth > 6:
        return
    for k, v in props(s).items():
        yield nm.snake(k) or k, v
        yield from _walk(v, depth + 1)
    if isinstance(s.get("items"), dict):
        yield from _walk(s["items"], depth + 1)


def pattern_entities(specs: list[ToolSpec]) -> dict[tuple[str, int], str]:
    """Documented id pattern -> the entity its ids belong to (votes from names, then tool names)."""
    votes: dict[tuple[str, int], Counter] = {}
    for spec in specs:
        for schema in (spec.parameters, spec.output_schema):
            for sp, v in _walk(schema):
                pat = _pattern_of(v)
                if pat is None:
                    continue
                ent, id_word = _name_entity(sp[:-4] if sp.endswith("_ids") else sp[:-3] if sp.endswith("_id") else sp)
                box = votes.setdefault(pat, Counter())
                if ent:
                    box[ent] += 2 if (id_word or sp.endswith(("_id", "_ids"))) else 1
    for spec in specs:  # a tool taking one id of a pattern is about that pattern's entity
        pats = [p for p in (_pattern_of(v) for v in props(spec.parameters).values()) if p]
        ent = _tool_entity(spec.name)
        if len(pats) == 1 and ent:
            votes.setdefault(pats[0], Counter())[ent] += 1
    return {pat: box.most_common(1)[0][0] for pat, box in votes.items() if box}


def canonical_name(name: str, schema: Any, entities: dict[tuple[str, int], str]) -> str:
    """The canonical (snake_case, ``<entity>_id``) name of one property."""
    sp = nm.snake(name) or name
    pat = _pattern_of(schema)
    if pat is None or sp.endswith(("_id", "_ids")) or sp == "id":
        return sp
    many = (unwrap(schema) if isinstance(schema, dict) else {}).get("type") == "array" or (
        sp.split("_")[-1] in ID_WORDS and sp.endswith("s"))
    suffix = "_ids" if many else "_id"
    ent, id_word = _name_entity(sp)
    if ent:
        words = sp.split("_")[:-1] if id_word else sp.split("_")
        base = "_".join(words)
        return (nm.singular(base) if many else base) + suffix
    winner = entities.get(pat)
    return f"{winner}{suffix}" if winner else f"{sp}{suffix}"


def _rename_object(schema: dict, entities: dict, deep: bool) -> tuple[dict, dict[str, str]]:
    """``schema`` with canonical property names (and ``required``), and public -> canonical."""
    properties = props(schema)
    if not properties:
        return schema, {}
    renames: dict[str, str] = {}
    used: set[str] = set()
    for k, v in properties.items():  # names already canonical keep them; the others avoid them
        c = canonical_name(k, v, entities)
        if c == k:
            used.add(c)
    for k, v in properties.items():
        c = canonical_name(k, v, entities)
        if c != k:
            base, n = c, 2
            while c in used:
                c, n = f"{base}_{n}", n + 1
            used.add(c)
        renames[k] = c
    new_props = {}
    for k, v in properties.items():
        new_props[renames[k]] = canonical_schema(v, entities) if deep else v
    out = {**schema, "properties": new_props}
    if isinstance(schema.get("required"), list):
        out["required"] = [renames.get(r, r) for r in schema["required"]]
    return out, renames


def canonical_schema(schema: Any, entities: dict, depth: int = 0) -> Any:
    """An output schema with canonical property names at every depth."""
    if not isinstance(schema, dict) or depth > 8:
        return schema
    s = unwrap(schema)
    if props(s):
        out, _ = _rename_object(s, entities, deep=True)
        return out
    if isinstance(s.get("items"), dict):
        return {**s, "items": canonical_schema(s["items"], entities, depth + 1)}
    return s


def canonical_specs(specs: list[ToolSpec]) -> tuple[list[ToolSpec], dict[str, dict[str, str]]]:
    """The tool set as the offline rules read it, and per tool its public -> canonical parameter names.

    Parameters are renamed at the top level only (nested objects are values the code stores as
    given); output schemas at every depth (they describe the records)."""
    entities = pattern_entities(specs)
    out: list[ToolSpec] = []
    renames: dict[str, dict[str, str]] = {}
    for spec in specs:
        params, names = _rename_object(spec.parameters or {"type": "object"}, entities, deep=False)
        output = canonical_schema(spec.output_schema, entities) if spec.output_schema else spec.output_schema
        renames[spec.name] = names
        out.append(spec.model_copy(update={"parameters": params, "output_schema": output}))
    return out, renames
