"""All-or-nothing file writes for what a training run leaves on disk (reports, JSON, PNGs, pointers).

A run can be killed at any instant (SIGKILL, OOM killer, a pre-empted machine). Every file the run
writes goes to a temporary name in the same folder, is flushed and fsynced, and is then renamed
over the real name with ``os.replace`` (atomic on POSIX and Windows within one file system), so a
reader sees the previous complete file or the new complete file, never half of one. Temporary
names start with ``.`` and end with ``.tmp`` (:data:`TMP_SUFFIX`): the next run's
:func:`autoforge.rl.checkpoint.clean_staging` removes any a kill left behind.

Plain files only; no torch at import time.
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def tmp_name(path: Path) -> Path:
    """The temporary sibling of ``path`` a write goes through (hidden, unique to this process)."""
    return path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")


def fsync_dir(folder: str | Path) -> None:
    """Make a rename inside ``folder`` durable (a no-op where directories cannot be opened, e.g. Windows)."""
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` all or nothing: a temp file in the same folder, flushed, fsynced, renamed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return path


def write_text(path: str | Path, text: str) -> Path:
    """:func:`write_bytes` of ``text`` as UTF-8."""
    return write_bytes(path, text.encode("utf-8"))
