"""Templates of the tools that change one record: create, update (and flags), status changes, delete."""

from __future__ import annotations

from autoforge.domain import words as nm
from autoforge.domain.coherence import schema_links
from autoforge.domain.ids import is_integer_ids
from autoforge.domain.outputs import said_status
from autoforge.domain.statuses import status_words
from autoforge.domain.tools import ACTION_VERBS, TOGGLE_VERBS
from autoforge.envs.code.base import Code, lit, record_schema, STOCK_FIELDS, TOTAL_FIELDS
from autoforge.envs.code.context import Ctx
from autoforge.envs.code.reads import t_get, t_list
from autoforge.tooldocs.schema import json_type
from autoforge.types import CollectionSpec, FieldSpec


def _default_value(f: FieldSpec, coll: CollectionSpec, said: str | None = None) -> str:
    if f.name == "status" and f.enum:
        # the status the create's prose gives the new record ("Returns the booked lesson") first
        initial = said if said in f.enum else next((s for s in nm.INITIAL_STATUSES if s in f.enum), f.enum[0])
        return lit(initial)
    if f.enum:
        return lit(f.enum[0])
    if f.name in ("created_at", "updated_at", "submitted_at", "requested_at", "booked_at", "placed_at", "opened_at"):
        return "NOW" if f.format != "date" else "TODAY"
    if f.name in ("created_on", "created_date", "date_created", "opened_on"):
        return "TODAY"
    return {"array": "[]", "object": "{}", "boolean": "False", "integer": "0" if not f.ref else "None",
            "number": "0"}.get(f.type, "None")


def t_create(x: Ctx) -> tuple[str, dict]:
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    coll = x.coll
    pk = coll.primary_key
    # the new record's own id, chosen by the caller: optional in a body (addPet's ``id``) or a
    # required natural key (``core_memory_add(key)``, read as core_memory_id)
    client = next((p for p in x.params if nm.snake(p) in ("id", pk) and (p not in x.required or nm.snake(p) == pk)), None)
    skip = {client} if client else set()
    x.emit_ref_checks(c, skip=skip)
    if client:  # the request body may carry the new record's id: a taken one is refused
        cv = x.v(client)
        c(f"if {cv} is not None and {x.key(cv, coll)} in {x.db}.get({coll.name!r}, {{}}):")
        c(f"    return {{'error': {coll.entity.replace('_', ' ') + ' '!r} + str({cv}) + ' already exists'}}")
    # unique fields (email, username ...) may not repeat
    for p in x.params:
        f = x.field_for(p)
        if f in ("email", "username", "user_name", "sku", "slug", "handle", "login", "code", "phone"):
            v = x.v(p)
            c(f"for existing in {x.db}.get({coll.name!r}, {{}}).values():")
            c(f"    if {v} is not None and str(existing.get({f!r}, '')).lower() == str({v}).lower():")
            c(f"        return {{'error': 'a {coll.entity.replace('_', ' ')} with {f} ' + str({v}) + ' already exists'}}")
    qty = next((p for p in x.params if nm.snake(p) in ("quantity", "qty", "seats", "passengers", "num_seats", "guests", "num_guests", "tickets", "count", "units", "nights")), None)
    qty_v = f"({x.v(qty)} if {x.v(qty)} is not None else 1)" if qty else "1"
    # referenced records with stock/seats: check and decrement; price x quantity feeds the total
    priced = None
    for p, rcoll in x.ref_params(skip=skip):
        rf = {f.name: f for f in rcoll.fields}
        stock = next((s for s in STOCK_FIELDS if s in rf and rf[s].type in ("integer", "number")), None)
        if "price" in rf and priced is None:
            priced = (p, rcoll)
        if stock:
            v = x.v(p)
            c(f"if {v} is not None:")
            c(f"    ref_record = {x.db}[{rcoll.name!r}][{x.key(v, rcoll)}]")
            c(f"    if (ref_record.get({stock!r}) or 0) < {qty_v}:")
            c(f"        return {{'error': 'not enough {stock.replace('_', ' ')} for {rcoll.entity.replace('_', ' ')} ' + str({v}) + ': ' + str(ref_record.get({stock!r}) or 0) + ' left'}}")
    if qty and json_type(x.params[qty]) in ("integer", "number"):
        c(f"if {x.v(qty)} is not None and {x.v(qty)} <= 0:")
        c(f"    return {{'error': '{nm.snake(qty)} must be positive'}}")
    if client:
        c(f"new_id = {x.key(x.v(client), coll)} if {x.v(client)} is not None else {x.next_id(coll)}")
    else:
        c(f"new_id = {x.next_id(coll)}")
    c("record = {")
    said = said_status(x.spec.description, next((f.enum for f in coll.fields if f.name == "status" and f.enum), []))
    given = {x.field_for(p): p for p in x.params if x.field_for(p) and p != client}
    for f in coll.fields:
        if f.name == pk:
            c(f"    {pk!r}: {'int(new_id)' if is_integer_ids(coll) else 'new_id'},")
        elif f.name in given:
            p = given[f.name]
            dv = _default_value(f, coll, said)
            plain = p in x.required or dv == "None"
            c(f"    {f.name!r}: {x.v(p)}," if plain else f"    {f.name!r}: {x.v(p)} if {x.v(p)} is not None else {dv},")
        else:
            c(f"    {f.name!r}: {_default_value(f, coll, said)},")
    c("}")
    for p in x.params:  # parameters that name no field are kept on the record too
        if not x.field_for(p) and nm.snake(p) not in nm.PAGING_PARAMS and p != client:
            c(f"if {x.v(p)} is not None:")
            c(f"    record[{nm.snake(p)!r}] = {x.v(p)}")
    total = next((t for t in TOTAL_FIELDS if t in x.fields and t not in given and x.fields[t].type in ("number", "integer")), None)
    if priced and total and total != "price":
        p, rcoll = priced
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{total!r}] = round(({x.db}[{rcoll.name!r}][{x.key(x.v(p), rcoll)}].get('price') or 0) * {qty_v}, 2)")
    for p, rcoll in x.ref_params(skip=skip):
        rf = {f.name: f for f in rcoll.fields}
        stock = next((s for s in STOCK_FIELDS if s in rf and rf[s].type in ("integer", "number")), None)
        if stock:
            k = x.key(x.v(p), rcoll)
            c(f"if {x.v(p)} is not None:")
            c(f"    {x.db}[{rcoll.name!r}][{k}][{stock!r}] = ({x.db}[{rcoll.name!r}][{k}].get({stock!r}) or 0) - {qty_v}")
    if "status" in x.fields:
        x.emit_rule_effects(c)
    c(f"{x.table()}[new_id] = record")
    _emit_listings(x, c, "append")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(coll)


