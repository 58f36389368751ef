"""The shared option value types: what each accepts and how it refuses."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from unicache.arguments import in_range, non_negative, positive, positive_number


@pytest.mark.parametrize(
    ("parse", "text", "value"),
    [(positive, "1", 1), (positive, "12", 12), (non_negative, "0", 0), (positive_number, "0.5", 0.5),
     (positive_number, "3", 3.0)],
)
def test_accepts(parse: Callable[[str], object], text: str, value: object) -> None:
    assert parse(text) == value


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [(positive, "0", "0 must be >= 1"), (positive, "x", "'x' is not an integer"),
     (positive, "1.5", "'1.5' is not an integer"), (non_negative, "-1", "-1 must be >= 0"),
     (positive_number, "0", "0.0 must be a finite number > 0"),
     (positive_number, "nan", "nan must be a finite number > 0"),
     (positive_number, "inf", "inf must be a finite number > 0"),
     (positive_number, "-2", "-2.0 must be a finite number > 0"),
     (positive_number, "ten", "'ten' is not a number")],
)
def test_refuses_naming_the_value(parse: Callable[[str], object], text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    assert str(info.value) == message


def test_in_range_includes_both_ends() -> None:
    assert in_range("0", 0, 3) == 0
    assert in_range("3", 0, 3) == 3
    for text in ("-1", "4"):
        with pytest.raises(argparse.ArgumentTypeError, match=rf"^{text} must be in 0\.\.3$"):
            in_range(text, 0, 3)
