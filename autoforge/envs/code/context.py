"""What one template knows about its tool: :class:`Ctx` (parameters, Python names, the collection, rules, code snippets)."""

from __future__ import annotations

import re
from typing import Any

from autoforge.domain import words as nm
from autoforge.domain.fields import suffix_field
from autoforge.domain.ids import id_param_entity, is_integer_ids
from autoforge.domain.rule_kinds import ParsedRule
from autoforge.domain.rules import parse_rules
from autoforge.domain.statuses import status_rules
from autoforge.domain.tools import ToolPlan
from autoforge.envs import pynames
from autoforge.envs.code.base import NULL_DEFAULTS, RESERVED, Code, func_name, lit
from autoforge.tooldocs.schema import props, unwrap
from autoforge.types import CollectionSpec, FieldSpec, StateSchema, ToolSpec


class Ctx:
    """Everything one template needs: the spec, its plan, the schema and the parameter names."""

    def __init__(self, spec: ToolSpec, plan: ToolPlan, schema: StateSchema):
        self.spec, self.plan, self.schema = spec, plan, schema
        self.by_entity = {c.entity: c for c in schema.collections}
        self.coll = self.by_entity.get(plan.entity) or schema.collections[0]
        self.fields = {f.name: f for f in self.coll.fields}
        self.params: dict[str, dict] = {k: (unwrap(v) if isinstance(v, dict) else {}) for k, v in props(spec.parameters).items()}
        self.required = set((spec.parameters or {}).get("required") or [])
        self.py = pynames.argument_names(list(self.params), pynames.CODE_RESERVED | RESERVED)  # public -> Python name
        self.db = "state"  # the sandbox requires the first parameter to be named ``state``
        self._rules: dict[str, list[ParsedRule]] = {}

    def rules(self) -> list[ParsedRule]:
        """The rules the tool's prose states, read against the current main collection."""
        if self.coll.name not in self._rules:
            self._rules[self.coll.name] = parse_rules(self.spec, self.coll, self.plan.verb, self.plan.target_status)
        return self._rules[self.coll.name]

    def _in_enum(self, values: list) -> list[str]:
        sf = self.status_field()
        enum = {str(e).lower(): e for e in (sf.enum or [])} if sf is not None else {}
        return list(dict.fromkeys(enum[str(v).lower()] for v in values if str(v).lower() in enum))

    def source_rule(self, target: str | None) -> tuple[ParsedRule | None, list[str]]:
        """The first source-status rule whose statuses the collection has, and those statuses."""
        for r in self.rules():
            if r.kind == "source_status":
                allowed = [v for v in self._in_enum(r.values) if v != target]
                if allowed:
                    return r, allowed
        return None, []

    def result_rule(self) -> tuple[ParsedRule | None, str | None]:
        """The first result-status rule whose status the collection has, and that status."""
        for r in self.rules():
            if r.kind == "result_status":
                got = self._in_enum(r.values)
                if got:
                    return r, got[0]
        return None, None

    def emit_rule_effects(self, c: Code, status_done: bool = False, stamped: set[str] | None = None) -> None:
        """The stated result status (unless the template set it) and the stated timestamps."""
        rule, value = self.result_rule()
        if rule is not None and not status_done:
            c(f"record['status'] = {value!r}")
            rule.enforcement = "code"
        stamped = set(stamped or ())
        for r in self.rules():
            if r.kind == "side_effect" and r.field and nm.is_identifier(r.field):
                if r.field not in stamped:
                    fmt = self.fields[r.field].format if r.field in self.fields else None
                    c(f"record[{r.field!r}] = {'TODAY' if fmt == 'date' else 'NOW'}")
                    stamped.add(r.field)
                r.enforcement = "code"

    def set_main(self, coll: CollectionSpec) -> None:
        """Make ``coll`` the collection the tool reads or writes (recorded as ToolCode.collection)."""
        self.coll = coll
        self.fields = {f.name: f for f in coll.fields}

    def ent(self, p: str) -> str | None:
        """The entity an id parameter points at: by name (``order_id``), else through a field of
        the same name that references a collection (``manager_id`` -> employees)."""
        e = id_param_entity(p)
        if e is None or e in self.by_entity:
            return e
        sp = nm.snake(p)
        for c in [self.coll, *self.schema.collections]:
            for f in c.fields:
                if f.name == sp and f.ref:
                    target = next((cc.entity for cc in self.schema.collections if cc.name == f.ref), None)
                    if target:
                        return target
        return e

    def next_id(self, coll: CollectionSpec) -> str:
        width = "" if coll.id_width == 4 else f", {coll.id_width}"
        return f"next_id({self.db}, {coll.name!r}, {coll.id_prefix!r}{width})"

    @staticmethod
    def key(expr: str, coll: CollectionSpec) -> str:
        """The state key for an id value ``expr`` of ``coll``: integer ids are stored under their
        strings (``state['pets']['3']``), string ids as they are."""
        return f"str({expr})" if is_integer_ids(coll) else expr

    @staticmethod
    def id_schema(coll: CollectionSpec) -> dict[str, Any]:
        """The JSON Schema of one id of ``coll`` in an output."""
        return {"type": "integer" if is_integer_ids(coll) else "string", "x-ref": coll.name}

    # parameter access ---------------------------------------------------------------
    def v(self, p: str) -> str:
        """Python expression for the value of (public) parameter ``p``: its Python name."""
        return self.py[p]

    @property
    def arg_map(self) -> dict[str, str]:
        return {p: py for p, py in self.py.items() if p != py}

    def signature(self, doc: str) -> list[str]:
        name = func_name(self.spec.name)
        parts = ["state"]
        req = [p for p in self.params if p in self.required]
        opt = [p for p in self.params if p not in self.required]
        parts += [self.py[p] for p in req]
        for p in opt:
            default = self.params[p].get("default")
            if isinstance(default, str) and default.strip() in NULL_DEFAULTS:
                default = None  # ``"default": "None"``: the docs' way of saying "not given" (If None, return all)
            ok = default is None or isinstance(default, (str, int, float, bool))
            parts.append(f"{self.py[p]}={lit(default) if ok else 'None'}")
        head = f"def {name}({', '.join(parts)}):"
        doc = re.sub(r"\s+", " ", doc).replace("\\", "/").replace('"""', "'").strip()[:300] or self.spec.name
        return [head, f'    """{doc}"""']

    def table(self, coll: CollectionSpec | None = None) -> str:
        coll = coll or self.coll
        return f"{self.db}.setdefault({coll.name!r}, {{}})"

    def pk_param(self, entity: str | None = None) -> str | None:
        """The parameter holding the id of a record of ``entity`` (default: the main entity)."""
        entity = entity or self.plan.entity
        ids = [p for p in self.params if self.ent(p) == entity and not nm.snake(p).endswith("_ids")]
        exact = [p for p in ids if nm.snake(p) == f"{entity}_id"]
        if exact:
            return exact[0]
        if ids:
            return ids[0]
        if "id" in self.params and entity == self.plan.entity:
            return "id"
        return None

    def ref_params(self, skip: set[str]) -> list[tuple[str, CollectionSpec]]:
        """Id parameters pointing at a collection (validated before anything changes)."""
        out = []
        for p in self.params:
            if p in skip:
                continue
            e = self.ent(p)
            if e and e in self.by_entity and not nm.snake(p).endswith("_ids"):
                out.append((p, self.by_entity[e]))
        return out

    def emit_ref_checks(self, c: Code, skip: set[str]) -> None:
        for p, coll in self.ref_params(skip):
            v = self.v(p)
            c(f"if {v} is not None and {self.key(v, coll)} not in {self.db}.get({coll.name!r}, {{}}):")
            c(f"    return {{'error': {coll.entity.replace('_', ' ') + ' '!r} + str({v}) + ' not found'}}")

    def emit_fetch(self, c: Code, pk: str, coll: CollectionSpec | None = None, var: str = "record") -> None:
        coll = coll or self.coll
        v = self.v(pk)
        c(f"{var} = {self.db}.get({coll.name!r}, {{}}).get({self.key(v, coll)})")
        c(f"if {var} is None:")
        c(f"    return {{'error': {coll.entity.replace('_', ' ') + ' '!r} + str({v}) + ' not found'}}")

    def field_for(self, p: str) -> str | None:
        """The record field a write parameter sets: ``new_address`` -> address."""
        sp = nm.snake(p)
        for cand in (p, sp, sp[4:] if sp.startswith("new_") else None, sp[8:] if sp.startswith("updated_") else None):
            if cand and cand in self.fields:
                return cand
        hint = self.plan.field_hint
        if hint and sp.endswith("_id") and f"{hint}_id" in self.fields and hint.endswith(f"_{sp[:-3]}"):
            return f"{hint}_id"  # set_preferred_locker(locker_id) sets preferred_locker_id
        return suffix_field(sp, self.fields)

    def status_field(self) -> FieldSpec | None:
        return self.fields.get("status")

    def allowed_from(self, target: str | None) -> list[str] | None:
        """Statuses a record may be in before this tool changes it (None: no precondition).

        Rules the description states win (:func:`autoforge.domain.statuses.status_rules`: "Only pending
        orders can be cancelled", "Checked-in bookings cannot be cancelled"); otherwise every
        non-terminal status of the enum is allowed."""
        sf = self.status_field()
        if sf is None or not sf.enum:
            return None
        rule, from_rule = self.source_rule(target)
        if rule is not None:
            return from_rule
        enum = [e for e in sf.enum if isinstance(e, str)]
        allowed, forbidden = status_rules(self.spec.description, enum, self.coll.entity, target)
        if allowed:
            return allowed
        rest = [e for e in enum if e not in nm.TERMINAL_STATUSES and e != target and e not in forbidden]
        return rest if rest and len(rest) < len(enum) else None

    def emit_status_precondition(self, c: Code, verb_text: str, target: str | None) -> None:
        allowed = self.allowed_from(target)
        rule, from_rule = self.source_rule(target)
        if rule is not None and allowed == from_rule:
            rule.enforcement = "code"
        if target is not None:
            c(f"if record.get('status') == {target!r}:")
            c(f"    return {{'error': {self.coll.entity.replace('_', ' ') + ' '!r} + str(record.get({self.coll.primary_key!r})) + ' is already {target}'}}")
        if allowed:
            c(f"if record.get('status') not in {lit(allowed)}:")
            msg = f" cannot be {verb_text}: status is "
            c(f"    return {{'error': {self.coll.entity.replace('_', ' ') + ' '!r} + str(record.get({self.coll.primary_key!r})) + {msg!r} + str(record.get('status')) + ' (allowed: {', '.join(allowed)})'}}")
