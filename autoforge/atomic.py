"""All-or-nothing outputs: a file or folder is written under a temporary name beside its target and
takes the target's name whole, and what a killed writer left behind is cleared by the next one.

Every export (``autoforge export --format csv|parquet|jsonl|hf|verl|harbor``, ``autoforge bundle``)
writes ``.NAME.tmp-PID-XXXXXXXX`` in the target's folder (the same file system, so the last step is
a rename, never a copy), then:

- a file is flushed to disk (``fsync``) and ``os.replace``-d onto the target, and the folder is
  synced: a reader, or a run killed with SIGKILL at any instant, sees the previous file or the
  new one, never a part of one (:func:`publish_file`);
- a folder is swapped with the target in one ``renameat2(RENAME_EXCHANGE)`` where the kernel and
  file system offer it, else moved in with two renames (the previous folder steps aside as
  ``.NAME.old-PID-XXXXXXXX`` for an instant) (:func:`publish_dir`).

A writer killed mid-way leaves its temporary name. The next export to the same target removes
every such leftover whose PID is no longer alive on this machine (a live PID, e.g. a concurrent
export, is left alone) and says so in one line on stderr; a previous folder left aside as
``.old-`` while the target is missing is put back instead (:func:`sweep_stale`).

What a training run writes beside its checkpoints (reports, JSON, PNGs, ``latest.json``) goes through
:func:`write_bytes` / :func:`write_text`: a hidden ``.NAME.PID.tmp`` (:data:`TMP_SUFFIX`) in the same folder,
flushed, fsynced and renamed over the real name; :func:`autoforge.rl.checkpoint.clean_staging` removes any a
kill left behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import sys
import uuid
from pathlib import Path

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def temp_beside(out: Path, kind: str = "tmp") -> Path:
    """A new name beside ``out`` that :func:`sweep_stale` recognises: ``.NAME.tmp-PID-XXXXXXXX``."""
    return out.parent / f".{out.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine and is not a zombie (killed, not yet reaped)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _leftovers(out: Path) -> list[tuple[str, Path]]:
    """(kind, path) of every temporary name of ``out`` in its folder whose writer is gone: ``tmp`` or ``old``;
    DuckDB's own ``tmp_`` file of a temporary name counts as ``tmp``."""
    pattern = re.compile(r"(?:tmp_)?\." + re.escape(out.name) + r"\.(tmp|old)-(\d+)-[0-9a-f]{8}")
    found = []
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return []
    for p in entries:
        m = pattern.fullmatch(p.name)
        if m and not pid_alive(int(m.group(2))):
            found.append((m.group(1), p))
    return found


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def sweep_stale(out: Path, what: str = "export") -> list[str]:
    """Clear what killed writers of ``out`` left beside it; the names handled (also said in one line on stderr).

    A previous folder left aside (``.old-``) comes back as ``out`` when ``out`` is missing (the writer
    died between its two renames); otherwise leftovers are removed.
    """
    done: list[str] = []
    for kind, path in sorted(_leftovers(out), key=lambda kp: -kp[1].lstat().st_mtime):
        if kind == "old" and not os.path.lexists(out):
            path.rename(out)
            done.append(f"{path.name} (put back as {out.name})")
        else:
            _remove(path)
            done.append(path.name)
    if done:
        print(f"note: removed what an interrupted {what} left beside {out}: {', '.join(done)}", file=sys.stderr)
    return done


def fsync_dir(folder: str | Path) -> None:
    """Make a rename inside ``folder`` durable (a no-op where a folder cannot be opened or synced)."""
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened or synced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def publish_file(tmp: Path, out: Path) -> None:
    """``tmp`` (complete) becomes ``out`` in one step: flushed to disk, renamed over ``out``, folder synced."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, out)
    fsync_dir(out.parent)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))


def publish_dir(tmp: Path, out: Path) -> None:
    """Folder ``tmp`` (complete) takes the place of ``out``: swapped in one step where the system can, the
    previous ``out`` (if any) removed after."""
    if not os.path.lexists(out):
        tmp.rename(out)
        fsync_dir(out.parent)
        return
    if _exchange(tmp, out):  # now tmp holds the previous folder
        fsync_dir(out.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = temp_beside(out, "old")
    out.rename(old)  # the previous export (or an empty folder) steps aside ...
    try:
        tmp.rename(out)  # ... the new one takes its place ...
    except OSError:
        old.rename(out)  # ... or the previous one comes back
        raise
    fsync_dir(out.parent)
    shutil.rmtree(old, ignore_errors=True)


TMP_SUFFIX = ".tmp"  # the end of write_bytes' temporary names (autoforge.rl.checkpoint.clean_staging)


def tmp_name(path: Path) -> Path:
    """The temporary sibling of ``path`` that :func:`write_bytes` goes through (hidden, unique to this process)."""
    return path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")


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
