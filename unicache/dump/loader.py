"""Read a crash dump: strict JSON only (no pickle, nothing executed), read with a size bound, then validated."""

from __future__ import annotations

import codecs
import json
import os
from pathlib import Path

from unicache.dump.errors import DumpError, DumpReadError
from unicache.dump.schema import JSON, CrashDump

MAX_BYTES = 1 << 30
"""Largest dump read (bytes); the file is read in chunks and refused as soon as it grows past this."""
_CHUNK = 1 << 20
_WHITESPACE = b" \t\r\n"


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
    except RecursionError:
        raise DumpReadError("JSON nested too deeply to be a dump", path=source) from None
    except ValueError as exc:
        raise DumpReadError(f"not valid JSON: {exc}", path=source) from None
    try:
        return CrashDump.from_json(data)
    except DumpError as exc:
        if exc.path is None and source is not None:
            exc.path = source
            exc.args = (f"{source}: {exc.args[0]}",)
        raise


def _refuse_start(head: bytes, name: str) -> None:
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError as exc:
        raise DumpReadError(f"not UTF-8 text: {exc}", path=name) from None
    raise DumpReadError(f"not a JSON object (starts with {head!r})", path=name)


def read_bounded(path: Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of ``path``, refusing more than ``limit`` and anything that does not start like a JSON object.

    Works on pipes and devices too (``/dev/zero`` fails on its first byte,
    an endless stream of JSON at the limit), never reading past ``limit + 1`` bytes.
    """
    name = str(path)
    chunks: list[bytes] = []
    total = 0
    try:
        with path.open("rb") as f:
            while True:
                chunk = f.read(min(_CHUNK, limit + 1 - total))
                if not chunk:
                    break
                if not chunks:
                    head = chunk.lstrip(_WHITESPACE)
                    if head and not head.startswith(b"{"):
                        _refuse_start(head[:8], name)
                chunks.append(chunk)
                total += len(chunk)
                if total > limit:
                    raise DumpReadError(f"larger than the {limit}-byte limit", path=name)
    except OSError as exc:
        raise DumpReadError(f"cannot read: {exc.strerror or exc}", path=name) from None
    return b"".join(chunks)


def load_dump(path: str | os.PathLike[str]) -> CrashDump:
    """Read and validate the crash dump at `path`.

    Raises `DumpReadError` (missing, unreadable, too large or too deep, not
    JSON), `DumpVersionError` (not a dump, or an unsupported version) or
    `DumpFormatError` (a bad field, with its JSON path); all are `DumpError`.
    """
    p = Path(path)
    name = str(p)
    raw = read_bounded(p)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DumpReadError(f"not UTF-8 text: {exc}", path=name) from None
    return parse_dump(text, source=name)
