"""Answer DAGs: which leaf of the last read's output a read-only task asks for.

A DAG that changes nothing is still a task when its result is something the user wants to
know: "calculate the mean of my readings and round it to 2 places — what is it?". The gold
answer is one leaf of the last tool's output (:class:`autoforge.types.AnswerSource`):

- a scalar field (``result``, ``count``, ``content``), or
- a field of the one record a lookup returns (``url_contents.0.content``: the instantiation
  checks that the list holds exactly one record, so the answer is unambiguous), or
- the same field of every record a list returns (``items.*.title``: an answer set).

Identifiers and echoes of the tool's own inputs are never the answer (the first must be looked
up, not asked for; the second the user already knows). Booleans are left out: "yes"/"no" in a
final message cannot be checked reliably.
"""

from __future__ import annotations

import random

from autoforge.domain.keys import is_key_param, output_paths, param_schemas
from autoforge.domain import words as nm
from autoforge.types import AnswerSource, ToolCode

ANSWER_TYPES = {"number", "integer", "string"}


def answer_candidates(tool: ToolCode, keys: set[str]) -> list[tuple[str, str]]:
    """(path, field words) the DAG could ask for, in a stable order: ``result``, ``L.0.f`` (the
    field of the one record a lookup gives), ``L.*.f`` (that field of every record)."""
    inputs = {nm.snake(p) for p in param_schemas(tool)} | {nm.snake(p) for p in (tool.arg_map or {}).values()}
    out = []
    for path, types in sorted(output_paths(tool.output_schema).items()):
        parts = path.split(".")
        leaf = parts[-1]
        if not types & ANSWER_TYPES or "boolean" in types or leaf == "*":
            continue
        if is_key_param(leaf, keys) or nm.snake(leaf) in inputs:
            continue
        words = " ".join(nm.words(leaf))
        if "*" not in parts:
            out.append((path, words))
        elif len(parts) == 3 and parts[1] == "*":  # a field of a top-level list's records
            out += [(f"{parts[0]}.0.{leaf}", words), (path, words)]
    return out


def choose_answer(tool: ToolCode, node_id: str, keys: set[str], rng: random.Random) -> AnswerSource | None:
    """One answer of ``tool``'s output for the DAG's last node, or None when it has none."""
    cands = answer_candidates(tool, keys)
    if not cands:
        return None
    path, field = rng.choice(cands)
    return AnswerSource(node=node_id, path=path, field=field)
