"""Reading JSONL traces: open a plain or gzipped file, and walk a window of its records.

Reads are bounded (:mod:`unicache.traces.bounds`): a line longer than
``MAX_LINE_BYTES`` or nested deeper than ``MAX_JSON_DEPTH`` is refused before it
is parsed; bytes that are not UTF-8, a truncated or corrupt ``.gz`` and an
unreadable file are all :class:`TraceFormatError` naming the file and line.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from unicache.traces.bounds import MAX_JSON_DEPTH, MAX_LINE_BYTES, json_depth_exceeds
from unicache.traces.request import TraceFormatError

_READ_ERRORS = (OSError, EOFError, zlib.error)


def open_trace(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, gunzipped when it ends in ``.gz``."""
    try:
        if path.suffix == ".gz":
            return cast(IO[bytes], gzip.open(path))
        return path.open("rb")
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot be read ({exc.strerror or exc})") from None


def _lines(stream: IO[bytes], name: str) -> Iterator[tuple[int, bytes]]:
    """``(lineno, line)`` with each read bounded; read errors become TraceFormatError."""
    lineno = 0
    while True:
        lineno += 1
        try:
            raw = stream.readline(MAX_LINE_BYTES + 1)
        except _READ_ERRORS as exc:
            kind = "truncated or corrupt gzip data" if isinstance(exc, EOFError | zlib.error | gzip.BadGzipFile) \
                else "read error"
            raise TraceFormatError(f"{name}:{lineno}: {kind} ({exc})") from None
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES:
            raise TraceFormatError(f"{name}:{lineno}: line longer than {MAX_LINE_BYTES:,} bytes")
        yield lineno, raw


def parse_line(raw: bytes, where: str) -> object:
    """One JSONL line -> its JSON value (TraceFormatError for anything else)."""
    if json_depth_exceeds(raw):
        raise TraceFormatError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceFormatError(f"{where}: not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{where}: invalid JSON ({exc.msg})") from None
    except (RecursionError, ValueError) as exc:
        raise TraceFormatError(f"{where}: unreadable JSON ({exc})") from None


def iter_records(stream: IO[bytes], *, name: str, start: int = 0,
                 count: int | None = None) -> Iterator[tuple[int, str, object]]:
    """``(index, where, record)`` for records ``start .. start+count-1`` of a JSONL stream.

    Blank lines are skipped and not counted; ``where`` is ``name:line`` for errors.
    Only lines inside the window are parsed.
    """
    if start < 0 or (count is not None and count < 0):
        raise ValueError(f"request window start={start} count={count} must be non-negative")
    index = 0
    for lineno, raw in _lines(stream, name):
        if not raw.strip():
            continue
        if index >= start:
            if count is not None and index >= start + count:
                return
            where = f"{name}:{lineno}"
            yield index, where, parse_line(raw, where)
        index += 1


def count_records(stream: IO[bytes], *, name: str) -> int:
    """Number of non-blank lines of a JSONL stream (read, not parsed)."""
    return sum(1 for _, raw in _lines(stream, name) if raw.strip())
