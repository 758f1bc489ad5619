"""``autoforge export``: write one table or view to parquet, jsonl or csv, all or nothing (autoforge/atomic.py)."""

from __future__ import annotations

import contextlib
import csv
import json
from pathlib import Path

from autoforge.atomic import publish_file, sweep_stale, temp_beside
from autoforge.errors import WarehouseError
from autoforge.warehouse.engine import connect, duckdb_path, is_duckdb, resolve_url
from autoforge.warehouse.store import query
from autoforge.warehouse.stream import stream_query

FORMATS = ("parquet", "jsonl", "csv")


def relations(warehouse: str | None) -> list[str]:
    rows = query(
        warehouse,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name",
        read_only_check=False,
    )
    return [r["table_name"] for r in rows]


def export_relation(warehouse: str | None, relation: str, fmt: str, out: str | Path) -> int:
    """Write every row of ``relation`` to ``out``; returns the number of rows.

    All or nothing (``autoforge/atomic.py``): the rows go to ``.NAME.tmp-PID-...`` beside ``out``,
    which is synced to disk and renamed onto ``out`` only when complete. A run killed at any
    point leaves ``out`` as it was (the previous file, or nothing); the next export to ``out``
    removes the temporary file it left, with one line on stderr.
    """
    if fmt not in FORMATS:
        raise WarehouseError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    known = relations(warehouse)
    if relation not in known:
        raise WarehouseError(f"no table or view named {relation!r}; known: {', '.join(known)}")
    out = Path(out).expanduser().resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    url = resolve_url(warehouse)
    wh_path = duckdb_path(url)
    if wh_path is not None and out in (wh_path.resolve(), wh_path.resolve().with_name(wh_path.name + ".wal")):
        raise WarehouseError(f"--out {out} is the warehouse itself; pass another path for the exported file")
    if out.is_dir():
        raise WarehouseError(f"--out {out} is a folder; --format {fmt} writes one file: pass a file path")
    if fmt == "parquet" and not is_duckdb(url):
        raise WarehouseError("parquet export needs a DuckDB warehouse (or pyarrow); use jsonl or csv")
    name = '"' + relation.replace('"', '""') + '"'
    sweep_stale(out)
    tmp = temp_beside(out)
    duck_tmp = tmp.with_name(f"tmp_{tmp.name}")  # DuckDB's own temporary file, should the name exist
    try:
        n = _copy_duckdb(url, name, fmt, tmp, duck_tmp, out) if is_duckdb(url) else _write_rows(url, name, fmt, tmp)
        publish_file(tmp, out)
        return n
    finally:
        for leftover in (tmp, duck_tmp):  # nothing once published; a failed write's part-file otherwise
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _copy_duckdb(url: str, name: str, fmt: str, tmp: Path, duck_tmp: Path, out: Path) -> int:
    """DuckDB writes the file itself (COPY TO writes the file, never the database). The connection may
    touch only the temporary name (and DuckDB's own temporary file beside it)."""
    opts = {"parquet": "FORMAT parquet", "jsonl": "FORMAT json", "csv": "FORMAT csv, HEADER true"}[fmt]
    target = str(tmp).replace("'", "''")
    with connect(url, read_only=True, files=[tmp, duck_tmp]) as conn:
        try:
            conn.exec_driver_sql(f"COPY (SELECT * FROM {name}) TO '{target}' ({opts})")
        except Exception as exc:  # noqa: BLE001 - the driver's error, said with the path
            reason = str(getattr(exc, "orig", None) or exc).strip().split("\n")[0]
            raise WarehouseError(f"cannot write {out} ({reason}); check the folder exists and is writable, or pass "
                                 "another --out") from exc
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar())


def _write_rows(url: str, name: str, fmt: str, tmp: Path) -> int:
    """PostgreSQL: the rows streamed (batch by batch, never all in memory) into ``tmp`` as jsonl or csv."""
    n = 0
    with stream_query(url, f"SELECT * FROM {name}", user=False) as rows, tmp.open("w", newline="") as f:
        writer = csv.writer(f) if fmt == "csv" else None
        if writer is not None:
            writer.writerow(rows.columns)
        for batch in rows.batches:
            if writer is not None:
                writer.writerows(batch)
            else:
                f.writelines(json.dumps(dict(zip(rows.columns, r)), default=str) + "\n" for r in batch)
            n += len(batch)
    return n
