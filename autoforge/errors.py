"""The project's error types. Every message says what went wrong, where, and how to fix it."""

from __future__ import annotations


class AutoforgeError(Exception):
    """Base of every error AutoForge raises on purpose."""


class ConfigError(AutoforgeError):
    """A setting, flag or parameter is invalid."""


class ToolDocError(AutoforgeError):
    """A tool document cannot be parsed. Carries the file, the location inside it and the reason."""

    def __init__(self, reason: str, *, path: str | None = None, location: str | None = None):
        self.reason = reason
        self.path = path
        self.location = location
        where = path or "<input>"
        if location:
            where += f" at {location}"
        super().__init__(f"{where}: {reason}")


class UnsafeCodeError(AutoforgeError):
    """Generated tool code failed a static check (syntax, disallowed name or construct)."""


class SandboxError(AutoforgeError):
    """Tool code could not be executed safely (time or memory limit, crashed worker)."""


class LLMError(AutoforgeError):
    """An LLM call failed after its retries, or its reply never validated."""


class WarehouseError(AutoforgeError):
    """A warehouse operation failed."""


class WarehouseBusyError(WarehouseError):
    """Another process holds the DuckDB file (DuckDB allows one writer process at a time)."""


class ReadOnlyQueryError(WarehouseError):
    """A statement given to the read-only SQL command would write."""


class CheckpointError(ConfigError):
    """A checkpoint or model folder is damaged, foreign or unsafe to load (truncated weights, garbage JSON,
    pickle files, a latest.json pointing outside its folder). Names the file, what is wrong and what to do;
    the CLI prints it as one line and exits 2 like any bad input."""
