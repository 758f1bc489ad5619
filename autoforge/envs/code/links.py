"""Templates of the tools between two records: link, unlink, and amounts moved between balances."""

from __future__ import annotations

import re
from dataclasses import dataclass

from autoforge.domain import words as nm
from autoforge.domain.fields import amount_target
from autoforge.domain.tools import AMOUNT_PARAMS
from autoforge.envs.code.base import Code, DECREASE_VERBS, INCREASE_VERBS, PAID_FIELDS, record_schema
from autoforge.envs.code.context import Ctx
from autoforge.envs.code.writes import t_generic
from autoforge.types import CollectionSpec


@dataclass
class LinkShape:
    """How a link/unlink tool changes state: which record, which field, which value."""

    mode: str  # "list": add/remove an id in a list field · "items": add/remove an item dict · "set": set/clear a reference
    target: CollectionSpec
    target_param: str
    field: str
    value_param: str | None  # the parameter whose value goes into the field / list


def _link_shape(x: Ctx) -> LinkShape | None:
    """Read the link from the schema (paper Sec. 3.1 leaves this to the LLM):

    A. the other record lists ids of this entity (``assign_user_to_project``: projects.member_ids);
    B. this record lists ids of the other (``users.project_ids``);
    C. "add X to Y" with item fields (``add_item_to_cart``): an item dict appended to Y's list;
    D. otherwise this record gets a reference (``assign_task``: tasks.assignee_id = user).
    """
    other = x.plan.other
    ocoll = x.by_entity.get(other) if other else None
    epk, opk = x.pk_param(), (x.pk_param(other) if other else None)
    if ocoll is not None and epk and opk:
        for f in ocoll.fields:
            if f.type == "array" and f.ref == x.coll.name:
                return LinkShape("list", ocoll, opk, f.name, epk)
        for f in x.coll.fields:
            if f.type == "array" and f.ref == ocoll.name:
                return LinkShape("list", x.coll, epk, f.name, opk)
    list_param = next((p for p in x.params if nm.snake(p).endswith("_ids") and x.ent(p) == other), None)
    if epk and list_param:
        return LinkShape("list", x.coll, epk, nm.snake(list_param), list_param)
    if ocoll is not None and opk and not epk and x.plan.verb in nm.CREATE_VERBS | {"append", "remove", "delete"}:
        rest = [p for p in x.params if p != opk]
        if rest:
            ofields = {f.name for f in ocoll.fields}
            lst = f"{x.plan.entity}_ids" if f"{x.plan.entity}_ids" in ofields else nm.plural(x.plan.entity)
            return LinkShape("items", ocoll, opk, lst, None)
    if epk and opk:
        sp = nm.snake(opk)
        fld = sp if sp in x.fields else f"{other}_id"
        return LinkShape("set", x.coll, epk, fld, opk)
    return None


