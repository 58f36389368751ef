"""Read a crash dump: strict JSON only (no pickle, nothing executed), then full validation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from unicache.dump.errors import DumpError, DumpReadError
from unicache.dump.schema import JSON, CrashDump

MAX_BYTES = 1 << 30


def _no_constants(name: str) -> JSON:
    raise ValueError(f"non-standard JSON constant {name}")


def _no_duplicates(pairs: list[tuple[str, JSON]]) -> dict[str, JSON]:
    out: dict[str, JSON] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def parse_dump(text: str, *, source: str | None = None) -> CrashDump:
    """Validate a dump given as JSON text; `source` names it in errors."""
    try:
        data: JSON = json.loads(text, parse_constant=_no_constants, object_pairs_hook=_no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise DumpReadError(f"not valid JSON: {exc}", path=source) from None
    try:
        return CrashDump.from_json(data)
    except DumpError as exc:
        if exc.path is None and source is not None:
            exc.path = source
            exc.args = (f"{source}: {exc.args[0]}",)
        raise


def load_dump(path: str | os.PathLike[str]) -> CrashDump:
    """Read and validate the crash dump at `path`.

    Raises `DumpReadError` (missing, unreadable, too large, not JSON),
    `DumpVersionError` (not a dump, or an unsupported version) or
    `DumpFormatError` (a bad field, with its JSON path); all are `DumpError`.
    """
    p = Path(path)
    name = str(p)
    try:
        size = p.stat().st_size
        if size > MAX_BYTES:
            raise DumpReadError(f"{size} bytes is larger than the {MAX_BYTES}-byte limit", path=name)
        raw = p.read_bytes()
    except OSError as exc:
        raise DumpReadError(f"cannot read: {exc.strerror or exc}", path=name) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DumpReadError(f"not UTF-8 text: {exc}", path=name) from None
    return parse_dump(text, source=name)
