"""SQLAlchemy engines for the warehouse, the supported databases, and the one-writer rule.

Supported databases: a DuckDB file (a path, or ``duckdb:///PATH``) and PostgreSQL
(``postgresql://USER@HOST/DB``, driver psycopg 3). Any other URL is refused by
:func:`resolve_url` before anything is opened.

DuckDB lets one process hold a file open for writing, and while it does no other process
can open it at all (not even read-only). So every connection here is short-lived (NullPool:
open, do one batch, close), and opening a busy file is retried with a bounded backoff for
``Settings.lock_timeout_s`` seconds (``AUTOFORGE_LOCK_TIMEOUT``, default 30) before a
:class:`~autoforge.errors.WarehouseBusyError` says who holds it. The file is never written
by two processes at once, so it cannot be corrupted by us. A new file is never created by
DuckDB in place (:func:`create_duckdb_file`): it is built under a temporary name and linked
into place whole, so two processes creating one warehouse at once cannot wipe each other's
first transaction. DuckDB also reads a file's headers before it takes its lock, and does not
read them again once it holds it: a connection that read them, then got the lock only after
another process had committed and closed, writes on top of that commit as if it never
happened. So every connection of ours holds a lock of our own on the file (``flock``: exclusive
to write, shared to read) from before DuckDB opens it until DuckDB has closed it
(:class:`_FileLock`), and DuckDB only ever reads headers no one can change under it.

Every DuckDB connection sees the warehouse and nothing else: external access (files, URLs,
extension installs) is off, extensions are never installed or loaded on demand, and the
configuration is locked so no statement can turn these back on. The one exception is
``connect(..., files=[...])`` (``autoforge export``): DuckDB may then read and write exactly
those paths. A PostgreSQL connection opened ``read_only`` runs in a read-only transaction.
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

from autoforge.errors import WarehouseBusyError, WarehouseError
from autoforge.settings import get_settings, warehouse_url

try:
    import fcntl
except ImportError:  # Windows: DuckDB's own lock is all there is
    fcntl = None  # type: ignore[assignment]

# Files are written in a format the stock `duckdb` shell of the 1.5 line can still open.
DUCKDB_STORAGE_VERSION = "v1.5.0"

SUPPORTED_DATABASES = (
    "a DuckDB file (a path, or duckdb:///PATH) or PostgreSQL (postgresql://USER@HOST/DB, driver psycopg 3: "
    "the postgres extra, pip install \"autoforge[postgres]\")"
)

_LOCK_PATTERNS = ("Could not set lock", "Conflicting lock", "database is locked")

# DuckDB settings every connection gets at open: nothing outside the warehouse, no extension fetched.
_DUCKDB_LOCKDOWN: dict[str, Any] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "lock_configuration": True,
}
# Settings a duckdb:// URL may carry (?threads=4): none of them reaches outside the warehouse.
_DUCKDB_URL_SETTINGS = frozenset(
    # Not temp_directory: DuckDB adds it to the paths a locked-down connection may read.
    {"threads", "memory_limit", "max_memory", "preserve_insertion_order"}
)
_POSTGRES_SCHEMES = ("postgresql", "postgresql+psycopg")

# What DuckDB says when a file is not a (whole) DuckDB database.
_CORRUPT_PATTERNS = (
    "not a valid DuckDB database file",
    "Could not read enough bytes",
    "Corrupt database file",
    "checksum",
    "Failed to load metadata",
    "Failure while replaying WAL",
    "Serialization Error",
)
_DUCKDB_MAGIC = b"DUCK"  # bytes 8..12 of every DuckDB database file
_HEADERS_SIZE = 3 * 4096  # the main header and the two database headers, before the first block


def shown_url(url: str) -> str:
    """``url`` as it may appear in a message: any password replaced by ``***``."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - not a URL SQLAlchemy can parse: show only its scheme
        return url.split("://", 1)[0] + "://..."


def _refuse_url(url: str, why: str) -> WarehouseError:
    return WarehouseError(
        f"warehouse URL {shown_url(url)!r} is not supported: {why}. Supported: {SUPPORTED_DATABASES}. "
        "Pass one of these to --warehouse or AUTOFORGE_WAREHOUSE."
    )


