"""Typed errors of the REPL itself; cache and lease errors pass through unchanged."""

from __future__ import annotations

from typing import Protocol

from unicache.dump.schema import JSONObject


class ReplError(Exception):
    """Base of every error the REPL raises on its own account."""


class CommandSyntaxError(ReplError):
    """A command line that does not parse: unknown command, bad option, wrong argument count."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(f"{command}: {message}" if command else message)
        self.command = command


class OptionRangeError(CommandSyntaxError):
    """An option given a value outside the range it accepts; it is refused, never replaced by a default.

    `option` is the option as typed (`--device-tokens`), `accepted` the range in words.
    """

    def __init__(self, command: str, option: str, value: object, accepted: str) -> None:
        super().__init__(command, f"{option} {value!r}: out of range (accepted: {accepted})")
        self.option = option
        self.value = value
        self.accepted = accepted
        self.field = option


class NeedsLiveCacheError(ReplError):
    """A command run where the session cannot do it: a live-cache command on a dump (read-only), or a
    fresh-cache command (`insert`) on a trace replay whose engine owns the data.

    `why` replaces the default explanation (a dump inspected read-only).
    """

    def __init__(self, command: str, source: str, why: str | None = None) -> None:
        if why is None and source == "no cache":
            why = "needs a live cache, and no cache is open; start one with 'new'"
        super().__init__(
            f"{command!r} {why}" if why is not None else
            f"{command!r} needs a live cache, but this session inspects {source} read-only; "
            f"inspection commands work here (tree, pins, leases, lease, history, tickets, events, "
            f"stats, dot, dump); start a live cache with 'new' or run 'unicache repl --trace FILE'"
        )
        self.command = command
        self.source = source


class NeedsManualTransferError(ReplError):
    """A command that holds or releases a copy's ack (`withhold`) on a cache whose engine acks by itself."""

    def __init__(self, command: str, source: str) -> None:
        super().__init__(
            f"{command!r} needs a cache started with 'new --transfer manual', but this session runs {source}, "
            f"whose transfer engine acks every copy by itself"
        )
        self.command = command


class HostOnlyNodeError(ReplError):
    """`lock` on a node whose Full KV is not on device, nor any ancestor's: the lock would cover nothing.

    `device_ancestor` is the deepest ancestor on device (None: only the root).
    """

    def __init__(self, command: str, node_id: int, device_ancestor: int | None) -> None:
        below = ("the root (nothing on device)" if device_ancestor is None
                 else f"ancestor #{device_ancestor} (the deepest one on device)")
        super().__init__(
            f"{command}: node #{node_id} is host-only (its Full KV is not on device), so a lock would only "
            f"cover {below}; 'load-back #{node_id}' brings it back first"
            + ("" if device_ancestor is None else f", or 'lock #{device_ancestor}' locks what is on device")
        )
        self.command = command
        self.node_id = node_id
        self.device_ancestor = device_ancestor


class CapacityError(ReplError):
    """The cache could not make room for a command (an `insert`'s pages or slots).

    `reason` says why, as far as the REPL can tell (see
    `unicache.repl.commands.capacity`); its `to_json()` goes into the error
    envelope under `reason`.
    """

    def __init__(self, command: str, reason: CapacityReason) -> None:
        super().__init__(f"{command}: {reason.summary}")
        self.command = command
        self.reason = reason
        self.component = reason.component
        self.needed = reason.needed


class CapacityReason(Protocol):
    """Why a pool could not supply `needed` rows of `component`; `summary` is one line a user acts on."""

    @property
    def component(self) -> str: ...

    @property
    def needed(self) -> int: ...

    @property
    def summary(self) -> str: ...

    def to_json(self) -> JSONObject: ...


class UnknownNameError(ReplError, KeyError):
    """A node, lease, ticket or receipt name that names nothing in this session."""

    def __init__(self, kind: str, name: str, why: str) -> None:
        super().__init__(f"{kind} {name}: {why}")
        self.kind = kind
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])


class JoinedTicketError(ReplError):
    """`ack` of a ticket that joined another ticket's copy, still in flight: it has no ack of its own.

    The copy's ack settles both (as `UniCache.time_out` of a joiner says
    too), so the REPL refuses and names the ticket to ack: `joined`.
    """

    def __init__(self, command: str, ticket: int, joined: int) -> None:
        super().__init__(
            f"{command} T{ticket}: T{ticket} joined the copy of T{joined}, which is still in flight, and has no "
            f"ack of its own; 'ack T{joined}' settles both"
        )
        self.command = command
        self.ticket_id = ticket
        self.joined = joined


class NoSuchJobError(ReplError, KeyError):
    """The manual transfer engine holds no job for this ticket (never submitted, or already acked)."""

    def __init__(self, ticket: int, why: str) -> None:
        super().__init__(f"ticket {ticket}: {why}")
        self.ticket = ticket

    def __str__(self) -> str:
        return str(self.args[0])


class ConditionError(ReplError):
    """`assert` found its condition false, or `run until` stopped before it became true.

    `expected` is what the condition asks for, `actual` what was found (both
    one line, also in the JSON error under `expected` / `actual`).
    """

    def __init__(self, condition: str, message: str, *, expected: str = "", actual: str = "") -> None:
        text = f"{condition}: {message}"
        if expected or actual:
            text += f" (expected {expected or condition}; actual: {actual or 'unknown'})"
        super().__init__(text)
        self.condition = condition
        self.expected = expected
        self.actual = actual


class CommandInterrupted(ReplError):
    """A long command (`step N`, `run until`, `ack all`) stopped by Ctrl-C between two of its steps.

    `steps` of its steps (`unit`: step, ack) completed; `step` is the cache's
    step counter now (None without a cache); `pending` says what the command
    had not done yet.
    """

    def __init__(self, command: str, signal_name: str, steps: int, step: int | None, pending: str,
                 unit: str = "step") -> None:
        at = "" if step is None else f" (now at step {step})"
        super().__init__(f"{command}: interrupted by {signal_name} after {steps} {unit}(s){at}, {pending}; "
                         f"stopped between {unit}s, the session is intact")
        self.unit = unit
        self.command = command
        self.signal_name = signal_name
        self.steps = steps
        self.step = step
        self.pending = pending


class TraceUnavailableError(ReplError):
    """`--trace` mode could not start: the engine API it drives is missing or refused the trace."""


class OutputPathError(ReplError):
    """A `dot` or `dump` target refused or not written (:mod:`unicache.outputs`): its directory does not
    exist, it is a directory, device, FIFO, socket or symbolic link, it is a file this run reads, ..."""

    def __init__(self, command: str, target: str, reason: str) -> None:
        super().__init__(f"{command} {target}: {reason}")
        self.command = command
        self.target = target
