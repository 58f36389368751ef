"""Value types for command-line options: each parses one option's text or raises `argparse.ArgumentTypeError`.

Shared by the `unicache` subcommands (`cli`, `explore`), so one kind of value
is refused in the same words everywhere; argparse turns the error into its
one-line usage message and exit status 2.
"""

from __future__ import annotations

import argparse
import math


def positive(text: str) -> int:
    """A whole number >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be >= 1")
    return value


def non_negative(text: str) -> int:
    """A whole number >= 0."""
    value = _integer(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} must be >= 0")
    return value


def in_range(text: str, low: int, high: int) -> int:
    """A whole number in `low..high` (both included)."""
    value = _integer(text)
    if not low <= value <= high:
        raise argparse.ArgumentTypeError(f"{value} must be in {low}..{high}")
    return value


def positive_number(text: str) -> float:
    """A finite number > 0 (a ratio, a number of minutes or steps)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not value > 0:
        raise argparse.ArgumentTypeError(f"{value} must be a finite number > 0")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