def check_supported_url(url: str) -> str:
    """Return ``url`` in the form the engine uses, or raise WarehouseError if it is not DuckDB/PostgreSQL.

    ``postgresql://`` is given the psycopg 3 driver; a ``duckdb://`` URL must name a local
    file (or ``:memory:``) and may carry only the settings in ``_DUCKDB_URL_SETTINGS``.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise _refuse_url(url, "it has no scheme")
    if scheme == "duckdb":
        if not rest.startswith("/"):
            raise _refuse_url(url, "a DuckDB URL is duckdb:///PATH (three slashes), or give the plain file path")
        path = rest.lstrip("/").split("?", 1)[0]
        if path.lower().startswith(("md:", "motherduck:")):
            raise _refuse_url(url, "a MotherDuck database is not a local file")
        try:
            query = sa.engine.make_url("duckdb://" + rest).query
        except sa.exc.ArgumentError as exc:
            raise _refuse_url(url, f"it cannot be parsed ({exc})") from exc
        extra = sorted(set(query) - _DUCKDB_URL_SETTINGS)
        if extra:
            raise _refuse_url(
                url,
                f"the setting(s) {', '.join(extra)} cannot be set from the URL (external access and extensions "
                f"stay off); allowed: {', '.join(sorted(_DUCKDB_URL_SETTINGS))}",
            )
        return "duckdb://" + rest
    if scheme in _POSTGRES_SCHEMES:
        return "postgresql+psycopg://" + rest
    if scheme == "postgres" or scheme.startswith("postgresql+"):
        raise _refuse_url(url, f"write postgresql://... (driver psycopg 3) instead of {scheme}://...")
    raise _refuse_url(url, f"{scheme}:// is neither DuckDB nor PostgreSQL")


def resolve_url(warehouse: str | None) -> str:
    """``None`` -> the setting (``AUTOFORGE_WAREHOUSE`` or ./autoforge.duckdb); a path -> a DuckDB URL.

    Raises WarehouseError for a URL of a database other than DuckDB or PostgreSQL.
    """
    return check_supported_url(warehouse_url(warehouse if warehouse is not None else get_settings().warehouse))


def is_duckdb(url: str) -> bool:
    return url.startswith("duckdb:")


def duckdb_path(url: str) -> Path | None:
    if not is_duckdb(url):
        return None
    path = url.split(":///", 1)[-1].split("?", 1)[0]
    return None if path in ("", ":memory:") else Path(path)


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def make_engine(url: str, *, read_only: bool = False, files: Sequence[Path] = (), memory_mb: int | None = None) -> sa.Engine:
    """An engine whose DuckDB connections are locked down (see the module doc).

    ``files``: paths DuckDB may read and write besides the warehouse (``autoforge export``'s
    target); with none, no file outside the warehouse can be touched at all. ``memory_mb``: DuckDB's
    ``memory_limit`` (user SQL: ``AUTOFORGE_SQL_MEMORY_MB``), set before the configuration is locked;
    a ``?memory_limit=`` in the URL still wins (duckdb-engine applies URL settings last).
    """
    if not is_duckdb(url):
        return sa.create_engine(url, poolclass=NullPool)
    config = dict(_DUCKDB_LOCKDOWN)
    if memory_mb is not None:
        config["memory_limit"] = f"{int(memory_mb)}MiB"
    if files:  # turned off after allowed_paths is set (see below)
        del config["enable_external_access"], config["lock_configuration"]
    if not read_only:
        config["storage_compatibility_version"] = DUCKDB_STORAGE_VERSION
    connect_args: dict[str, Any] = {"config": config}
    if read_only:
        connect_args["read_only"] = True
        config["temp_directory"] = ""  # a reader never spills to disk (and has no folder it may read)
    engine = sa.create_engine(url, poolclass=NullPool, connect_args=connect_args)
    if files:
        # allowed_paths can only be set while external access is on, so: allow, then close, then lock.
        allowed = ", ".join(_sql_string(str(p)) for p in files)

        @sa.event.listens_for(engine, "connect")
        def _allow_only(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.execute(f"SET allowed_paths = [{allowed}]")
            dbapi_conn.execute("SET enable_external_access = false")
            dbapi_conn.execute("SET lock_configuration = true")

    return engine


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc)
    return any(p in text for p in _LOCK_PATTERNS)


def _holder(exc: BaseException) -> str:
    m = re.search(r"held in (.+?) \(PID (\d+)\)", str(exc))
    return f"process {m.group(2)} ({m.group(1)})" if m else "another process"


def is_corruption(exc: BaseException) -> bool:
    """Whether a DuckDB error says the database file is damaged (truncated, not DuckDB, bad checksum)."""
    text = str(exc)
    return any(p in text for p in _CORRUPT_PATTERNS)


def corrupt_file_error(path: Path, reason: str) -> WarehouseError:
    """The error for a warehouse file DuckDB cannot read; it says the file was left as it was."""
    return WarehouseError(
        f"warehouse {path} is not a readable DuckDB database ({reason}); it was left untouched. "
        f"Restore it from a copy, or point --warehouse (or AUTOFORGE_WAREHOUSE) at a new file: "
        f"`autoforge init --warehouse NEW.duckdb` creates one."
    )


def check_duckdb_file(path: Path) -> None:
    """Refuse a path that exists but cannot be a DuckDB database, before DuckDB opens it.

    An empty file, a folder, or a file without DuckDB's header is refused here, so DuckDB
    never gets the chance to write into it.
    """
    if not path.exists():
        return
    if path.is_dir():
        raise WarehouseError(f"warehouse {path} is a folder, not a DuckDB file; point --warehouse at a file such as {path / 'autoforge.duckdb'}")
    try:
        with path.open("rb") as f:
            head = f.read(_HEADERS_SIZE)
    except OSError as exc:
        raise WarehouseError(f"cannot read warehouse {path}: {exc}. Check its permissions, or point --warehouse at another file.") from exc
    if len(head) < 12 or head[8:12] != _DUCKDB_MAGIC:
        raise corrupt_file_error(path, "the file does not start with DuckDB's header" if head else "the file is empty")
    if Path(f"{path}.wal").exists():
        return  # a checkpoint was cut off (e.g. the disk filled): DuckDB finishes it from the WAL on open
    size = path.stat().st_size
    problem = _size_problem(head, size)
    if problem:
        raise corrupt_file_error(path, f"the file is {size} bytes but {problem}: it was cut short")


def _size_problem(head: bytes, size: int) -> str | None:
    """Why a file of ``size`` bytes cannot hold the database DuckDB's newest header describes, if it can tell.

    Each of the two database headers (at 4 KiB and 8 KiB) holds, as little-endian u64:
    checksum, iteration, meta_block, free_list, block_count, block_alloc_size, ... The one
    with the higher iteration is current. A healthy file is the 12 KiB of headers plus whole
    blocks (``block_count`` is no bound: DuckDB truncates free blocks off the end), and the
    catalog's block (``meta_block``: block id in the low 56 bits) lies inside it. A file cut
    mid-block, or before its catalog, is damaged; a cut exactly at a block boundary past the
    catalog is caught by DuckDB when the missing block is read. Headers that do not look like
    that format say nothing.
    """
    if len(head) < _HEADERS_SIZE:
        return f"its headers need {_HEADERS_SIZE}"
    headers = [struct.unpack_from("<6Q", head, offset) for offset in (4096, 8192)]
    _checksum, _iteration, meta, _free, blocks, alloc = max(headers, key=lambda h: h[1])
    if not _plausible(blocks, alloc):
        return None
    if (size - _HEADERS_SIZE) % alloc:
        return f"a DuckDB file is {_HEADERS_SIZE} bytes of headers plus whole {alloc}-byte blocks"
    block = meta & ((1 << 56) - 1)
    if meta != (1 << 64) - 1 and block < blocks and size < _HEADERS_SIZE + (block + 1) * alloc:
        return f"its catalog lies in block {block}, beyond the end"
    return None


def _plausible(blocks: int, alloc: int) -> bool:
    return 4096 <= alloc <= 1 << 28 and alloc & (alloc - 1) == 0 and blocks < 1 << 40


def create_duckdb_file(path: Path) -> bool:
    """Create an empty warehouse file at ``path`` atomically, unless one is there; True if this call made it.

    DuckDB creates a missing file in steps: it stats the path, opens it (O_CREAT), takes the
    lock, then writes fresh, empty headers. A process that stats before another one creates
    the file, and locks after that one has committed and closed it (a scheduler pause of a
    fraction of a second is enough), overwrites the headers: every transaction the other
    process committed is gone (tables, migrations, its ``runs`` row) and both report success.
    So DuckDB only ever creates a file under a temporary name beside ``path``; the closed,
    complete file is then hard-linked to ``path``, which fails if the name is taken (another
    process won: its file is used). A DuckDB write connection is thus always given an existing
    whole file. On a file system without hard links DuckDB creates the file in place, as before.
    """
    if path.exists():
        return False
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.creating")
    try:
        engine = make_engine("duckdb:///" + str(tmp))
        try:
            engine.connect().close()  # DuckDB writes the headers of an empty database (storage version as set)
        finally:
            engine.dispose()
        try:
            os.link(tmp, path)
            return True
        except FileExistsError:
            return False  # another process created it meanwhile: theirs is the warehouse
        except OSError:  # no hard links here (some FUSE / SMB / FAT file systems): let DuckDB create it
            return False
    except Exception as exc:  # noqa: BLE001 - driver errors vary
        raise WarehouseError(
            f"cannot create warehouse {path}: {_first_line(exc)}. Check that its folder is writable, or point "
            "--warehouse (or AUTOFORGE_WAREHOUSE) at another file."
        ) from exc
    finally:
        for leftover in (tmp, Path(f"{tmp}.wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _first_line(exc: BaseException) -> str:
    return str(getattr(exc, "orig", None) or exc).strip().split("\n")[0]


class _FileLock:
    """This process's ``flock`` on a warehouse file, held around a whole DuckDB connection (see the module doc).

    ``flock`` locks belong to an open file, not to a process, and are independent of DuckDB's
    own ``fcntl`` lock, so closing this descriptor never drops DuckDB's lock. Connections of
    one process share one lock (counted): DuckDB shares one open database between them, and
    a thread must not wait for a lock its own process holds. Only processes that go through
    :func:`connect` take it; any other DuckDB client still meets DuckDB's lock.
    """

    _held: dict[str, list] = {}  # real path -> [descriptor, connections using it]
    _mutex = threading.Lock()

    def __init__(self, path: Path | None, shared: bool):
        self.path, self.shared, self.key = path, shared, None

    def acquire(self) -> bool:
        """Take the lock without waiting; False if another process holds it. Nothing to lock is True."""
        if fcntl is None or self.path is None or not self.path.exists():
            return True
        key = os.path.realpath(self.path)
        with self._mutex:
            entry = self._held.get(key)
            if entry is None:
                try:
                    fd = os.open(key, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                except OSError:
                    return True  # cannot open it to lock it: DuckDB will say why
                try:
                    fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return False
                except OSError:  # no flock on this file system (ENOLCK...): DuckDB's own lock only, as before
                    os.close(fd)
                    return True
                entry = self._held[key] = [fd, 0]
            entry[1] += 1
        self.key = key
        return True

    def release(self) -> None:
        if self.key is None:
            return
        with self._mutex:
            entry = self._held[self.key]
            entry[1] -= 1
            if entry[1] == 0:
                del self._held[self.key]
                os.close(entry[0])
        self.key = None

    def holder(self) -> str:
        """Who holds the lock, from /proc/locks where there is one."""
        with contextlib.suppress(OSError, ValueError):
            inode = os.stat(self.path).st_ino
            for line in Path("/proc/locks").read_text().splitlines():
                f = line.split()
                if len(f) >= 6 and f[1] == "FLOCK" and f[5].rsplit(":", 1)[-1] == str(inode) and f[4] != str(os.getpid()):
                    cmd = Path(f"/proc/{f[4]}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                    return f"process {f[4]} ({cmd or 'unknown'})"
        return "another process"


def _open(engine: sa.Engine, url: str, path: Path | None, timeout: float, lock: _FileLock) -> sa.Connection:
    """Connect, retrying a busy DuckDB file with backoff for ``timeout`` seconds; ``lock`` is held on success."""
    deadline = time.monotonic() + timeout
    delay = 0.05
    while True:
        busy: str | None = None
        exc: BaseException | None = None
        if not lock.acquire():
            busy = lock.holder()
        else:
            try:
                return engine.connect()
            except Exception as e:  # noqa: BLE001 - driver errors vary by backend
                lock.release()
                exc = e
                if not _is_lock_error(exc):
                    if path is not None and path.exists() and is_corruption(exc):
                        raise corrupt_file_error(path, _first_line(exc)) from exc
                    raise WarehouseError(
                        f"cannot open warehouse {path or shown_url(url)}: {_first_line(exc)}. Check the path or URL given to "
                        "--warehouse / AUTOFORGE_WAREHOUSE."
                    ) from exc
                busy = _holder(exc)
        if time.monotonic() >= deadline:
            raise WarehouseBusyError(
                f"warehouse {path or shown_url(url)} is in use by {busy}; DuckDB allows one process at a "
                f"time. Waited {timeout:.0f}s. Wait for that run to finish, raise AUTOFORGE_LOCK_TIMEOUT, "
                "or point --warehouse at another file."
            ) from exc
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


@contextlib.contextmanager
def connect(
    warehouse: str | None = None,
    *,
    read_only: bool = False,
    lock_timeout_s: float | None = None,
    files: Sequence[Path] = (),
    memory_mb: int | None = None,
) -> Iterator[sa.Connection]:
    """Open a short-lived connection; a write connection is one transaction (commit on success).

    A read-only connection opens a DuckDB file read-only, and on PostgreSQL runs in a
    read-only transaction that is rolled back at the end. ``files``: paths a DuckDB
    connection may read and write (only ``autoforge export`` needs this). ``memory_mb``: the DuckDB
    connection's memory limit (user SQL). A busy DuckDB file
    is retried with backoff up to ``lock_timeout_s``; then WarehouseBusyError. A damaged
    file raises WarehouseError and is left untouched.
    """
    url = resolve_url(warehouse)
    timeout = get_settings().lock_timeout_s if lock_timeout_s is None else lock_timeout_s
    path = duckdb_path(url)
    if read_only and path is not None and not path.exists():
        raise WarehouseError(
            f"warehouse {path} does not exist. Create it with `autoforge init --warehouse {path}` "
            "(or point AUTOFORGE_WAREHOUSE / --warehouse at an existing file)."
        )
    if path is not None:
        check_duckdb_file(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not read_only:
            create_duckdb_file(path)
    try:
        engine = make_engine(url, read_only=read_only, files=files, memory_mb=memory_mb)
    except (ImportError, sa.exc.ArgumentError, sa.exc.NoSuchModuleError) as exc:
        raise WarehouseError(
            f"cannot use warehouse URL {shown_url(url)!r}: {exc}. Install the database driver it names "
            "(for postgresql://, the postgres extra: pip install -e \".[postgres]\" in a checkout, or pip install "
            "\"autoforge[postgres]\") or use a DuckDB file path."
        ) from exc
    lock = _FileLock(path, shared=read_only)
    try:
        conn = _open(engine, url, path, timeout, lock)
    except BaseException:
        engine.dispose()
        raise
    try:
        if not read_only:
            with conn.begin():
                yield conn
        elif is_duckdb(url):
            yield conn
        else:
            tx = conn.begin()
            try:
                conn.exec_driver_sql("SET TRANSACTION READ ONLY")
                yield conn
            finally:
                tx.rollback()
    except Exception as exc:  # a damaged block met while reading or writing: say so, whoever caught it first
        if path is not None and is_corruption(exc):
            raise corrupt_file_error(path, _first_line(exc)) from exc
        raise
    finally:
        try:
            conn.close()
            engine.dispose()
        finally:
            lock.release()  # only once DuckDB has closed the file
