"""The migrations' SQL on PostgreSQL: a small, fixed rewrite at apply time, and per-file overrides.

The files in ``sql/`` are written for DuckDB and stay exactly as they were applied (their
checksums are recorded in ``schema_migrations``). On PostgreSQL each file is applied either

* from ``sql/postgresql/NNN_name.sql``, when that file exists (same name as the file it
  overrides): written by hand where the DuckDB text has no mechanical translation (DuckDB's
  ``json_extract``/list results, ``median``, ``/`` between integers giving a fraction,
  ``round`` of a double, a subquery in FROM without an alias); or
* from the DuckDB file, rewritten by :func:`to_postgres`, which does exactly this and nothing
  else, outside string literals and quoted names:

  - ``--`` comments are dropped;
  - the type ``DOUBLE`` -> ``DOUBLE PRECISION`` (upper case, as the files write types;
    ``::DOUBLE`` casts included);
  - ``CREATE OR REPLACE VIEW v AS`` -> ``DROP VIEW IF EXISTS v`` then ``CREATE VIEW v AS``:
    PostgreSQL's CREATE OR REPLACE cannot rename, drop or insert columns, which a replacing
    migration (041 -> 049) does. Without CASCADE, so replacing a view another view reads
    fails and says so (write the dependent view again in the same migration).

JSON columns stay ``JSON`` on PostgreSQL (``json``, not ``jsonb``): ``json`` keeps the text
as written, so objects come back with their keys in the order they were stored, as DuckDB
gives them. ``jsonb`` reorders keys (shorter keys first), and the factory's output depends on
that order (a tool's parameters, a state's records and fields): measured on the bundled
corpus (``max_envs=2, tasks_per_env=10``), a ``jsonb`` warehouse built 243 DAGs and 20
verified tasks where DuckDB built 250 and 14, with ``json`` the same 250 and the same 14 ids.
Every ``json`` operator and function works on these columns; cast to ``jsonb`` in a query
(``col::jsonb @> '{...}'``) for containment or a GIN index on an expression.

The result of every view is meant to be the same rows on both databases (tests compare them);
an override says which DuckDB behaviour it reproduces. Text ordering follows the database's
collation: DuckDB compares bytes, so a PostgreSQL database created with ``LOCALE 'C'`` (or
``--locale C`` at initdb) orders ``string_agg`` lists and ranks exactly as DuckDB does.
"""

from __future__ import annotations

import re

DIALECTS = ("duckdb", "postgresql")

# One token of SQL text: a string literal, a quoted name, a comment, or a run of anything else.
_TOKEN = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|[^'\"-]+|-", re.S)
_REWRITES = ((re.compile(r"\bDOUBLE\b(?!\s+PRECISION)"), "DOUBLE PRECISION"),)
_REPLACE_VIEW = re.compile(r"^\s*CREATE\s+OR\s+REPLACE\s+VIEW\s+([A-Za-z_][A-Za-z0-9_]*)\s+AS\b", re.I)


def _rewrite_code(text: str) -> str:
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    return text


def to_postgres(statement: str) -> list[str]:
    """One DuckDB migration statement as the PostgreSQL statement(s) that do the same (see the module doc)."""
    out = []
    for m in _TOKEN.finditer(statement):
        tok = m.group(0)
        if tok.startswith("--"):
            continue
        out.append(tok if tok[0] in "'\"" else _rewrite_code(tok))
    text = "".join(out).strip()
    view = _REPLACE_VIEW.match(text)
    if view:
        name = view.group(1)
        return [f"DROP VIEW IF EXISTS {name}", "CREATE VIEW " + name + " AS" + text[view.end():]]
    return [text]


def dialect_of(conn_dialect_name: str) -> str:
    """``duckdb`` or ``postgresql`` from SQLAlchemy's dialect name."""
    return "postgresql" if conn_dialect_name.startswith("postgres") else "duckdb"
