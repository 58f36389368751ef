"""Key bytes (`unicache.tree.keys`): both widths round-trip, and an id a width cannot hold is refused by name."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from unicache import CacheConfig, ConfigError, InvalidArgumentError, TokenIdRangeError
from unicache.tree import decode_tokens, encode_tokens, max_token_id, token_bytes_for

WIDTHS = (4, 8)


def _forms(ids: list[int]) -> list[Iterable[int]]:
    """Every input form `encode_tokens` takes: list, tuple, array("q"), range-free iterator."""
    return [ids, tuple(ids), array("q", ids), iter(ids)]


@pytest.mark.parametrize("tw", WIDTHS)
@given(ids=st.lists(st.integers(0, (1 << 31) - 1), max_size=64))
def test_round_trip_in_every_form(tw: int, ids: list[int]) -> None:
    want = array("i" if tw == 4 else "q", ids).tobytes()
    for form in _forms(ids):
        data = encode_tokens(form, tw)
        assert data == want and len(data) == tw * len(ids)
        assert decode_tokens(data, tw) == tuple(ids)
    assert encode_tokens(array("i", ids), tw) == want


@given(ids=st.lists(st.integers(0, max_token_id(8)), max_size=64))
def test_round_trip_of_64_bit_ids(ids: list[int]) -> None:
    for form in _forms(ids):
        assert decode_tokens(encode_tokens(form, 8), 8) == tuple(ids)


def test_bounds_are_inclusive_of_the_largest_id() -> None:
    assert max_token_id(4) == 2**31 - 1 and max_token_id(8) == 2**63 - 1
    for tw in WIDTHS:
        top = max_token_id(tw)
        assert decode_tokens(encode_tokens([0, top], tw), tw) == (0, top)
        assert decode_tokens(encode_tokens(array("q", [top, 0]), tw), tw) == (top, 0)
    assert encode_tokens(range(3), 4) == array("i", [0, 1, 2]).tobytes()


@pytest.mark.parametrize(
    ("tw", "ids", "bad", "pos"),
    [
        (4, [1, 2, 2**31], 2**31, 2),
        (4, [7, -1, 3], -1, 1),
        (4, [2**40, 5], 2**40, 0),
        (4, [3, 2**63], 2**63, 1),
        (8, [1, 2, 2**63], 2**63, 2),
        (8, [0, 0, 0, -2], -2, 3),
        (8, [2**64 + 1], 2**64 + 1, 0),
    ],
)
def test_out_of_range_ids_are_named_never_wrapped(tw: int, ids: list[int], bad: int, pos: int) -> None:
    forms: list[Iterable[int]] = [ids, tuple(ids), iter(ids)]
    if -(2**63) <= bad < 2**63:
        forms.append(array("q", ids))
    for form in forms:
        with pytest.raises(TokenIdRangeError) as info:
            encode_tokens(form, tw)
        err = info.value
        assert (err.token_id, err.position, err.token_bytes) == (bad, pos, tw)
        assert isinstance(err, InvalidArgumentError)
        text = str(err)
        assert f"token id {bad} at position {pos}" in text and f"{tw}-byte keys" in text
        assert str(max_token_id(tw)) in text


def test_array_of_int32_at_width_4_refuses_negatives() -> None:
    with pytest.raises(TokenIdRangeError, match="token id -3 at position 1"):
        encode_tokens(array("i", [4, -3]), 4)


@pytest.mark.parametrize("tw", WIDTHS)
def test_non_integers_are_refused(tw: int) -> None:
    with pytest.raises(InvalidArgumentError, match=r"token 1 is 1\.5, not an int token id"):
        encode_tokens(cast(list[int], [1, 1.5]), tw)
    for raw in (b"\x01\x02", bytearray(b"\x01"), "ab"):
        with pytest.raises(InvalidArgumentError, match="not"):
            encode_tokens(cast(list[int], raw), tw)


def test_width_must_be_4_or_8() -> None:
    for tw in (0, 2, 16):
        for call in (lambda: encode_tokens([1], tw), lambda: encode_tokens(array("q", [1]), tw),
                     lambda: decode_tokens(b"", tw), lambda: max_token_id(tw)):
            with pytest.raises(InvalidArgumentError, match=f"token_bytes must be 4 or 8, got {tw}"):
                call()


def test_decode_refuses_ragged_or_out_of_range_bytes() -> None:
    with pytest.raises(InvalidArgumentError, match="6 key bytes are not a whole number of 4-byte"):
        decode_tokens(b"\0" * 6, 4)
    high = (2**31 + 5).to_bytes(4, sys.byteorder)
    with pytest.raises(TokenIdRangeError) as info:
        decode_tokens(b"\0" * 4 + high, 4)
    assert (info.value.token_id, info.value.position) == (2**31 + 5, 1)


def test_token_bytes_for_picks_the_narrower_width() -> None:
    assert token_bytes_for(0) == 4 and token_bytes_for(2**31 - 1) == 4
    assert token_bytes_for(2**31) == 8 and token_bytes_for(2**63 - 1) == 8
    for bad in (-1, 2**63):
        with pytest.raises(TokenIdRangeError, match=f"token id {bad} is outside"):
            token_bytes_for(bad)


def test_config_validates_the_width() -> None:
    assert CacheConfig(device_tokens=8).token_bytes == 4
    assert CacheConfig(device_tokens=8, token_bytes=8).to_json()["token_bytes"] == 8
    for bad in (2, 16, True, "4", 4.0):
        with pytest.raises(ConfigError, match="token_bytes"):
            CacheConfig(device_tokens=8, token_bytes=bad)  # type: ignore[arg-type]
