"""How commands print rows: a rich table, CSV or JSON (``autoforge sql --format``), and the short forms
of values table cells use."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from typing import Any


def _jsonable(v: Any) -> Any:
    if hasattr(v, "isoformat"):
        return v.isoformat()
    if isinstance(v, (bytes, bytearray)):
        return v.hex()
    return v


def print_rows(rows: list[dict], fmt: str = "table", title: str | None = None, file=None) -> None:
    """Print query rows as a table (rich), CSV or JSON."""
    file = file or sys.stdout
    if fmt == "json":
        print(json.dumps([{k: _jsonable(v) for k, v in r.items()} for r in rows], indent=2, default=str), file=file)
        return
    if fmt == "csv":
        buf = io.StringIO()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]))
            w.writeheader()
            for r in rows:
                w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else _jsonable(v) for k, v in r.items()})
        print(buf.getvalue(), end="", file=file)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    cols = list(rows[0]) if rows else []
    for c in cols:
        table.add_column(str(c), overflow="fold")
    for r in rows:
        table.add_row(*[_cell(r[c]) for c in cols])
    Console(file=file, width=max(100, min(220, _term_width()))).print(table)
    if not rows:
        print("(no rows)", file=file)


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        s = json.dumps(v, default=str)
        return s if len(s) <= 120 else s[:117] + "..."
    return str(v)


def _term_width() -> int:
    try:
        return os.get_terminal_size().columns
    except OSError:
        return 160


def names_text(value: Any, most: int = 4) -> str:
    """A JSON list of names as a short comma list ("a, b, c +2 more")."""
    names = json.loads(value) if isinstance(value, str) else list(value or [])
    return (", ".join(names[:most]) + (f" +{len(names) - most} more" if len(names) > most else "")) or "-"


def share_text(v: Any) -> str:
    """A share (0..1) as a whole percentage; "-" for none."""
    return "-" if v is None else f"{v:.0%}"
