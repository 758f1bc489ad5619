"""Facts derived from one environment's schema, computed once per environment instead of once per value.

Building a candidate task's world (:func:`autoforge.tasks.instantiate.make_world`) fills every leaf of
every record: ~450,000 leaves for the bundled corpus's ~2,700 worlds. Each leaf asked the same questions
of the same schema again: is this name a key (``is_key_param``), does this schema document an id shape
(``id_pattern``), which value domain does this name take (``domain_for``), what is this field's JSON
Schema, how are this collection's ids written. The answers depend only on the environment, so
:func:`facts_for` keeps them per environment (issue 37: ~a third of the generate stage's time went here).

The memos are keyed by the *identity* of the schema dicts and field records they were asked about (those
are the environment's own, long-lived objects) and hold a reference to each, so an id is never reused
while its entry lives; a memo that grows past :data:`MAX_ENTRIES` (a caller passing fresh dicts) starts
over. Nothing here draws a random number: worlds stay exactly what they were for the same seed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable

from autoforge.domain.ids import id_pattern, id_style, person_name_fields
from autoforge.domain.keys import is_key_param
from autoforge.domain.values import Domain, domain_for
from autoforge.types import CollectionSpec, EnvironmentRecord, FieldSpec

MAX_ENTRIES = 50_000  # per memo; past it the memo is cleared (only callers passing fresh dicts get there)
MAX_ENVS = 64  # environments whose facts are kept (least recently used first out)
_EMPTY: dict = {}  # the schema of a leaf that has none (one object, so its identity is a stable key)


class EnvFacts:
    """The memoised answers for one environment (see the module docstring)."""

    def __init__(self, env: EnvironmentRecord):
        self.env = env
        self.by_pk = {c.primary_key: c for c in env.state_schema.collections}
        self.keys = frozenset(self.by_pk)
        self.people = person_name_fields(env.state_schema)  # fields that hold a person's name
        self._is_key: dict[str, bool] = {}
        self._id_pattern: dict[int, tuple[Any, Any]] = {}
        self._domain: dict[tuple, tuple[Any, Any]] = {}
        self._field_schema: dict[int, tuple[Any, dict]] = {}
        self._id_style: dict[int, tuple[Any, str]] = {}
        self._field_names: dict[int, tuple[Any, tuple]] = {}
        self._samples: dict[tuple[str, str], Any] = {}
        self._with_description: dict[tuple[int, int], tuple[Any, dict]] = {}

    def is_key(self, name: str) -> bool:
        """``is_key_param(name, <the primary keys>)``."""
        v = self._is_key.get(name)
        if v is None:
            v = self._is_key[name] = is_key_param(name, set(self.keys))
        return v

    def id_pattern(self, schema: dict | None) -> tuple[str, int] | None:
        """``id_pattern(schema)``."""
        return _by_identity(self._id_pattern, schema if schema is not None else _EMPTY, lambda s: id_pattern(s))

    def domain(self, name: str, schema: dict | None, siblings: tuple[str, ...], description: str = "") -> Domain | None:
        """``domain_for(name, schema, siblings=siblings, description=description)``."""
        schema = schema if isinstance(schema, dict) else _EMPTY
        key = (name, id(schema), siblings, description)
        hit = self._domain.get(key)
        if hit is not None and hit[0] is schema:
            return hit[1]
        if len(self._domain) > MAX_ENTRIES:
            self._domain.clear()
        dom = domain_for(name, schema, siblings=siblings, description=description)
        self._domain[key] = (schema, dom)
        return dom

    def field_schema(self, f: FieldSpec, build: Callable[[FieldSpec], dict]) -> dict:
        """``build(f)`` (the JSON Schema of a state field), built once per field; callers do not change it."""
        return _by_identity(self._field_schema, f, build)

    def id_style(self, coll: CollectionSpec) -> str:
        """``id_style(coll)``."""
        return _by_identity(self._id_style, coll, id_style)

    def field_names(self, coll: CollectionSpec) -> tuple[str, ...]:
        """The names of ``coll``'s fields (a leaf's siblings)."""
        return _by_identity(self._field_names, coll, lambda c: tuple(f.name for f in c.fields))

    def sample_value(self, coll: str, name: str, find: Callable[[EnvironmentRecord, str, str], Any]) -> Any:
        """``find(env, coll, name)``: the value a sample record shows for a field (None: none shows one)."""
        key = (coll, name)
        if key not in self._samples:
            self._samples[key] = find(self.env, coll, name)
        return self._samples[key]

    def with_description(self, items: dict, description: str) -> dict:
        """``{**items, "description": description}``, one dict per (items, description) pair."""
        key = (id(items), hash(description))
        hit = self._with_description.get(key)
        if hit is not None and hit[0] is items and hit[1]["description"] == description:
            return hit[1]
        if len(self._with_description) > MAX_ENTRIES:
            self._with_description.clear()
        out = {**items, "description": description}
        self._with_description[key] = (items, out)
        return out


def _by_identity(memo: dict, obj: Any, compute: Callable[[Any], Any]) -> Any:
    hit = memo.get(id(obj))
    if hit is not None and hit[0] is obj:
        return hit[1]
    if len(memo) > MAX_ENTRIES:
        memo.clear()
    value = compute(obj)
    memo[id(obj)] = (obj, value)
    return value


_FACTS: "OrderedDict[int, EnvFacts]" = OrderedDict()
_LOCK = threading.Lock()


def facts_for(env: EnvironmentRecord) -> EnvFacts:
    """The facts of ``env`` (this very record object: a re-read or changed record gets its own)."""
    with _LOCK:
        facts = _FACTS.get(id(env))
        if facts is not None and facts.env is env:
            _FACTS.move_to_end(id(env))
            return facts
        facts = _FACTS[id(env)] = EnvFacts(env)
        while len(_FACTS) > MAX_ENVS:
            _FACTS.popitem(last=False)
        return facts
