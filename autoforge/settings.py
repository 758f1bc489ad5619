"""The one place that reads ``AUTOFORGE_*`` environment variables, and the valid range of every
numeric command-line flag and flow parameter.

Every setting has a default that works offline and is checked where it is read: a bad value
(``AUTOFORGE_TOOL_TIMEOUT=abc``, ``nan``, ``inf``, ``-1``, ``0``, empty, whitespace) raises
:class:`~autoforge.errors.ConfigError` naming the variable, the value, the valid range and an
example. ``autoforge`` reads the settings before any command runs, so a bad one is refused
before anything is written. Command-line flags override these (``--warehouse PATH`` beats
``AUTOFORGE_WAREHOUSE``).

    variable                   field            valid values                          default
    AUTOFORGE_WAREHOUSE        warehouse        DuckDB path/URL or postgresql:// URL  autoforge.duckdb
    AUTOFORGE_LOCK_TIMEOUT     lock_timeout_s   seconds, finite, [0.1, 86400]         30
    AUTOFORGE_BACKEND          backend          offline | openai                      offline
    AUTOFORGE_OPENAI_BASE_URL  openai_base_url  http(s)://host... (or OPENAI_BASE_URL) unset
    AUTOFORGE_OPENAI_API_KEY   openai_api_key   non-empty (or OPENAI_API_KEY)         EMPTY
    AUTOFORGE_OPENAI_MODEL     openai_model     non-empty                             gpt-4.1-mini
    AUTOFORGE_LLM_TIMEOUT      llm_timeout_s    seconds, finite, [0.1, 3600]          60
    AUTOFORGE_LLM_MAX_RETRIES  llm_max_retries  whole number, [0, 100]                4
    AUTOFORGE_LLM_MAX_REPAIRS  llm_max_repairs  whole number, [0, 20]                 2
    AUTOFORGE_TOOL_TIMEOUT     tool_timeout_s   seconds, finite, [0.01, 600]          2.0
    AUTOFORGE_TOOL_MEMORY_MB   tool_memory_mb   whole MB, [16, 65536]                 512
    AUTOFORGE_STAGE_WORKERS    stage_workers    whole number, [1, 256]                CPU cores
    AUTOFORGE_TASK_RUNNER      task_runner      thread | process | dask               thread
    AUTOFORGE_DASK_ADDRESS     dask_address     tcp:// or tls://host:port of a scheduler unset: a local cluster
    AUTOFORGE_TIMING           timing           1/true/yes/on or 0/false/no/off       off
    AUTOFORGE_BOUNDARY_SHARE   boundary_share   a share, finite, [0, 1]               0.15
    AUTOFORGE_ZERO_ON_RULE_BREAK zero_on_rule_break 1/true/yes/on or 0/false/no/off   on
    AUTOFORGE_SQL_TIMEOUT      sql_timeout_s    seconds, finite, [0.1, 86400]         60
    AUTOFORGE_SQL_MEMORY_MB    sql_memory_mb    whole MB, [16, 1048576]               2048
    AUTOFORGE_MCP_TOKEN        mcp_token        16+ printable ASCII characters, no spaces unset (never shown)
    AUTOFORGE_MCP_ALLOW_HOSTS  (mcp_allow_hosts()) host names / IPs, comma-separated     unset

``autoforge mcp --http`` demands ``Authorization: Bearer <AUTOFORGE_MCP_TOKEN>`` when the token is set
(and refuses to bind beyond loopback without one); AUTOFORGE_MCP_ALLOW_HOSTS adds Host names it
answers to (``--allow-host``). The list is read by :func:`mcp_allow_hosts` only when serving.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from autoforge.errors import ConfigError

BACKENDS = ("offline", "openai")
TASK_RUNNERS = ("thread", "process", "dask")  # the Prefect task runners of the stage flows (flows/_common.py)
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


# ----------------------------------------------------------------------------- ranges


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


@dataclass(frozen=True)
class Range:
    """The valid values of a number: whole (``integer``) or finite real, within ``[lo, hi]``.
    ``rule`` says in words what the number must be (the range is added in brackets)."""

    lo: float
    hi: float
    example: Any
    integer: bool = True
    rule: str = ""

    def describe(self) -> str:
        kind = "a whole number" if self.integer else "a finite number"
        span = f"{kind} in [{_num(self.lo)}, {_num(self.hi)}]"
        return f"{self.rule} ({span})" if self.rule and "[" not in self.rule else self.rule or span

    def problem(self, value: Any) -> str | None:
        """None when ``value`` is valid, else what is wrong with it."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "not a number"
        if self.integer and not isinstance(value, int):
            return "not a whole number"
        if not math.isfinite(value):
            return "not finite"
        if not self.lo <= value <= self.hi:
            return "out of range"
        return None

    def parse(self, text: str) -> tuple[Any, str | None]:
        """``(value, None)``, or ``(None, what is wrong)`` for text that is no valid value."""
        s = text.strip(_BLANKS)
        if not s:
            return None, "empty" if not text else "only whitespace"
        if s.lower() in _NOT_FINITE:
            return None, "not finite"
        control = _control_problem(s)
        if control:
            return None, control
        if not _NUMBER.fullmatch(s):  # plain ASCII digits only: no '1_000', no '٥', no '0x10'
            return None, "not a number"
        if self.integer and not _WHOLE.fullmatch(s):
            return None, "not finite" if not math.isfinite(float(s)) else "not a whole number"
        value: Any = int(s) if self.integer else float(s)
        if not self.integer and not math.isfinite(value):
            return None, "not finite"
        why = self.problem(value)
        return (None, why) if why else (value, None)


