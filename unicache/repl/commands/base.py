"""The command registry: each command's name, parser, whether it needs a live cache, and its body."""

from __future__ import annotations

import enum
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from unicache.dump.schema import JSONObject
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.session import Session


class Needs(enum.Enum):
    """What a command runs on."""

    LIVE = "live"        # changes or drives a live cache
    VIEW = "view"        # reads state: works on a live cache and on a dump
    NOTHING = "nothing"  # works anywhere (help, quit, new, ...)


Body = Callable[[Session, Args], JSONObject]
Builder = Callable[[ReplArgumentParser], None]


@dataclass(slots=True)
class Command:
    name: str
    summary: str
    needs: Needs
    body: Body
    builder: Builder
    group: str
    _parser: ReplArgumentParser | None = field(default=None, repr=False)

    @property
    def parser(self) -> ReplArgumentParser:
        if self._parser is None:
            doc = inspect.cleandoc(self.body.__doc__ or self.summary)
            notes = {
                Needs.LIVE: "Needs a live cache (not available on a dump).",
                Needs.VIEW: "Works on a live cache and on a dump (read-only).",
                Needs.NOTHING: "",
            }[self.needs]
            p = ReplArgumentParser(self.name, description=doc, epilog=notes or None)
            self.builder(p)
            self._parser = p
        return self._parser

    @property
    def usage(self) -> str:
        return self.parser.format_usage().strip().removeprefix("usage: ")


REGISTRY: dict[str, Command] = {}


def command(
    name: str, summary: str, needs: Needs, group: str, builder: Builder | None = None
) -> Callable[[Body], Body]:
    """Register `body` as the REPL command `name`; its docstring is the command's help text."""

    def register(body: Body) -> Body:
        if name in REGISTRY:
            raise ValueError(f"REPL command {name!r} registered twice")
        REGISTRY[name] = Command(name, summary, needs, body, builder or _no_args, group)
        return body

    return register


def _no_args(p: ReplArgumentParser) -> None:
    return None
