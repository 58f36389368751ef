"""Documented bounds on trace input: what a record may hold before it is refused, not clamped.

Every bound keeps one bad line from costing unbounded time or memory:

- ``MAX_LINE_BYTES``: one JSONL line (a longer one is refused before it is parsed);
- ``MAX_JSON_DEPTH``: nesting of ``[``/``{`` in one line (deeper is refused before
  ``json`` recurses);
- ``MAX_REQUEST_TOKENS``: prompt or output tokens of one request, after scaling;
- ``MAX_TRACE_TOKENS``: prompt plus output tokens of the whole loaded window;
- ``MAX_TOKEN_ID`` / ``MAX_HASH_ID``: a token id and a Mooncake block id must fit int64;
- timestamps must be finite and non-negative.
"""

from __future__ import annotations

import math

from unicache.traces.request import TraceFormatError

MAX_LINE_BYTES = 64 * 1024 * 1024
MAX_JSON_DEPTH = 64
MAX_REQUEST_TOKENS = 1 << 22
MAX_TRACE_TOKENS = 1 << 28
MAX_TOKEN_ID = (1 << 63) - 1
MAX_HASH_ID = (1 << 63) - 1


def is_int(value: object) -> bool:
    """A JSON integer (``True``/``False`` are not lengths or ids)."""
    return isinstance(value, int) and not isinstance(value, bool)


def json_depth_exceeds(raw: bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """True when brackets outside strings nest deeper than ``limit`` (a cheap pre-check)."""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    depth = 0
    in_string = False
    escaped = False
    for byte in raw:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def check_timestamp(value: object, where: str) -> float:
    """A finite, non-negative number of milliseconds."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TraceFormatError(f"{where}: timestamp must be a number, got {value!r}")
    try:
        ms = float(value)
    except OverflowError:
        raise TraceFormatError(f"{where}: timestamp {value} is out of range") from None
    if not math.isfinite(ms) or ms < 0:
        raise TraceFormatError(f"{where}: timestamp must be finite and >= 0, got {value!r}")
    return ms


def check_request_tokens(n: int, what: str, where: str) -> int:
    """``n`` tokens of one request, refused above :data:`MAX_REQUEST_TOKENS`."""
    if n > MAX_REQUEST_TOKENS:
        raise TraceFormatError(f"{where}: {what} of {n:,} tokens exceeds the bound of "
                               f"{MAX_REQUEST_TOKENS:,} tokens a request")
    return n


class TokenBudget:
    """Counts the tokens a loaded window holds and refuses past :data:`MAX_TRACE_TOKENS`."""

    __slots__ = ("used", "limit")

    def __init__(self, limit: int | None = None) -> None:
        self.used = 0
        self.limit = MAX_TRACE_TOKENS if limit is None else limit

    def take(self, n: int, where: str) -> None:
        self.used += n
        if self.used > self.limit:
            raise TraceFormatError(f"{where}: the trace window holds more than {self.limit:,} tokens "
                                   f"(prompt + output); load a smaller window (--requests)")
