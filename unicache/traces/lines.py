"""Reading JSONL traces: open a plain or gzipped file, and walk a window of its records."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from unicache.traces.request import TraceFormatError


def open_trace(path: Path) -> IO[bytes]:
    """``path`` opened for reading bytes, gunzipped when it ends in ``.gz``."""
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.open(path))
    return path.open("rb")


def iter_records(stream: IO[bytes], *, name: str, start: int = 0,
                 count: int | None = None) -> Iterator[tuple[int, str, object]]:
    """``(index, where, record)`` for records ``start .. start+count-1`` of a JSONL stream.

    Blank lines are skipped and not counted; ``where`` is ``name:line`` for errors.
    Only lines inside the window are parsed.
    """
    if start < 0 or (count is not None and count < 0):
        raise ValueError(f"request window start={start} count={count} must be non-negative")
    index = 0
    for lineno, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        if index >= start:
            if count is not None and index >= start + count:
                return
            where = f"{name}:{lineno}"
            try:
                record = json.loads(raw)
            except json.JSONDecodeError as exc:
                raise TraceFormatError(f"{where}: invalid JSON ({exc.msg})") from None
            yield index, where, record
        index += 1
