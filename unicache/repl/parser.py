"""Command-line parsing: splitting a REPL line, per-command argparse specs, and typed argument access."""

from __future__ import annotations

import argparse
import shlex
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
        words = shlex.split(stripped)
    except ValueError as exc:
        raise CommandSyntaxError("", f"cannot split {stripped!r}: {exc}") from None
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
