"""A throwaway PostgreSQL 15 server on 127.0.0.1 for tests and benchmarks.

``PgServer()`` runs ``initdb`` into a fresh temporary folder and starts the server on a free
port (trust authentication, loopback only, its Unix socket inside that folder, ``fsync=off``);
``stop()`` stops it (``pg_ctl stop -m immediate``) and removes the folder. PostgreSQL refuses
to run as root, so under root both run as the ``postgres`` user (``runuser``), and the folder
is handed to that user (``tempfile.mkdtemp`` makes it 0700: readable by its owner only).

The server binaries of Debian's package live off PATH in ``/usr/lib/postgresql/15/bin``
(``AUTOFORGE_PG_BIN`` points elsewhere). :func:`unavailable` says why no server can be
started here (no binaries, no psycopg), or None; tests skip with that reason, and only then.
Any other failure (initdb or start failing) raises :class:`PgStartError` with the server log.

Measured here (2 shared cores): initdb + start in 1.5-3 s.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

PG_BIN = Path(os.environ.get("AUTOFORGE_PG_BIN", "/usr/lib/postgresql/15/bin"))


class PgStartError(RuntimeError):
    """initdb or the server start failed; the message carries the command's output and the log."""


def unavailable() -> str | None:
    """Why no PostgreSQL server can be started here, or None when it can."""
    if not (PG_BIN / "initdb").exists():
        return f"PostgreSQL server binaries not found in {PG_BIN} (Debian: apt-get install postgresql-15; or set AUTOFORGE_PG_BIN)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed (pip install 'psycopg[binary]')"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One running server; ``url(db)`` is a superuser URL, ``create_database`` / ``create_reader`` set one up."""

    def __init__(self) -> None:
        reason = unavailable()
        if reason:
            raise PgStartError(reason)
        self.folder = Path(tempfile.mkdtemp(prefix="autoforge_pg_"))
        self._as_postgres: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root
            if shutil.which("runuser") is None:
                raise PgStartError("running as root without runuser: cannot start PostgreSQL as the postgres user")
            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise PgStartError("running as root and there is no `postgres` user to run the server as "
                                   "(Debian's postgresql package creates it; or run the tests as a normal user)") from None
            os.chown(self.folder, pw.pw_uid, pw.pw_gid)
            self._as_postgres = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self.data = self.folder / "data"
        self._ctl = [*self._as_postgres, str(PG_BIN / "pg_ctl"), "-D", str(self.data)]
        try:
            self._run([*self._as_postgres, str(PG_BIN / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
                       "--no-sync", "-E", "UTF8", "--locale", "C"])
            self._run([*self._ctl, "-o", f"-k {self.folder} -h 127.0.0.1 -p {self.port} -c fsync=off "
                       "-c synchronous_commit=off -c full_page_writes=off -c max_connections=50",
                       "-w", "-t", "30", "-l", str(self.folder / "log"), "start"])
        except BaseException:
            self.stop()
            raise

    def _run(self, cmd: list[str]) -> None:
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60)
        except subprocess.CalledProcessError as exc:
            log = self.folder / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise PgStartError(f"{' '.join(cmd)} failed (exit {exc.returncode}): {exc.stderr or exc.stdout}\n{tail}") from exc
        except (subprocess.SubprocessError, OSError) as exc:
            raise PgStartError(f"{' '.join(cmd)} failed: {exc}") from exc

    def url(self, db: str = "postgres", user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{db}"

    def execute(self, *statements: str, db: str = "postgres") -> None:
        """Run statements as the superuser, each in autocommit."""
        import psycopg

        with psycopg.connect(self.url(db), autocommit=True) as c:
            for st in statements:
                c.execute(st)

    def create_database(self, name: str) -> str:
        """A new empty database; returns its superuser URL."""
        self.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_reader(self, db: str, role: str = "reader") -> str:
        """A login role that may only read ``db``'s public tables and views (now and later); returns its URL."""
        self.execute(f'DO $$ BEGIN CREATE ROLE "{role}" LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$')
        self.execute(f'GRANT CONNECT ON DATABASE "{db}" TO "{role}"',
                     f'GRANT USAGE ON SCHEMA public TO "{role}"',
                     f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"',
                     f'ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO "{role}"', db=db)
        return self.url(db, role)

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            subprocess.run([*self._ctl, "-m", "immediate", "-w", "stop"], capture_output=True, timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> "PgServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