def range_message(rng: Range, got: Any, why: str, example: str) -> str:
    """The one wording of a bad number, after the name of what holds it: the valid range, what was
    given and why it is wrong, an example."""
    return f"must be {rng.describe()}: got {got!r} ({why}); e.g. {example}"


# Command-line flags and flow parameters (the CLI's argparse types, FactoryParams / EvalParams
# .validate_for_run, the stage flows). seed: tool_sequences.seed is an INTEGER column. Each range's
# example is a valid value that error messages show, no default: defaults live in the stage's
# params model (autoforge/pipeline/<stage>.py; tests/test_params_agree.py checks they are in range).
PARAMS: dict[str, Range] = {
    "tasks_per_env": Range(1, 100_000, 20, rule="a positive number of tasks"),
    "walks": Range(1, 1_000_000, 80, rule="a positive number of walks"),
    "merges": Range(0, 1_000_000, 80, rule="a number of merged walk pairs"),
    "min_len": Range(1, 50, 2, rule="a walk length in tool calls"),
    "max_len": Range(1, 50, 5, rule="a walk length in tool calls"),
    "dag_variants": Range(1, 100, 2, rule="a positive number of DAGs per sequence"),
    "attempts_per_task": Range(1, 1000, 4, rule="a positive number of attempts"),
    "max_envs": Range(1, 100_000, 3, rule="positive (unset: all environments)"),
    "seed": Range(0, 2**31 - 1, 0, rule=">= 0"),
    "test_fraction": Range(0, 1, 0.2, integer=False, rule="a share within [0, 1]"),
    "trials": Range(1, 1000, 4, rule="a positive number of trials per task"),
    "limit": Range(1, 10**9, 50, rule="a positive number of tasks (unset: all)"),
    "concurrency": Range(1, 1024, 4, rule="a positive number of episodes at once"),
    "user_error_rate": Range(0, 1, 0.2, integer=False, rule="a rate within [0, 1]"),
    "max_turns": Range(1, 10_000, 40, rule="a positive number of turns"),
    "max_tokens": Range(1, 10**7, 32_768, rule="a positive number of tokens"),
    "max_new_tokens": Range(1, 10**6, 1024, rule="a positive number of tokens"),
    "temperature": Range(0, 10, 0.0, integer=False, rule="a sampling temperature >= 0"),
    "train_steps": Range(0, 100_000, 2, rule="a number of ERPO steps, 0 skips training"),
    "serve_limit": Range(1, 1000, 1, rule="a positive number of flow runs at once"),
    "max_sessions": Range(1, 10_000, 64, rule="a positive number of MCP sessions at once (each holds a sandbox worker)"),
    "max_sessions_per_client": Range(1, 10_000, 16, rule="a positive number of MCP sessions one client address "
                                     "keeps when all are taken"),
    "unused_timeout_s": Range(1, 3600, 30, integer=False, rule="seconds an MCP session with no tool call may sit idle"),
}


