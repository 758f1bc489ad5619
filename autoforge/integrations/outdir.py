"""The output folder of the folder-shaped exports (``--format hf``, ``--format verl``, ``autoforge bundle``).

The same rules as ``autoforge export`` to a file (docs/hardening.md, "export"), for a folder:

- everything is written into a new temporary folder beside ``--out`` (``.NAME.tmp-PID-...``), which
  replaces ``--out`` only once it is complete: a failed export leaves ``--out`` as it was; one
  killed with SIGKILL leaves its temporary folder, which the next export to ``--out`` removes
  (``autoforge/atomic.py``);
- ``--out`` may be missing, an empty folder, or a previous export of this kind (it holds
  :data:`MARKER`, or a bundle's ``manifest.json``); anything else (a file, a folder with other
  files) is refused, never deleted;
- ``--out`` can be neither the warehouse nor a folder holding it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from autoforge.atomic import publish_dir, sweep_stale, temp_beside
from autoforge.errors import WarehouseError
from autoforge.pipeline.admin import warehouse_file

MARKER = "autoforge_export.json"  # what marks a folder as a previous export that a new one may replace
BUNDLE_MANIFEST, BUNDLE_FORMAT = "manifest.json", "autoforge-bundle"  # an environment bundle (integrations/bundle.py)


def _format_of(folder: Path) -> str | None:
    """The kind of export ``folder`` holds (``hf``, ``verl``, ``bundle``), None when it is not one."""
    for name in (MARKER, BUNDLE_MANIFEST):
        path = folder / name
        if not path.is_file():
            continue
        try:
            kind = json.loads(path.read_text()).get("format")
        except (OSError, ValueError, AttributeError):
            continue
        if name == BUNDLE_MANIFEST:
            return "bundle" if kind == BUNDLE_FORMAT else None
        return kind
    return None


def _what(fmt: str) -> str:
    return "bundle" if fmt == "bundle" else f"--format {fmt} export"


def check_out_dir(warehouse: str | None, out: str | Path, fmt: str) -> Path:
    """``out`` resolved, or WarehouseError saying why it cannot receive a ``fmt`` export."""
    out = Path(out).expanduser().resolve()
    wh = warehouse_file(warehouse)
    if wh is not None:
        wh = wh.resolve()
        if out == wh or out in wh.parents:
            raise WarehouseError(f"--out {out} is the warehouse or a folder holding it ({wh}); pass a new folder for "
                                 f"the {fmt if fmt == 'bundle' else fmt + ' export'}")
    with contextlib.suppress(OSError):  # a killed export's leftovers go first (a folder put aside comes back)
        sweep_stale(out)
    if out.exists() and not out.is_dir():
        raise WarehouseError(f"--out {out} is a file; {'a bundle' if fmt == 'bundle' else f'--format {fmt}'} writes a "
                             "folder: pass a folder path")
    if out.is_dir() and any(out.iterdir()):
        kind = _format_of(out)
        if kind != fmt:
            what = f"a {_what(kind)}" if kind else "files that are not an autoforge export"
            raise WarehouseError(f"--out {out} already holds {what}; only an empty folder or a previous {_what(fmt)} "
                                 "is replaced: pass another folder, or remove this one yourself")
    return out


@contextmanager
def staged_dir(out: Path) -> Iterator[Path]:
    """A temporary folder beside ``out`` that replaces ``out`` when the block ends without an error.

    First, what an earlier export killed mid-way left beside ``out`` (its ``.NAME.tmp-PID-...``
    folder, whose PID is gone) is removed, with one line on stderr (:func:`autoforge.atomic.sweep_stale`);
    a SIGKILL never runs our cleanup, so the next run must."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        sweep_stale(out)
        tmp = temp_beside(out)
        tmp.mkdir()
    except OSError as exc:
        raise WarehouseError(f"cannot create a folder beside --out {out} ({exc.strerror or exc}); check that "
                             f"{out.parent} is writable, or pass another --out") from exc
    try:
        yield tmp
        publish_dir(tmp, out)  # one swap where the system can; the previous folder is removed after
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_marker(folder: Path, fmt: str, info: dict) -> None:
    (folder / MARKER).write_text(json.dumps({"format": fmt, **info}, indent=2, sort_keys=True, default=str) + "\n")