def t_link(x: Ctx, unlink: bool = False) -> tuple[str, dict]:
    shape = _link_shape(x)
    if shape is None:
        return t_generic(x)
    target, tp, fld, vp = shape.target, shape.target_param, shape.field, shape.value_param
    ent = target.entity.replace("_", " ")
    own = x.coll
    if target is not own:
        x.set_main(target)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    x.emit_fetch(c, tp, target)
    x.emit_ref_checks(c, skip={tp})
    if target is own:
        x.emit_status_precondition(c, "changed", None)
    extra = [p for p in x.params if p not in (tp, vp)]
    if shape.mode == "list":
        vals = x.v(vp) if nm.snake(vp).endswith("_ids") else f"[{x.v(vp)}]"
        c(f"current = list(record.get({fld!r}) or [])")
        c(f"for value in {vals}:")
        if unlink:
            c("    if value not in current:")
            c(f"        return {{'error': str(value) + ' is not in {fld.replace('_', ' ')} of {ent} ' + str({x.v(tp)})}}")
            c("    current.remove(value)")
        else:
            c("    if value in current:")
            c(f"        return {{'error': str(value) + ' is already in {fld.replace('_', ' ')} of {ent} ' + str({x.v(tp)})}}")
            c("    current.append(value)")
        c(f"record[{fld!r}] = current")
    elif shape.mode == "set":
        if unlink:
            c(f"if record.get({fld!r}) != {x.v(vp)}:")
            c(f"    return {{'error': {ent + ' '!r} + str({x.v(tp)}) + ' is not linked to ' + str({x.v(vp)})}}")
            c(f"record[{fld!r}] = None")
        else:
            c(f"if record.get({fld!r}) == {x.v(vp)}:")
            c(f"    return {{'error': {ent + ' '!r} + str({x.v(tp)}) + ' is already assigned to ' + str({x.v(vp)})}}")
            c(f"record[{fld!r}] = {x.v(vp)}")
    else:  # items: append / remove an item dict keyed by its first id parameter
        key = next((p for p in extra if x.ent(p)), extra[0])
        kf = nm.snake(key)
        c(f"current = list(record.get({fld!r}) or [])")
        if unlink:
            c(f"kept = [item for item in current if not (isinstance(item, dict) and item.get({kf!r}) == {x.v(key)})]")
            c("if len(kept) == len(current):")
            c(f"    return {{'error': str({x.v(key)}) + ' is not in ' + {ent + ' '!r} + str({x.v(tp)})}}")
            c("current = kept")
        else:
            c("item = {}")
            for p in extra:
                c(f"if {x.v(p)} is not None:")
                c(f"    item[{nm.snake(p)!r}] = {x.v(p)}")
            c("current.append(item)")
        c(f"record[{fld!r}] = current")
        extra = []
    for p in extra:
        if x.ent(p):
            continue
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{(x.field_for(p) or nm.snake(p))!r}] = {x.v(p)}")
    if target is own:
        x.emit_rule_effects(c, status_done="status" not in x.fields)
    if "updated_at" in {f.name for f in target.fields}:
        c("record['updated_at'] = NOW")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(target)


