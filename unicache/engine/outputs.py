"""Output files: checked before a run starts, written atomically when it ends.

:func:`check_output_file` and :func:`check_output_dir` refuse a path that
cannot be written (a directory where a file goes, a file where a directory
goes, an unwritable or read-only parent) with :class:`OutputPathError`, before
any work is done. Parent directories that do not exist yet are allowed and are
created only when the output is written. :func:`write_atomic` writes a temp file
next to the target, fsyncs it, renames it over the target and fsyncs the
directory, so a reader never sees half a report.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputPathError(ValueError):
    """An output path cannot be written; the message names it and the option."""


def _nearest_existing(path: Path) -> Path:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _check_writable_dir(directory: Path, option: str, target: Path) -> None:
    existing = _nearest_existing(directory)
    if not existing.is_dir():
        raise OutputPathError(f"{option} {target}: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise OutputPathError(f"{option} {target}: directory {existing} is not writable")
    if existing == directory:
        try:
            with tempfile.NamedTemporaryFile(dir=directory, prefix=".unicache-probe-"):
                pass
        except OSError as exc:
            raise OutputPathError(f"{option} {target}: cannot write in {directory} ({exc.strerror or exc})") from None


def check_output_file(path: Path, option: str) -> None:
    """Refuse ``path`` unless a file can be written there (see the module docstring)."""
    if path.is_dir():
        raise OutputPathError(f"{option} {path}: is a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise OutputPathError(f"{option} {path}: is not writable")
    _check_writable_dir(path.parent, option, path)


def check_output_dir(path: Path, option: str) -> None:
    """Refuse ``path`` unless files can be created in it (it may not exist yet)."""
    if path.exists() and not path.is_dir():
        raise OutputPathError(f"{option} {path}: is not a directory")
    _check_writable_dir(path, option, path)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via temp file + fsync + rename + directory fsync."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
