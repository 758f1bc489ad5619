"""``autoforge export``: write one table or view to parquet, jsonl or csv."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from autoforge.errors import WarehouseError
from autoforge.warehouse.engine import connect, duckdb_path, is_duckdb, resolve_url
from autoforge.warehouse.store import query

FORMATS = ("parquet", "jsonl", "csv")


def relations(warehouse: str | None) -> list[str]:
    rows = query(
        warehouse,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name",
        read_only_check=False,
    )
    return [r["table_name"] for r in rows]


def export_relation(warehouse: str | None, relation: str, fmt: str, out: str | Path) -> int:
    """Write every row of ``relation`` to ``out``; returns the number of rows."""
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
    name = '"' + relation.replace('"', '""') + '"'
    if is_duckdb(url):
        # DuckDB writes the file itself (COPY TO writes the file, never the database). The connection may
        # touch only the target and the temporary file DuckDB writes first when the target exists.
        opts = {"parquet": "FORMAT parquet", "jsonl": "FORMAT json", "csv": "FORMAT csv, HEADER true"}[fmt]
        target = str(out).replace("'", "''")
        with connect(url, read_only=True, files=[out, out.with_name(f"tmp_{out.name}")]) as conn:
            try:
                conn.exec_driver_sql(f"COPY (SELECT * FROM {name}) TO '{target}' ({opts})")
            except Exception as exc:  # noqa: BLE001 - the driver's error, said with the path
                reason = str(getattr(exc, "orig", None) or exc).strip().split("\n")[0]
                raise WarehouseError(f"cannot write {out} ({reason}); check the folder exists and is writable, or pass another --out") from exc
            return int(conn.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar())
    if fmt == "parquet":
        raise WarehouseError("parquet export needs a DuckDB warehouse (or pyarrow); use jsonl or csv")
    rows = query(warehouse, f"SELECT * FROM {name}", read_only_check=False)
    with out.open("w", newline="") as f:
        if fmt == "jsonl":
            for r in rows:
                f.write(json.dumps(r, default=str) + "\n")
        else:
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else [])
            w.writeheader()
            w.writerows(rows)
    return len(rows)
