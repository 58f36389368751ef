"""Command-line parsing: splitting a REPL line, per-command argparse specs, and typed argument access."""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NoReturn

from unicache.repl.errors import CommandSyntaxError

ALIASES = {
    "exit": "quit",
    "q": "quit",
    "?": "help",
    "load_back": "load-back",
    "loadback": "load-back",
    "lb": "load-back",
}


class ReplArgumentParser(argparse.ArgumentParser):
    """An argparse parser that raises `CommandSyntaxError` instead of printing and exiting."""

    def __init__(self, prog: str, description: str = "", epilog: str | None = None) -> None:
        super().__init__(
            prog=prog,
            description=description,
            epilog=epilog,
            add_help=False,
            allow_abbrev=False,
            exit_on_error=False,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    def error(self, message: str) -> NoReturn:
        raise CommandSyntaxError(self.prog, f"{message} (usage: {self.format_usage().strip()[7:]})")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise CommandSyntaxError(self.prog, (message or f"exit {status}").strip())


class Args:
    """Typed access to a parsed namespace (argparse's attributes are untyped)."""

    __slots__ = ("ns",)

    def __init__(self, ns: argparse.Namespace) -> None:
        self.ns = ns

    def _get(self, name: str) -> object:
        value: object = getattr(self.ns, name)
        return value

    def get_int(self, name: str) -> int:
        value = self._get(name)
        assert isinstance(value, int), (name, value)
        return value

    def opt_int(self, name: str) -> int | None:
        value = self._get(name)
        assert value is None or isinstance(value, int), (name, value)
        return value

    def opt_float(self, name: str) -> float | None:
        value = self._get(name)
        assert value is None or isinstance(value, (int, float)), (name, value)
        return None if value is None else float(value)

    def get_str(self, name: str) -> str:
        value = self._get(name)
        assert isinstance(value, str), (name, value)
        return value

    def opt_str(self, name: str) -> str | None:
        value = self._get(name)
        assert value is None or isinstance(value, str), (name, value)
        return value

    def flag(self, name: str) -> bool:
        value = self._get(name)
        assert isinstance(value, bool), (name, value)
        return value

    def strs(self, name: str) -> list[str]:
        value = self._get(name)
        if value is None:
            return []
        assert isinstance(value, list), (name, value)
        out: list[str] = []
        for item in value:
            assert isinstance(item, str), (name, item)
            out.append(item)
        return out


@dataclass(frozen=True, slots=True)
class Line:
    """One parsed input line: the command name (aliases resolved), its raw arguments, and
    whether the line was prefixed with `!` (the command is expected to fail)."""

    text: str
    name: str
    argv: tuple[str, ...]
    expect_error: bool


# One piece of a word: a run of plain characters, a quoted string, an escaped character, or a
# lone quote / backslash (unterminated: an error). Word boundaries are runs of shell whitespace.
_PIECE = re.compile(r"""[^ \t\r\n'"\\]+|'[^']*'|"(?:[^"\\]|\\[\s\S])*"|\\[\s\S]|[ \t\r\n]+|['"\\]""")
_DQ_BODY = re.compile(r'(?:[^"\\]|\\[\s\S])*')
_DQ_ESCAPE = re.compile(r'\\(["\\])')
_SHOWN = 80


def split_words(text: str) -> list[str]:
    """Split `text` into words like POSIX `shlex.split` (quotes, backslash escapes), in one pass.

    `shlex` grows each word a character at a time, which is quadratic in the
    length of a word (a 200,000-token `1,2,3,...` list took tens of seconds);
    this scans whole runs with one regular expression, so the work is linear
    in the line. Raises `ValueError` on an unterminated quote or a trailing
    backslash, as `shlex` does.
    """
    words: list[str] = []
    pieces: list[str] = []
    in_word = False
    pos = 0
    end = len(text)
    match = _PIECE.match
    while pos < end:
        m = match(text, pos)
        assert m is not None  # the last alternative matches any character the others do not
        piece = m.group()
        pos = m.end()
        first = piece[0]
        if first in " \t\r\n":
            if in_word:
                words.append("".join(pieces))
                pieces.clear()
                in_word = False
            continue
        if piece == '"':
            body = _DQ_BODY.match(text, pos)
            ends_in_escape = body is not None and body.end() < end  # `"...\` at the end of the line
            raise ValueError("No escaped character" if ends_in_escape else "No closing quotation")
        if piece == "'":
            raise ValueError("No closing quotation")
        if piece == "\\":
            raise ValueError("No escaped character")
        in_word = True
        if first == "'":
            pieces.append(piece[1:-1])
        elif first == '"':
            pieces.append(_DQ_ESCAPE.sub(r"\1", piece[1:-1]))
        elif first == "\\":
            pieces.append(piece[1])
        else:
            pieces.append(piece)
    if in_word:
        words.append("".join(pieces))
    return words


def split_line(text: str) -> Line | None:
    """Split a REPL line; None for blank lines and comment lines (starting with `#`).

    There are no trailing comments: `#12` names node 12. Raises
    `CommandSyntaxError` on bad quoting.
    """
    stripped = text.strip()
    if stripped.startswith("#"):
        return None
    expect_error = stripped.startswith("!")
    if expect_error:
        stripped = stripped[1:].lstrip()
    try:
        words = split_words(stripped)
    except ValueError as exc:
        shown = stripped if len(stripped) <= _SHOWN else f"{stripped[:_SHOWN]}... ({len(stripped)} characters)"
        raise CommandSyntaxError("", f"cannot split {shown!r}: {exc}") from None
    if not words:
        if expect_error:
            raise CommandSyntaxError("", "'!' (expect an error) must be followed by a command")
        return None
    name = ALIASES.get(words[0], words[0])
    return Line(stripped, name, tuple(words[1:]), expect_error)


def parse_args(parser: ReplArgumentParser, argv: Sequence[str]) -> Args:
    try:
        ns = parser.parse_args(list(argv))
    except argparse.ArgumentError as exc:
        raise CommandSyntaxError(parser.prog, str(exc)) from None
    return Args(ns)