def _emit_listings(x: Ctx, c: Code, how: str) -> None:
    """Keep the parents' id lists the inverse of the references (:mod:`autoforge.domain.coherence`):
    a new order joins its user's ``order_ids`` (``how="append"``), a deleted one leaves it ("remove")."""
    by_name = {cc.name: cc for cc in x.schema.collections}
    for link in schema_links(x.schema):
        if link.child != x.coll.name or link.listing is None:
            continue
        pcoll = by_name[link.parent]
        c(f"parent = {x.db}.get({pcoll.name!r}, {{}}).get({x.key(f'record.get({link.back!r})', pcoll)})")
        c(f"if isinstance(parent, dict) and isinstance(parent.get({link.listing!r}), list):")
        if how == "append":
            c(f"    parent[{link.listing!r}].append(record.get({x.coll.primary_key!r}))")
        else:
            c(f"    parent[{link.listing!r}] = [i for i in parent[{link.listing!r}] if i != record.get({x.coll.primary_key!r})]")


OFF_WORDS = {"logout": "login", "log_out": "login", "signout": "signin", "logoff": "logon"}


def verb_flag(x: Ctx) -> tuple[list[str], bool] | None:
    """The boolean field a data-less write's verb names, and the value it sets: ``message_login`` ->
    ``login_status`` = True, ``follow_user`` -> ``profile.following`` = True, ``unfavorite`` ->
    ``favorited`` = False (one level of nesting is looked into)."""
    for w in nm.words(x.spec.name):
        on = True
        if w in OFF_WORDS:
            w, on = OFF_WORDS[w], False
        elif w.startswith("un") and len(w) > 5:
            w, on = w[2:], False
        stems = [w, w[:-1]] if w.endswith("e") else [w, w + w[-1]]
        names = {w + "_status", "is_" + w + "ed", w + "_enabled", "logged_in" if w == "login" else ""} | {
            st + suf for st in stems for suf in ("ed", "d", "ing")}
        names.discard("")
        for f in x.coll.fields:
            if f.type == "boolean" and f.name in names:
                return [f.name], on
        for f in x.coll.fields:
            if f.type == "object" and isinstance(f.properties, dict):
                for k, v in f.properties.items():
                    if nm.snake(k) in names and isinstance(v, dict) and v.get("type") == "boolean":
                        return [f.name, k], on
    return None


