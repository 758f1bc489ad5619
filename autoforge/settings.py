"""The one place that reads ``AUTOFORGE_*`` environment variables.

Every setting has a default that works offline. Command-line flags override these
(``--warehouse PATH`` beats ``AUTOFORGE_WAREHOUSE``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"AUTOFORGE_{name}", default)


@dataclass(frozen=True)
class Settings:
    # Warehouse: a file path (DuckDB) or any SQLAlchemy URL ("duckdb:///x.duckdb", "postgresql://...").
    warehouse: str = field(default_factory=lambda: _env("WAREHOUSE", "autoforge.duckdb"))
    # Seconds a writer waits for another process to release the DuckDB file before giving up.
    lock_timeout_s: float = field(default_factory=lambda: float(_env("LOCK_TIMEOUT", "30")))
    # LLM backend: "offline" (deterministic rules, the default) or "openai" (any compatible server).
    backend: str = field(default_factory=lambda: _env("BACKEND", "offline"))
    openai_base_url: str | None = field(default_factory=lambda: _env("OPENAI_BASE_URL") or os.environ.get("OPENAI_BASE_URL"))
    openai_api_key: str = field(default_factory=lambda: _env("OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY") or "EMPTY")
    openai_model: str = field(default_factory=lambda: _env("OPENAI_MODEL", "gpt-4.1-mini"))
    llm_timeout_s: float = field(default_factory=lambda: float(_env("LLM_TIMEOUT", "60")))
    llm_max_retries: int = field(default_factory=lambda: int(_env("LLM_MAX_RETRIES", "4")))
    llm_max_repairs: int = field(default_factory=lambda: int(_env("LLM_MAX_REPAIRS", "2")))
    # Sandbox limits for generated tool code.
    tool_timeout_s: float = field(default_factory=lambda: float(_env("TOOL_TIMEOUT", "2.0")))
    tool_memory_mb: int = field(default_factory=lambda: int(_env("TOOL_MEMORY_MB", "512")))

    @property
    def warehouse_url(self) -> str:
        return warehouse_url(self.warehouse)

    def with_(self, **kw) -> "Settings":
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


def warehouse_url(value: str) -> str:
    """A bare path means a DuckDB file; anything with ``://`` is taken as a SQLAlchemy URL."""
    if "://" in value:
        return value
    return f"duckdb:///{Path(value).expanduser().resolve()}"


def get_settings(**overrides) -> Settings:
    return Settings().with_(**overrides)
