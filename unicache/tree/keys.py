"""Token ids as key bytes: the per-tree key width (4 or 8 bytes a token), encoding and decoding.

A tree stores each node's token ids as bytes (`Node.kb`), `token_bytes` bytes
an id in native byte order, so matching compares memory, not int objects. The
width is a property of the tree (`CacheConfig.token_bytes`): 4 bytes holds ids
in ``0 .. 2**31 - 1`` (every vocabulary; half the bytes of 8), 8 bytes holds
ids in ``0 .. 2**63 - 1``. An id outside the width's range raises
`TokenIdRangeError` naming it, its position and the width: nothing is
wrapped or truncated.
"""

from __future__ import annotations

import operator
import sys
from array import array
from collections.abc import Iterable
from typing import Final, SupportsIndex, cast

import numpy as np

from unicache.config import TokenBytes
from unicache.errors import InvalidArgumentError, TokenIdRangeError

MAX_TOKEN_ID_4: Final = (1 << 31) - 1
MAX_TOKEN_ID_8: Final = (1 << 63) - 1

_U32: Final = np.dtype(np.uint32)
_U64: Final = np.dtype(np.uint64)
_LITTLE: Final = sys.byteorder == "little"

assert array("I").itemsize == 4 and array("Q").itemsize == 8 and array("i").itemsize == 4


def max_token_id(token_bytes: int) -> int:
    """The largest token id a key of `token_bytes` bytes a token holds."""
    if token_bytes == 4:
        return MAX_TOKEN_ID_4
    if token_bytes == 8:
        return MAX_TOKEN_ID_8
    raise InvalidArgumentError(f"token_bytes must be 4 or 8, got {token_bytes!r}")


def token_bytes_for(max_id: int) -> TokenBytes:
    """The narrower width whose keys hold ids up to `max_id` (4 when it fits, else 8)."""
    if max_id < 0 or max_id > MAX_TOKEN_ID_8:
        raise TokenIdRangeError(max_id, None, 8)
    return 4 if max_id <= MAX_TOKEN_ID_4 else 8


def _refuse(tokens: Iterable[object], token_bytes: int, cause: str) -> InvalidArgumentError:
    """The error naming the first token id that is not an int or is outside the width's range.

    `tokens` is typed `object` items: the compiled build would reject a
    non-int item before this could name it.
    """
    limit = max_token_id(token_bytes)
    for i, t in enumerate(tokens):
        try:
            v = operator.index(cast(SupportsIndex, t))
        except TypeError:
            return InvalidArgumentError(f"token {i} is {t!r}, not an int token id")
        if v < 0 or v > limit:
            return TokenIdRangeError(v, i, token_bytes)
    return InvalidArgumentError(f"tokens must be token ids that fit {token_bytes}-byte keys: {cause}")


def encode_tokens(tokens: Iterable[int], token_bytes: int) -> bytes:
    """Token ids as key bytes, `token_bytes` (4 or 8) each in native byte order.

    An `array("q")` (the form traces and the SGLang harness use) is checked
    and narrowed at width 4 by numpy over its buffer, no int objects: the
    range test reads the element `argmax` finds (`max()` goes through the
    ufunc reduction machinery, about 2 µs more a call); an `array("q")` at
    width 8 and an `array("i")` at width 4 cost one copy and a sign-byte
    check; any other sequence of ints is converted by `array`. Ids outside
    ``0 .. max_token_id(token_bytes)`` raise `TokenIdRangeError` (the first
    one, with its position); non-integers and `bytes` raise
    `InvalidArgumentError`.
    """
    if type(tokens) is array:
        code = tokens.typecode
        if code == "q" and token_bytes == 4:
            if not tokens:
                return b""
            a = np.frombuffer(tokens, _U64)
            if int(a[a.argmax()]) > MAX_TOKEN_ID_4:
                raise _refuse(tokens, 4, "out of range")
            return a.astype(_U32).tobytes()
        if (code == "q" and token_bytes == 8) or (code == "i" and token_bytes == 4):
            data = tokens.tobytes()
            if not data[token_bytes - 1 if _LITTLE else 0 :: token_bytes].isascii():
                raise _refuse(tokens, token_bytes, "out of range")
            return data
    else:
        kind: type = type(tokens)
        if kind is bytes or kind is bytearray or kind is str:
            raise InvalidArgumentError(f"tokens must be a sequence of ints, not {kind.__name__}")
        if kind is not list and kind is not tuple and kind is not range:
            tokens = list(tokens)
    if token_bytes == 4:
        code, sign = "I", 3
    elif token_bytes == 8:
        code, sign = "Q", 7
    else:
        raise InvalidArgumentError(f"token_bytes must be 4 or 8, got {token_bytes!r}")
    try:
        data = array(code, tokens).tobytes()
    except (OverflowError, TypeError) as e:
        raise _refuse(tokens, token_bytes, str(e)) from None
    if not data[sign if _LITTLE else 0 :: token_bytes].isascii():
        raise _refuse(tokens, token_bytes, "out of range")
    return data


def decode_tokens(data: bytes, token_bytes: int) -> tuple[int, ...]:
    """The token ids of key bytes of `token_bytes` (4 or 8) a token (the inverse of `encode_tokens`)."""
    max_token_id(token_bytes)
    if len(data) % token_bytes:
        raise InvalidArgumentError(
            f"{len(data)} key bytes are not a whole number of {token_bytes}-byte token ids"
        )
    view = memoryview(data)
    ids = tuple(view.cast("i") if token_bytes == 4 else view.cast("q"))
    if ids and min(ids) < 0:
        i = next(k for k, v in enumerate(ids) if v < 0)
        raise TokenIdRangeError(ids[i] + (1 << (8 * token_bytes)), i, token_bytes)
    return ids

