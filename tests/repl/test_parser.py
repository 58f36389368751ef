"""Splitting REPL lines: the same words as POSIX `shlex.split`, in one pass, for lines of any length."""

from __future__ import annotations

import random
import shlex

import pytest

from unicache.repl.errors import CommandSyntaxError
from unicache.repl.parser import split_line, split_words
from unicache.repl.refs import parse_tokens

CASES = [
    "", "   ", "insert 1..8", "insert  1,2,3\t4", "a'b c'd", 'a"b c"d', "'' x", '"" x', "a\\ b", "\\'x",
    '"a\\"b"', '"a\\\\b"', '"a\\xb"', "'a\\b'", "x 'y\"z'", "t:1..4 #2 @last", "é ü 中", "a\rb\nc",
]


@pytest.mark.parametrize("text", CASES)
def test_words_match_shlex(text: str) -> None:
    assert split_words(text) == shlex.split(text)


@pytest.mark.parametrize("text", ["'open", '"open', "trailing\\", '"ends in escape\\', "a 'b' \"c"])
def test_bad_quoting_is_the_same_error_as_shlex(text: str) -> None:
    with pytest.raises(ValueError) as expected:
        shlex.split(text)
    with pytest.raises(ValueError) as got:
        split_words(text)
    assert str(got.value) == str(expected.value)


def test_random_lines_match_shlex() -> None:
    """shlex is the oracle: 20,000 short lines over the characters that matter to quoting."""
    rng = random.Random(7)
    alphabet = list("ab1 ,.'\"\\\t#!@:\r\n") + ["é", "\x0b"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        try:
            expected: list[str] | str = shlex.split(text)
        except ValueError as exc:
            expected = str(exc)
        try:
            got: list[str] | str = split_words(text)
        except ValueError as exc:
            got = str(exc)
        assert got == expected, text


@pytest.mark.parametrize("sep", [",", " "])
def test_a_line_of_200000_tokens_parses(sep: str) -> None:
    """One word `0,1,...,199999` (quadratic in shlex) and 200,000 words both parse to the ids."""
    n = 200_000
    line = split_line("match " + sep.join(str(i) for i in range(n)))
    assert line is not None and line.name == "match"
    assert len(line.argv) == (1 if sep == "," else n)
    assert parse_tokens(line.argv) == list(range(n))


def test_a_bad_long_line_is_reported_in_one_short_line() -> None:
    with pytest.raises(CommandSyntaxError) as err:
        split_line("match " + ",".join(str(i) for i in range(100_000)) + " 'open")
    message = str(err.value)
    assert "No closing quotation" in message and len(message) < 300 and "characters)" in message