def check_param(name: str, value: Any) -> Any:
    """``value`` when it is within ``PARAMS[name]``, else ConfigError naming the parameter."""
    rng = PARAMS[name]
    why = rng.problem(value)
    if why:
        raise ConfigError(f"{name} {range_message(rng, value, why, f'{name}={rng.example}')}")
    return value


def check_walk_lengths(min_len: int, max_len: int) -> None:
    """Walks are ``min_len`` to ``max_len`` tool calls long: the first may not exceed the second."""
    if min_len > max_len:
        raise ConfigError(f"walk lengths must satisfy min_len <= max_len (--min-len / --max-len), got {min_len} and "
                          f"{max_len}; e.g. min_len=2, max_len=5")


# ----------------------------------------------------------------------------- AUTOFORGE_* variables


@dataclass(frozen=True)
class Var:
    """One ``AUTOFORGE_<name>`` variable: what it is, its default and its valid values."""

    name: str
    what: str
    default: Any
    example: str
    range: Range | None = None
    kind: str = "text"  # text | choice | url | address | bool | token (a number has a range)
    choices: tuple[str, ...] = BACKENDS  # the values of a choice
    fallback: str | None = None  # a non-AUTOFORGE variable read when this one is unset
    default_text: str | None = None
    secret: bool = False  # an error never shows the value (an API key)

    @property
    def env(self) -> str:
        return f"AUTOFORGE_{self.name}"

    def valid(self) -> str:
        if self.range is not None:
            return self.range.describe()
        return {"choice": f"one of {', '.join(self.choices)}", "bool": f"{'/'.join(_TRUE)} or {'/'.join(_FALSE)}",
                "url": "an http:// or https:// URL with a host",
                "address": "a tcp:// or tls:// address with a host and a port",
                "token": f"at least {TOKEN_MIN_CHARS} printable ASCII characters without spaces"}.get(self.kind, "non-empty text")

    def error(self, got: Any, why: str, shown: str | None = None) -> ConfigError:
        """The one wording of a bad setting: the variable (``shown``), the value, the valid values, an example."""
        var = self.fallback if shown == self.fallback else self.env
        default = self.default_text or str(self.default)
        got = _hide_password(got) if isinstance(got, str) else got
        if self.secret:
            got = f"<hidden, {len(str(got))} characters>"
        return ConfigError(f"{shown or var} must be {self.what}, {self.valid()}: got {got!r} ({why}); e.g. "
                           f"{var}={self.example}, or unset {var} for the default ({default})")

    def problem(self, value: Any) -> str | None:
        """None when an already parsed ``value`` (from the variable or from code) is valid."""
        if value is None:
            return None if self.default is None else "missing"
        if self.range is not None:
            return self.range.problem(value)
        if self.kind == "bool" and not isinstance(value, bool):
            return "not a yes/no value"
        if self.kind == "choice" and value not in self.choices:
            return "unknown"
        if self.kind == "url" and not _is_url(value):
            return "not an http(s) URL"
        if self.kind == "address" and not _is_url(value, ("tcp", "tls"), port=True):
            return "not a tcp:// or tls:// host:port"
        if self.kind == "token":
            return token_problem(value)
        return None

    def parse(self, raw: str) -> tuple[Any, str | None]:
        if self.range is not None:
            return self.range.parse(raw)
        value = raw.strip(_BLANKS)
        if not value:
            return None, "empty" if not raw else "only whitespace"
        control = _control_problem(value)
        if control:
            return None, control
        if self.kind == "bool":
            low = value.lower()
            return (low in _TRUE, None) if low in _TRUE + _FALSE else (None, "not a yes/no value")
        if self.kind == "choice":
            value = value.lower()
        return value, self.problem(value)

    def read(self) -> Any:
        """The variable's value (or the fallback variable's, or the default); ConfigError when it is bad."""
        for name, raw in ((self.env, os.environ.get(self.env)),
                          (self.fallback, os.environ.get(self.fallback) if self.fallback else None)):
            if raw is None or (name == self.fallback and not raw.strip()):
                continue  # unset (an empty non-AUTOFORGE fallback counts as unset)
            value, why = self.parse(raw)
            if why:
                raise self.error(raw, why, shown=name)
            return value
        return self.default