def t_amount(x: Ctx) -> tuple[str, dict]:
    amount = next((p for p in x.params if nm.snake(p) in AMOUNT_PARAMS or nm.snake(p).endswith("_amount")), None)
    cands = [x.plan.entity] + [x.ent(p) for p in x.params if x.ent(p) in x.by_entity]
    ent_name, bal = amount_target(x.plan, cands, {e: {f.name: f for f in x.by_entity[e].fields} for e in cands if e in x.by_entity})
    if ent_name != x.coll.entity:
        x.set_main(x.by_entity[ent_name])
    ids = [p for p in x.params if x.ent(p) == x.coll.entity and not nm.snake(p).endswith("_ids")]
    if amount is None or not ids:
        return t_generic(x)
    c = Code()
    for line in x.signature(x.spec.description):
        c(line)
    c.indent()
    a = x.v(amount)
    ent = x.coll.entity.replace("_", " ")
    if len(ids) >= 2:  # transfer between two records of one collection
        src = next((p for p in ids if re.match(r"(from|source|src|sender|origin)_", nm.snake(p))), ids[0])
        dst = next((p for p in ids if p != src), ids[1])
        x.emit_fetch(c, src, var="source")
        x.emit_fetch(c, dst, var="dest")
        x.emit_ref_checks(c, skip={src, dst})
        c(f"if {x.v(src)} == {x.v(dst)}:")
        c(f"    return {{'error': 'cannot transfer from a {ent} to itself'}}")
        c(f"if {a} <= 0:")
        c(f"    return {{'error': '{nm.snake(amount)} must be positive'}}")
        c(f"if (source.get({bal!r}) or 0) < {a}:")
        c(f"    return {{'error': 'insufficient {bal.replace('_', ' ')}: ' + {ent + ' '!r} + str({x.v(src)}) + ' has ' + str(source.get({bal!r}) or 0) + ', needs ' + str({a})}}")
        c(f"source[{bal!r}] = round((source.get({bal!r}) or 0) - {a}, 2)")
        c(f"dest[{bal!r}] = round((dest.get({bal!r}) or 0) + {a}, 2)")
        sk, dk = nm.snake(src), nm.snake(dst)
        c(f"return {{{sk!r}: {x.v(src)}, {dk!r}: {x.v(dst)}, {nm.snake(amount)!r}: {a}, "
          f"{'from_' + bal!r}: source[{bal!r}], {'to_' + bal!r}: dest[{bal!r}]}}")
        num = {"type": "number"}
        out = {"type": "object", "properties": {sk: x.id_schema(x.coll), dk: x.id_schema(x.coll),
                                                nm.snake(amount): num, f"from_{bal}": num, f"to_{bal}": num},
               "required": [sk, dk, nm.snake(amount)]}
        return c.text(), out
    pk = ids[0]
    x.emit_fetch(c, pk)
    x.emit_ref_checks(c, skip={pk})
    x.emit_status_precondition(c, "changed", None)
    verb = x.plan.verb
    due = next((f for f in ("amount_due", "amount", "total", "total_amount", "balance_due") if f in x.fields and f != bal), None)
    if bal in PAID_FIELDS and due:  # paying a bill/invoice: amount_paid grows up to what is due
        c(f"if {a} <= 0:")
        c(f"    return {{'error': '{nm.snake(amount)} must be positive'}}")
        c(f"remaining = round((record.get({due!r}) or 0) - (record.get({bal!r}) or 0), 2)")
        c(f"if {a} > remaining:")
        c(f"    return {{'error': {nm.snake(amount)!r} + ' ' + str({a}) + ' exceeds the ' + str(remaining) + ' still due on ' + {ent + ' '!r} + str({x.v(pk)})}}")
        c(f"record[{bal!r}] = round((record.get({bal!r}) or 0) + {a}, 2)")
        sf = x.status_field()
        paid = next((st for st in ("paid", "settled", "completed") if sf and sf.enum and st in sf.enum), None)
        if paid:
            c(f"if record[{bal!r}] >= (record.get({due!r}) or 0):")
            c(f"    record['status'] = {paid!r}")
    elif verb in INCREASE_VERBS or verb in DECREASE_VERBS:
        sign = "+" if verb in INCREASE_VERBS else "-"
        c(f"if {a} <= 0:")
        c(f"    return {{'error': '{nm.snake(amount)} must be positive'}}")
        if sign == "-":
            c(f"if (record.get({bal!r}) or 0) < {a}:")
            c(f"    return {{'error': 'insufficient {bal.replace('_', ' ')}: ' + {ent + ' '!r} + str({x.v(pk)}) + ' has ' + str(record.get({bal!r}) or 0) + ', needs ' + str({a})}}")
        c(f"record[{bal!r}] = round((record.get({bal!r}) or 0) {sign} {a}, 2)")
    else:  # adjust: a signed change that may not go below zero
        c(f"if (record.get({bal!r}) or 0) + {a} < 0:")
        c(f"    return {{'error': {bal.replace('_', ' ')!r} + ' of ' + {ent + ' '!r} + str({x.v(pk)}) + ' cannot go below zero (now ' + str(record.get({bal!r}) or 0) + ')'}}")
        c(f"record[{bal!r}] = round((record.get({bal!r}) or 0) + {a}, 2)")
    for p in x.params:
        if p in (pk, amount) or x.ent(p):
            continue
        f = x.field_for(p) or nm.snake(p)
        c(f"if {x.v(p)} is not None:")
        c(f"    record[{f!r}] = {x.v(p)}")
    x.emit_rule_effects(c, status_done="status" not in x.fields)
    if "updated_at" in x.fields:
        c("record['updated_at'] = NOW")
    c("return copy.deepcopy(record)")
    return c.text(), record_schema(x.coll)
