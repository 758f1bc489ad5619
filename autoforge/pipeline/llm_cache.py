"""The LLM response cache read back from the warehouse (the ``llm_calls`` table).

:class:`autoforge.llm.WarehouseCache` only builds a cache from rows; reading those rows is the
pipeline's job, so ``autoforge.llm`` never reaches for the warehouse. Hand the result to
``get_client(..., cache=load_llm_cache(warehouse))``.
"""

from __future__ import annotations

from typing import Any

from autoforge.llm.cache import WarehouseCache
from autoforge.warehouse import query, table_exists

# The ok calls that have a response: what a re-run may be answered with.
SQL = (
    "SELECT prompt_hash, response, outcome, created_at FROM llm_calls "
    "WHERE outcome = 'ok' AND response IS NOT NULL"
)


def load_llm_cache(warehouse: Any, *, model: str | None = None, step: str | None = None) -> WarehouseCache:
    """Read the cache from a warehouse through ``autoforge.warehouse.query`` (read-only).

    Optionally only one model's or one step's calls. A missing warehouse file raises the
    warehouse's own error (it says how to create one)."""
    if not table_exists(warehouse, "llm_calls"):  # a warehouse from before sql/017: nothing cached yet
        return WarehouseCache()
    sql, params = SQL, {}
    if model is not None:
        sql += " AND model = :model"
        params["model"] = model
    if step is not None:
        sql += " AND step = :step"
        params["step"] = step
    # A fixed SELECT built here: the read-only check (which cannot parse :named params) is not needed.
    return WarehouseCache.from_rows(query(warehouse, sql, params, read_only_check=False))