def _emit_flag(x: Ctx, c: Code, path: list[str], on: bool) -> None:
    holder = "record" if len(path) == 1 else "target"
    if len(path) == 2:
        c(f"target = record.get({path[0]!r})")
        c("if not isinstance(target, dict):")
        c(f"    target = record[{path[0]!r}] = {{}}")
    c(f"if {holder}.get({path[-1]!r}) is {on}:")
    c(f"    return {{'error': {x.coll.entity.replace('_', ' ') + ' '!r} + str(record.get({x.coll.primary_key!r})) + "
      f"' already has {path[-1].replace('_', ' ')} = {str(on).lower()}'}}")
    c(f"{holder}[{path[-1]!r}] = {on}")


def t_update(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if pk is None:
        return t_create(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    x.emit_ref_checks(c, skip={pk})
    if x.allowed_from(None) and (status_words(x.spec.description) or x.source_rule(None)[0] is not None):
        # only a precondition the prose states ("Only pending orders can be edited"): an edit of a
        # closed ticket the docs do not forbid is allowed, as a delete is
        x.emit_status_precondition(c, "updated", None)
    scope = scope_params(x, pk)
    for p, f in scope.items():  # update_item_quantity(order_id, item_id, quantity): the item must be in that order
        c(f"if {x.v(p)} is not None and str(record.get({f!r})) != str({x.v(p)}):")
        c(f"    return {{'error': {x.coll.entity.replace('_', ' ') + ' '!r} + str({x.v(pk)}) + ' is not in "
          f"{nm.snake(p)[:-3].replace('_', ' ')} ' + str({x.v(p)})}}")
    sets = [(p, x.field_for(p) or nm.snake(p)) for p in x.params
            if p != pk and p not in scope and nm.snake(p) not in nm.PAGING_PARAMS]
    for p, f in sets:
        fs = x.fields.get(f)
        if fs and fs.enum and not x.params[p].get("enum"):
            c(f"if {x.v(p)} is not None and {x.v(p)} not in {lit(fs.enum)}:")
            c(f"    return {{'error': 'invalid {f}: ' + str({x.v(p)}) + ' (expected one of {', '.join(map(str, fs.enum))})'}}")
    pairs = replaced_items(x, sets)
    if sets:
        c("changed = []")
        for p, f in sets:
            if p in pairs:
                _emit_replace(x, c, p, pairs[p], f)
                continue
            if any(p == new for new, _ in pairs.values()):
                continue  # the replacements of a pair, written with their originals
            c(f"if {x.v(p)} is not None:")
            if x.fields.get(f) is not None and x.fields[f].type == "object":
                # an update merges the given fields into the held object (an address keeps its country)
                c(f"    record[{f!r}] = {{**record[{f!r}], **{x.v(p)}}} if isinstance(record.get({f!r}), dict) "
                  f"and isinstance({x.v(p)}, dict) else {x.v(p)}")
            else:
                c(f"    record[{f!r}] = {x.v(p)}")
            c(f"    changed.append({f!r})")
        c("if not changed:")
        c(f"    return {{'error': 'nothing to update: give at least one of {', '.join(p for p, _ in sets)}'}}")
    elif (flag := verb_flag(x)) is not None:  # a write with nothing to set changes what its verb names
        _emit_flag(x, c, *flag)
    x.emit_rule_effects(c, status_done="status" not in x.fields)
    if "updated_at" in x.fields:
        c("record['updated_at'] = NOW")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(x.coll)


def scope_params(x: Ctx, pk: str) -> dict[str, str]:
    """``{parameter: field}`` of an update's arguments that say where the record is, not what it
    becomes: the id of the record's parent when the tool's name names the field that changes
    (``update_item_quantity(order_id, item_id, quantity)`` changes the quantity of an item of that
    order; it does not move the item). A name that names the parent (``change_line_plan``) sets it."""
    _, rest = nm.verb_of(x.spec.name)
    own = set(x.coll.entity.split("_")) | set(nm.plural(x.coll.entity).split("_"))
    named = [w for w in rest if w not in own and w not in nm.PREPOSITIONS and w not in ("id", "ids")]
    out: dict[str, str] = {}
    if not named:
        return out
    for p, rcoll in x.ref_params(skip={pk}):
        f = x.field_for(p)
        fs = x.fields.get(f) if f else None
        if fs is None or fs.ref != rcoll.name or fs.type == "array":
            continue
        if any(w in named or nm.singular(w) in named for w in rcoll.entity.split("_")):
            continue  # the name names the parent: it is the new value
        if any(w in x.fields for w in named) or any(nm.snake("_".join(named)) == g for g in x.fields):
            out[p] = f
    return out


def replaced_items(x: Ctx, sets: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """``{old: (new, field)}`` for an item-level change: a list of held items and a list of their
    replacements (``item_ids`` / ``new_item_ids``, ``old_tags`` / ``new_tags``) that name one list
    field. The named items are swapped one for one; the others stay."""
    by_snake = {nm.snake(p): p for p, _ in sets}
    out: dict[str, tuple[str, str]] = {}
    for p, f in sets:
        sp = nm.snake(p)
        base = sp[4:] if sp.startswith("old_") else sp
        if sp.startswith("new_") or json_type(x.params[p]) != "array":
            continue
        new = by_snake.get(f"new_{base}") or by_snake.get(f"replacement_{base}")
        fs = x.fields.get(f) or x.fields.get(base)
        if new and new != p and fs is not None and fs.type == "array":
            out[p] = (new, fs.name)
    return out


def _emit_replace(x: Ctx, c: Code, old: str, pair: tuple[str, str], f: str) -> None:
    new, fld = pair
    ov, nv = x.v(old), x.v(new)
    c(f"if {ov} is not None and {nv} is not None:")
    c(f"    if len({ov}) != len({nv}):")
    c(f"        return {{'error': '{nm.snake(old)} and {nm.snake(new)} must have the same length'}}")
    c(f"    current = list(record.get({fld!r}) or [])")
    c(f"    for old_item, new_item in zip({ov}, {nv}):")
    c("        if old_item not in current:")
    c(f"            return {{'error': str(old_item) + ' is not in the {fld.replace('_', ' ')} of {x.coll.entity.replace('_', ' ')} ' + str(record.get({x.coll.primary_key!r}))}}")
    c("        current[current.index(old_item)] = new_item")
    c(f"    record[{fld!r}] = current")
    c(f"    changed.append({fld!r})")


def _toggle_field(x: Ctx) -> str | None:
    """enable_roaming(line_id) -> the boolean field ``roaming_enabled`` of the line, if there is one."""
    hint = x.plan.field_hint
    if x.plan.verb not in TOGGLE_VERBS or not hint:
        return None
    return next((f.name for f in x.coll.fields if f.type == "boolean" and hint in f.name), None)


def t_status(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if pk is None:
        return t_generic(x)
    toggle = _toggle_field(x)
    if toggle:
        on = TOGGLE_VERBS[x.plan.verb]
        c = Code()
        for line in x.signature(x.spec.description):
            c(line)
        c.indent()
        x.emit_fetch(c, pk)
        x.emit_ref_checks(c, skip={pk})
        x.emit_status_precondition(c, "changed", None)
        c(f"if record.get({toggle!r}) is {on}:")
        c(f"    return {{'error': {x.coll.entity.replace('_', ' ') + ' '!r} + str({x.v(pk)}) + ' already has {toggle.replace('_', ' ')} = {str(on).lower()}'}}")
        c(f"record[{toggle!r}] = {on}")
        c("return copy.deepcopy(record)")
        return c.text(), record_schema(x.coll)
    sf = x.status_field()
    enum = list(sf.enum or []) if sf else []
    target = next((t for t in x.plan.target_status if t in enum), x.plan.target_status[0] if x.plan.target_status else "done")
    rule, stated = x.result_rule()
    if rule is not None:
        target = stated
        rule.enforcement = "code"
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    x.emit_ref_checks(c, skip={pk})
    x.emit_status_precondition(c, target.replace("_", " "), target)
    c(f"record['status'] = {target!r}")
    # an action's references are the action's own (a return's payment method is where the refund goes,
    # kept as return_payment_method_id; its item_ids as return_item_ids), never the record's
    action = x.plan.verb in ACTION_VERBS
    for p, rcoll in x.ref_params(skip={pk}):  # check_out_asset(asset, employee): the record now points at it
        f = x.field_for(p) or next((fs.name for fs in x.coll.fields if fs.ref == rcoll.name and fs.type == "string"), None)
        if f or action:
            c(f"if {x.v(p)} is not None:")
            c(f"    record[{x.plan.verb + '_' + (f or nm.snake(p)) if action else f!r}] = {x.v(p)}")
    for p in x.params:
        if p == pk or (x.ent(p) and not (action and nm.snake(p).endswith("_ids"))):
            continue
        f = x.field_for(p) or nm.snake(p)
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{(x.plan.verb + '_' + f) if action and x.ent(p) else f!r}] = {x.v(p)}")
    if f"{target}_at" in x.fields:
        c(f"record[{target + '_at'!r}] = NOW")
    x.emit_rule_effects(c, status_done=True, stamped={f"{target}_at"} if f"{target}_at" in x.fields else None)
    if "updated_at" in x.fields:
        c("record['updated_at'] = NOW")
    if x.plan.verb == "refund":
        _emit_refund_credit(x, c)
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(x.coll)


def _emit_refund_credit(x: Ctx, c: Code) -> None:
    """A refunded record gives its total back to the balance of the person it references."""
    total = next((t for t in TOTAL_FIELDS if t in x.fields), None)
    if not total:
        return
    for f in x.coll.fields:
        if f.ref and f.ref != x.coll.name:
            rcoll = next((cc for cc in x.schema.collections if cc.name == f.ref), None)
            if rcoll and any(ff.name == "balance" for ff in rcoll.fields):
                c(f"ref_record = {x.db}.get({rcoll.name!r}, {{}}).get({x.key(f'record.get({f.name!r})', rcoll)})")
                c("if ref_record is not None:")
                c(f"    ref_record['balance'] = round((ref_record.get('balance') or 0) + (record.get({total!r}) or 0), 2)")
                return


def _by_parent(x: Ctx) -> tuple[str, str] | None:
    """(parameter, field) of a delete that names no record of its own but one it points at:
    delete_message(receiver_id) -> the message whose ``receiver_id`` is the given user."""
    for p, rcoll in x.ref_params(skip=set()):
        f = x.field_for(p) or next((fs.name for fs in x.coll.fields if fs.ref == rcoll.name and fs.type != "array"), None)
        if f and f in x.fields and x.fields[f].ref == rcoll.name:
            return p, f
    return None


def t_delete_by_parent(x: Ctx, p: str, f: str) -> tuple[str, dict]:
    """Delete the latest record of the main collection that points at the given one (the last
    by ``created_at``/``sent_at`` where the records have one, else by id)."""
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_ref_checks(c, skip=set())
    when = next((fs.name for fs in x.coll.fields if fs.name in ("created_at", "sent_at", "timestamp", "posted_at", "date")), None)
    num = "int(k)" if is_integer_ids(x.coll) else "k"
    order = f"key=lambda k: (str({x.db}[{x.coll.name!r}][k].get({when!r}) or ''), {num})" if when else (
        "key=lambda k: int(k)" if is_integer_ids(x.coll) else "")
    c(f"found = [k for k in sorted({x.db}.get({x.coll.name!r}, {{}}){', ' + order if order else ''}) "
      f"if {x.db}[{x.coll.name!r}][k].get({f!r}) == {x.v(p)}]")
    c("if not found:")
    c(f"    return {{'error': 'no {x.coll.entity.replace('_', ' ')} with {f.replace('_', ' ')} ' + str({x.v(p)})}}")
    c(f"record = {x.db}[{x.coll.name!r}].pop(found[-1])")
    _emit_listings(x, c, "remove")
    pk = x.coll.primary_key
    c(f"return {{{pk!r}: record.get({pk!r}), {nm.snake(p)!r}: {x.v(p)}, 'deleted': True}}")
    out = {"type": "object", "properties": {pk: x.id_schema(x.coll), nm.snake(p): {"type": x.fields[f].type},
                                            "deleted": {"type": "boolean"}}, "required": [pk, "deleted"]}
    return c.text(), out


def t_delete(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if pk is None:
        parent = _by_parent(x)
        return t_delete_by_parent(x, *parent) if parent else t_generic(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, pk)
    if x.allowed_from(None) and (status_words(x.spec.description) or x.source_rule(None)[0] is not None):
        x.emit_status_precondition(c, "deleted", None)
    c(f"{x.db}[{x.coll.name!r}].pop({x.key(x.v(pk), x.coll)})")
    _emit_listings(x, c, "remove")
    c(f"return {{{x.coll.primary_key!r}: {x.v(pk)}, 'deleted': True}}")
    out = {"type": "object", "properties": {x.coll.primary_key: x.id_schema(x.coll),
                                            "deleted": {"type": "boolean"}}, "required": [x.coll.primary_key, "deleted"]}
    return c.text(), out


def t_generic(x: Ctx) -> tuple[str, dict]:
    pk = x.pk_param()
    if x.plan.effect == "read":
        return t_get(x) if pk else t_list(x)
    return t_update(x) if pk else t_create(x)
