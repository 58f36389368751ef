"""Typed errors of the REPL itself; cache and lease errors pass through unchanged."""

from __future__ import annotations


class ReplError(Exception):
    """Base of every error the REPL raises on its own account."""


class CommandSyntaxError(ReplError):
    """A command line that does not parse: unknown command, bad option, wrong argument count."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(f"{command}: {message}" if command else message)
        self.command = command


class NeedsLiveCacheError(ReplError):
    """A command that changes or drives a cache, run while inspecting a dump read-only."""

    def __init__(self, command: str, source: str) -> None:
        super().__init__(
            f"{command!r} needs a live cache, but this session inspects {source} read-only; "
            f"inspection commands work here (tree, pins, leases, lease, history, tickets, events, "
            f"stats, dot, dump); start a live cache with 'new' or run 'unicache repl --trace FILE'"
        )
        self.command = command


class UnknownNameError(ReplError, KeyError):
    """A node, lease, ticket or receipt name that names nothing in this session."""

    def __init__(self, kind: str, name: str, why: str) -> None:
        super().__init__(f"{kind} {name}: {why}")
        self.kind = kind
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class NoSuchJobError(ReplError, KeyError):
    """The manual transfer engine holds no job for this ticket (never submitted, or already acked)."""

    def __init__(self, ticket: int, why: str) -> None:
        super().__init__(f"ticket {ticket}: {why}")
        self.ticket = ticket

    def __str__(self) -> str:
        return str(self.args[0])


class ConditionError(ReplError):
    """`assert` found its condition false, or `run until` stopped before it became true."""

    def __init__(self, condition: str, message: str) -> None:
        super().__init__(f"{condition}: {message}")
        self.condition = condition


class TraceUnavailableError(ReplError):
    """`--trace` mode could not start: the engine API it drives is missing or refused the trace."""


class OutputPathError(ReplError):
    """A `dot` or `dump` target that cannot be written: its directory does not exist, or it is one."""

    def __init__(self, command: str, target: str, reason: str) -> None:
        super().__init__(f"{command} {target}: {reason}")
        self.command = command
        self.target = target