def _is_url(value: Any, schemes: tuple[str, ...] = ("http", "https"), port: bool = False) -> bool:
    text = str(value)
    if any(c.isspace() or _is_control(c) or c == "\\" for c in text):
        return False
    try:
        u = urlparse(text)
        has_port = u.port is not None  # raises ValueError for a port that is no number or out of range
    except ValueError:
        return False
    return u.scheme in schemes and bool(u.hostname) and (has_port or not port)


TOKEN_MIN_CHARS = 16  # a bearer token shorter than this could be guessed; secrets.token_urlsafe(32) gives 43


def token_problem(value: str) -> str | None:
    """What is wrong with a bearer token (None: fine): too short to resist guessing, or holding a
    space or a character an HTTP header cannot carry."""
    if len(value) < TOKEN_MIN_CHARS:
        return f"shorter than {TOKEN_MIN_CHARS} characters"
    if not all(33 <= ord(c) < 127 for c in value):
        return "not printable ASCII without spaces"
    return None


_HOSTNAME = re.compile(r"(?=.{1,253}$)[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?)*",
                       re.ASCII)


def host_name(text: str) -> str | None:
    """A host name or IP address as compared: lower case, no brackets or trailing dot, an IP address in
    its canonical form (``0:0::1`` -> ``::1``, an IPv6 zone such as ``%eth0`` dropped); None for text
    that is neither."""
    import ipaddress

    name = text.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    name = name.split("%", 1)[0] if ":" in name else name
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    name = name[:-1] if name.endswith(".") else name
    return name if _HOSTNAME.fullmatch(name) and not name.replace(".", "").isdigit() else None


def mcp_allow_hosts() -> list[str]:
    """AUTOFORGE_MCP_ALLOW_HOSTS: the extra Host names ``autoforge mcp --http`` answers to (comma-separated;
    unset or empty: none). Read only when serving, not with every command's settings: a list of names
    has no single bad value to refuse. ConfigError naming the variable and the bad entry."""
    raw = os.environ.get("AUTOFORGE_MCP_ALLOW_HOSTS", "")
    out = []
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        name = host_name(entry)
        if name is None:
            raise ConfigError(f"AUTOFORGE_MCP_ALLOW_HOSTS must be host names or IP addresses, comma-separated: got "
                              f"{entry!r} (not a host name); e.g. AUTOFORGE_MCP_ALLOW_HOSTS=mcp.example.org,10.0.0.5")
        out.append(name)
    return out


def _is_control(c: str) -> bool:
    return ord(c) < 32 or 127 <= ord(c) < 160


def _control_problem(text: str) -> str | None:
    """A value (already stripped) holding a control character: a newline in an API key would
    become a second HTTP header line, and a stray \\x0b is a typo, not part of a number."""
    bad = next((c for c in text if _is_control(c)), None)
    return None if bad is None else f"contains the control character {bad!r}"


def _hide_password(text: str) -> str:
    try:
        u = urlparse(text)
        if u.password:
            return text.replace(f":{u.password}@", ":***@", 1)
    except ValueError:
        pass
    return text


_BLANKS = " \t\r\n"  # stripped from a value; any other control character is an error
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
_WHOLE = re.compile(r"[+-]?\d+", re.ASCII)
_NOT_FINITE = {"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"}


