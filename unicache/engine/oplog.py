"""A record of the cache operations one run performed, in order (input to the REPL script writer).

Each entry is a tuple ``(op, *args)`` of plain values: token tuples, node
paths as token tuples, ticket and receipt ids as the cache issued them.
Recording is off unless a run asks for it (the simulator does for the
minimal failing scenario, registering an :class:`OpLogObserver` with the
scheduler).
"""

from __future__ import annotations

from unicache.config import CacheConfig
from unicache.engine.observer import SchedulerObserver
from unicache.tree.node import Node

Op = tuple[object, ...]


class OpLog:
    """Ordered cache operations of one run, plus the cache configuration they ran on."""

    __slots__ = ("config", "ops")

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self.ops: list[Op] = []

    def add(self, *op: object) -> None:
        self.ops.append(op)

    def __len__(self) -> int:
        return len(self.ops)

    @staticmethod
    def path_tokens(node: Node) -> tuple[int, ...]:
        """The token path from the root to the end of ``node``."""
        parts: list[tuple[int, ...]] = []
        x: Node | None = node
        while x is not None and x.parent is not None:
            parts.append(x.key)
            x = x.parent
        out: list[int] = []
        for key in reversed(parts):
            out.extend(key)
        return tuple(out)


class OpLogObserver(SchedulerObserver):
    """Records the scheduler's cache operations into an :class:`OpLog`."""

    __slots__ = ("log",)

    def __init__(self, log: OpLog) -> None:
        self.log = log

    def on_match(self, tokens: tuple[int, ...]) -> None:
        self.log.add("match", tokens)

    def on_load_back(self, anchor: Node, ticket: int, lease_ids: tuple[int, ...]) -> None:
        self.log.add("load_back", OpLog.path_tokens(anchor), ticket)

    def on_abandon(self, ticket: int) -> None:
        self.log.add("abandon", ticket)

    def on_time_out(self, ticket: int) -> None:
        self.log.add("time_out", ticket)

    def on_lock(self, node: Node, receipt: int, lease_ids: tuple[int, ...]) -> None:
        self.log.add("lock", OpLog.path_tokens(node), receipt)

    def on_unlock(self, receipt: int, lease_ids: tuple[int, ...]) -> None:
        self.log.add("unlock", receipt)

    def on_insert(self, tokens: tuple[int, ...], start: int) -> None:
        self.log.add("insert", tokens, start)
