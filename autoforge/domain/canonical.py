"""A canonical view of a tool set's docs for the offline backend: snake_case names, ids as ``<entity>_id``.

The offline rules (:mod:`autoforge.domain.state`, the code templates of :mod:`autoforge.envs.code`) read
entities from names shaped like ``order_id``. Real docs name the same things ``orderId``,
``assetTag`` (pattern ``^AT\\d{5}$``), ``employeeNumber``, ``customer`` (pattern ``^C-\\d{5}$``),
``heldBy`` or ``trackingNumber``. Paper (arXiv 2512.22857, Sec. 3.1) leaves reading docs to an
LLM; this module is the offline stand-in for that reading, before any rule runs:

* every parameter and output property gets its snake_case name (``weightKg`` -> ``weight_kg``);
* a property whose schema documents an id pattern (:func:`autoforge.domain.ids.id_pattern`:
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

from autoforge.domain import words as nm
from autoforge.domain.ids import id_pattern, ROLE_PREFIXES
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


def _head_words(name: str, suffixes: set[str] = nm.NAME_SUFFIXES) -> list[str]:
    """The words of a tool name after its verb and before any preposition, less trailing ``suffixes``."""
    _, rest = nm.verb_of(name)
    head: list[str] = []
    for w in rest:
        if w in nm.PREPOSITIONS:
            break
        head.append(w)
    while head and head[-1] in suffixes:
        head = head[:-1]
    return head


def _tool_entity(name: str) -> str | None:
    """The entity a tool name is about (``trackShipment`` -> shipment, ``pets.get`` -> pet)."""
    head = _head_words(name)
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


# --------------------------------------------------------------------------- natural keys
#
# Real docs often select a record by a key that is not called an id: an article by its ``slug``,
# a stored memory by its ``key``, a user by ``username``, a stock by ``symbol``, an issue by
# ``issue_number``. Such a parameter is the entity's natural key when the tools about one entity
# (read from the tool name) take it as a required scalar, more than one tool does, and nothing
# about that entity carries an id of its own. The canonical view renames it ``<entity>_id``, so
# the offline rules key the records by it (``DeleteArticle(slug)`` deletes the article whose key
# is ``slug``, not a new record) and the tool graph binds it by entity.

KEY_WORDS = {"key", "slug", "username", "handle", "symbol", "ticker", "sku", "code", "number", "name", "path",
             "filename", "login"}
# Parameters that never key a record, whatever their last word says.
NOT_KEYS = nm.PAGING_PARAMS | nm.SORT_PARAMS | nm.QUERY_PARAMS | {"first_name", "last_name", "full_name",
                                                                  "display_name", "phone_number", "card_number"}


def tool_subject(name: str) -> str | None:
    """The entity a tool name is about, all head words joined: ``core_memory_add`` -> core_memory,
    ``GetArticleComments`` -> article_comment, ``FollowUserByUsername`` -> user."""
    head = _head_words(name, nm.NAME_SUFFIXES | {"key", "keys"})
    return nm.singular("_".join(head)) if head else None


def _key_word(sp: str) -> tuple[str | None, bool]:
    """(entity the key's own words name, whether it reads as a key): ``file_name`` -> (file, True),
    ``username`` -> (user, True), ``slug`` -> (None, True), ``content`` -> (None, False)."""
    if sp in NOT_KEYS or sp.endswith(("_id", "_ids")) or sp == "id":
        return None, False
    if sp == "username" or sp == "user_name":
        return "user", True
    ws = sp.split("_")
    if ws[-1] not in KEY_WORDS:
        return None, False
    base = "_".join(ws[:-1])
    return (nm.singular(base) if base and base.split("_")[0] not in NOT_ENTITIES else None), True


def natural_keys(specs: list[ToolSpec]) -> dict[tuple[str, str], str]:
    """``(tool name, parameter)`` -> the entity whose natural key the parameter is (see above)."""
    votes: dict[str, Counter] = {}  # snake param -> entity -> tools taking it
    changes: dict[str, set[str]] = {}  # snake param -> entities a non-create tool selects by it
    own_ids: set[str] = set()
    subjects: dict[str, str | None] = {}
    for spec in specs:
        subj = subjects[spec.name] = tool_subject(spec.name)
        params = props(spec.parameters)
        required = set((spec.parameters or {}).get("required") or [])
        for p in params:
            sp = nm.snake(p) or p
            if sp == "id" and subj and p in required:  # an optional ``id`` is a body field (createUser)
                own_ids.add(subj)
            elif sp.endswith("_id"):
                own_ids.add(nm.singular(_strip_role(sp[:-3])))
        verb, _ = nm.verb_of(spec.name)
        for p in required & set(params):
            v = unwrap(params[p]) if isinstance(params[p], dict) else {}
            if v.get("type") not in ("string", "integer", "number") or v.get("enum") or _pattern_of(v):
                continue
            sp = nm.snake(p) or p
            own, is_key = _key_word(sp)
            ent = own or subj
            if not is_key or not ent:
                continue
            votes.setdefault(sp, Counter())[ent] += 1
            if verb not in nm.CREATE_VERBS:
                changes.setdefault(sp, set()).add(ent)
    keyed: dict[str, list[str]] = {}
    for sp, box in votes.items():
        for ent, n in box.most_common():
            if n >= 2 and ent not in own_ids and ent in changes.get(sp, set()):
                keyed.setdefault(sp, []).append(ent)
        # an entity whose name holds another keyed one's refers to it (article_favorite -> article)
        ents = keyed.get(sp, [])
        keyed[sp] = [e for e in ents if not any(o != e and (e.startswith(o + "_") or e.endswith("_" + o)) for o in ents)]
    out: dict[tuple[str, str], str] = {}
    for spec in specs:
        subj = subjects[spec.name]
        for p in props(spec.parameters):
            sp = nm.snake(p) or p
            ents = keyed.get(sp) or []
            if not ents:
                continue
            if subj in ents:
                out[(spec.name, p)] = subj
                continue
            related = [e for e in ents if subj and (subj.startswith(e + "_") or subj.endswith("_" + e))]
            if len(related) == 1 or len(ents) == 1:
                out[(spec.name, p)] = (related or ents)[0]  # a reference: the comment's article
    return out


def _rename_keys(schema: Any, names: dict[str, str], depth: int = 0) -> Any:
    """An output schema with natural keys named ``<entity>_id`` in records that have no id of their own."""
    if not isinstance(schema, dict) or depth > 8:
        return schema
    s = unwrap(schema)
    properties = props(s)
    if properties:
        new: dict[str, Any] = {}
        taken = set(properties)
        has_id = "id" in taken
        for k, v in properties.items():
            sp = nm.snake(k) or k
            target = names.get(sp)
            if target and not has_id and target not in taken:
                new[target] = v
            else:
                new[k] = _rename_keys(v, names, depth + 1)
        out = {**s, "properties": new}
        if isinstance(s.get("required"), list):
            out["required"] = [names.get(nm.snake(r) or r, r) if names.get(nm.snake(r) or r) in new else r
                               for r in s["required"]]
        return out
    if isinstance(s.get("items"), dict):
        return {**s, "items": _rename_keys(s["items"], names, depth + 1)}
    return s


def canonical_specs(specs: list[ToolSpec]) -> tuple[list[ToolSpec], dict[str, dict[str, str]]]:
    """The tool set as the offline rules read it, and per tool its public -> canonical parameter names.

    Parameters are renamed at the top level only (nested objects are values the code stores as
    given); output schemas at every depth (they describe the records)."""
    entities = pattern_entities(specs)
    naturals = natural_keys(specs)
    out: list[ToolSpec] = []
    renames: dict[str, dict[str, str]] = {}
    for public in specs:
        spec, keys = _with_natural_keys(public, {p: f"{e}_id" for (t, p), e in naturals.items() if t == public.name})
        params, names = _rename_object(spec.parameters or {"type": "object"}, entities, deep=False)
        output = canonical_schema(spec.output_schema, entities) if spec.output_schema else spec.output_schema
        renames[spec.name] = {p: names.get(keys.get(p, p), keys.get(p, p)) for p in props(public.parameters)}
        out.append(spec.model_copy(update={"parameters": params, "output_schema": output}))
    return out, renames


def _with_natural_keys(spec: ToolSpec, keys: dict[str, str]) -> tuple[ToolSpec, dict[str, str]]:
    """``spec`` with its natural-key parameters (public name -> ``<entity>_id``) renamed, in the
    parameters and in the records its output schema describes; and the renames made."""
    if not keys:
        return spec, {}
    params = spec.parameters or {"type": "object"}
    properties = props(params)
    taken = set(properties)
    keys = {p: c for p, c in keys.items() if c not in taken}
    new_props = {keys.get(k, k): v for k, v in properties.items()}
    new_params = {**params, "properties": new_props}
    if isinstance(params.get("required"), list):
        new_params["required"] = [keys.get(r, r) for r in params["required"]]
    names = {nm.snake(p) or p: c for p, c in keys.items()}
    names.update({nm.plural(k): f"{c}s" for k, c in list(names.items())})  # ``keys: [..]`` lists the keys
    output = _rename_keys(spec.output_schema, names) if spec.output_schema else spec.output_schema
    return spec.model_copy(update={"parameters": new_params, "output_schema": output}), keys