VARS: dict[str, Var] = {
    "warehouse": Var("WAREHOUSE", "the warehouse (a DuckDB file path, duckdb:///PATH or postgresql://USER@HOST/DB)", "autoforge.duckdb",
                     "data/autoforge.duckdb"),
    "lock_timeout_s": Var("LOCK_TIMEOUT", "the seconds a writer waits for a busy DuckDB file", 30.0, "30",
                          Range(0.1, 86_400, 30, integer=False)),
    "backend": Var("BACKEND", "the LLM backend", "offline", "offline", kind="choice"),
    "openai_base_url": Var("OPENAI_BASE_URL", "the OpenAI-compatible server", None, "http://127.0.0.1:8000/v1",
                           kind="url", fallback="OPENAI_BASE_URL", default_text="unset: offline only"),
    "openai_api_key": Var("OPENAI_API_KEY", "the API key of the server", "EMPTY", "EMPTY", fallback="OPENAI_API_KEY",
                          secret=True),
    "openai_model": Var("OPENAI_MODEL", "the model name on the server", "gpt-4.1-mini", "qwen3-8b"),
    "llm_timeout_s": Var("LLM_TIMEOUT", "the seconds one LLM request may take", 60.0, "60",
                         Range(0.1, 3600, 60, integer=False)),
    "llm_max_retries": Var("LLM_MAX_RETRIES", "the retries of a failed LLM request", 4, "4", Range(0, 100, 4)),
    "llm_max_repairs": Var("LLM_MAX_REPAIRS", "the repair requests after an invalid LLM reply", 2, "2",
                           Range(0, 20, 2)),
    "tool_timeout_s": Var("TOOL_TIMEOUT", "the seconds one sandboxed tool call may take", 2.0, "2.0",
                          Range(0.01, 600, 2.0, integer=False)),
    # The sandbox worker caps its address space at what the interpreter already uses + this many
    # MB (envs/_worker.py _set_limits); below 16 MB a tool copying a few thousand records fails.
    "tool_memory_mb": Var("TOOL_MEMORY_MB", "the memory (MB) a sandboxed tool may use on top of the interpreter",
                          512, "512", Range(16, 65_536, 512)),
    # Environments a stage works on at once: a Prefect stage flow's threads or processes; without Prefect
    # (`autoforge factory --no-prefect`, the stage modules' run) spawned worker processes
    # (autoforge/pipeline/parallel.py), capped by the environments; 1 runs them in the calling process.
    "stage_workers": Var("STAGE_WORKERS", "the environments a stage works on at once (Prefect's workers, or worker "
                         "processes without Prefect; 1: one after another)", None, "2", Range(1, 256, 2),
                         default_text="the number of CPU cores"),
    # Default thread for the factory and every stage flow: measured fastest on 2 cores (flows/factory.py).
    "task_runner": Var("TASK_RUNNER", "the Prefect task runner of the stage flows", None, "dask", kind="choice",
                       choices=TASK_RUNNERS, default_text="thread"),
    "dask_address": Var("DASK_ADDRESS", "the Dask scheduler the dask task runner connects to", None,
                        "tcp://127.0.0.1:8786", kind="address", default_text="unset: a local cluster of worker processes"),
    "timing": Var("TIMING", "the switch that makes the CLI print how long a command took", False, "1", kind="bool",
                  default_text="off"),
    # Issue 33: the share of an environment's generated tasks that are boundary tasks (the user asks for a
    # write a runtime rule forbids; autoforge/tasks/boundary.py), where its DAGs hold a guarded write.
    "boundary_share": Var("BOUNDARY_SHARE", "the share of generated tasks that are boundary tasks", 0.15, "0.15",
                          Range(0, 1, 0.15, integer=False)),
    # Issue 33: an episode that broke a rule (a refused call, a judged conversation rule) scores 0.
    "zero_on_rule_break": Var("ZERO_ON_RULE_BREAK", "the switch that scores a rule-breaking episode 0", True, "0",
                              kind="bool", default_text="on"),
    # Issue 36: user SQL (`autoforge sql`, query(read_only_check=True)) stops at this many seconds, rows printed
    # included (DuckDB: interrupted from a timer; PostgreSQL: statement_timeout), and its DuckDB connection may
    # use this much memory (a reader never spills to disk; a duckdb:///PATH?memory_limit=... URL overrides it).
    "sql_timeout_s": Var("SQL_TIMEOUT", "the seconds one `autoforge sql` query may run", 60.0, "60",
                         Range(0.1, 86_400, 60, integer=False)),
    "sql_memory_mb": Var("SQL_MEMORY_MB", "the memory (MB) DuckDB may use for one `autoforge sql` query", 2048,
                         "2048", Range(16, 1_048_576, 2048)),
    # Issue 36: `autoforge mcp --http` demands this bearer token (and will not bind beyond loopback without one).
    "mcp_token": Var("MCP_TOKEN", "the bearer token of `autoforge mcp --http`", None, "$(cat ~/.autoforge-mcp-token)",
                     kind="token", secret=True, default_text="unset: loopback binds only"),
}


def worker_environ() -> dict[str, str]:
    """Every ``AUTOFORGE_*`` variable set here: what a task runner's worker processes on other
    machines must see (flows/_common.py hands it to Dask workers)."""
    return {k: v for k, v in os.environ.items() if k.startswith("AUTOFORGE_")}


def setting(name: str) -> Any:
    """One setting by field name (e.g. ``setting("stage_workers")``), read and checked on its own."""
    return VARS[name].read()


def _from_env(name: str):
    return field(default_factory=lambda: VARS[name].read())


@dataclass(frozen=True)
class Settings:
    # Warehouse: a file path (DuckDB), "duckdb:///x.duckdb" or "postgresql://..." (others are refused).
    warehouse: str = _from_env("warehouse")
    # Seconds a writer waits for another process to release the DuckDB file before giving up.
    lock_timeout_s: float = _from_env("lock_timeout_s")
    # LLM backend: "offline" (deterministic rules, the default) or "openai" (any compatible server).
    backend: str = _from_env("backend")
    openai_base_url: str | None = _from_env("openai_base_url")
    openai_api_key: str = _from_env("openai_api_key")
    openai_model: str = _from_env("openai_model")
    llm_timeout_s: float = _from_env("llm_timeout_s")
    llm_max_retries: int = _from_env("llm_max_retries")
    llm_max_repairs: int = _from_env("llm_max_repairs")
    # Sandbox limits for generated tool code.
    tool_timeout_s: float = _from_env("tool_timeout_s")
    tool_memory_mb: int = _from_env("tool_memory_mb")
    # Threads of the Prefect stage flows (None: one per CPU core).
    stage_workers: int | None = _from_env("stage_workers")
    # Worker processes of the library path's stages (None: one per usable CPU core; 1: serial).
    # Task runner of the stage flows (thread | process | dask) and the Dask scheduler's address (None: local cluster).
    task_runner: str | None = _from_env("task_runner")
    dask_address: str | None = _from_env("dask_address")
    # Print how long each CLI command took (stderr).
    timing: bool = _from_env("timing")
    # Share of generated tasks that are boundary tasks (issue 33); a rule-breaking episode scores 0.
    boundary_share: float = _from_env("boundary_share")
    zero_on_rule_break: bool = _from_env("zero_on_rule_break")
    # Limits of user SQL (issue 36): seconds per query (rows printed included) and DuckDB memory in MB.
    sql_timeout_s: float = _from_env("sql_timeout_s")
    sql_memory_mb: int = _from_env("sql_memory_mb")
    # Bearer token of `autoforge mcp --http` (issue 36); never in a repr.
    mcp_token: str | None = field(default_factory=lambda: VARS["mcp_token"].read(), repr=False)

    def __post_init__(self) -> None:
        """Values given in code (``Settings(tool_timeout_s=-1)``, ``with_``) obey the same ranges."""
        for f in fields(self):
            var = VARS[f.name]
            value = getattr(self, f.name)
            why = var.problem(value) if var.range is not None or var.kind != "text" else None
            if why:
                raise var.error(value, why, shown=f"setting {f.name} ({var.env})")

    @property
    def warehouse_url(self) -> str:
        return warehouse_url(self.warehouse)

    def with_(self, **kw) -> "Settings":
        return replace(self, **{k: v for k, v in kw.items() if v is not None})


def warehouse_url(value: str) -> str:
    """A bare path means a DuckDB file; anything with ``://`` is a URL (checked by warehouse.resolve_url)."""
    if "://" in value:
        return value
    return f"duckdb:///{Path(value).expanduser().resolve()}"


def get_settings(**overrides) -> Settings:
    """The settings from the environment (ConfigError naming the variable when one is bad), with ``overrides``."""
    return Settings().with_(**overrides)
