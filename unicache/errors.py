"""Typed errors of the cache; each names the ids involved and keeps them as attributes."""

from __future__ import annotations

from collections.abc import Sequence

from typing import Any

from leases import ForeignLeaseError, LeaseError
from leases.errors import count_raised


def _ids(slots: Sequence[int], limit: int = 16) -> str:
    shown = ", ".join(str(s) for s in list(slots)[:limit])
    return f"[{shown}{', ...' if len(slots) > limit else ''}]"


class CacheError(Exception):
    """Base of every error the cache raises itself; each instance built is counted by class.

    (`leases.errors.raised_counts`; a kind that is also a `LeaseError` is counted there once.)
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> CacheError:
        if not issubclass(cls, LeaseError):
            count_raised(cls)
        return super().__new__(cls, *args)


class ConfigError(CacheError, ValueError):
    """A `CacheConfig` field is missing, out of range or inconsistent with another."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"config field {field!r}: {message}")
        self.field = field


class InvalidArgumentError(CacheError, ValueError):
    """An operation got arguments it cannot act on (lengths, alignment, components)."""


class TokenIdRangeError(InvalidArgumentError):
    """A token id does not fit the cache's key width (`CacheConfig.token_bytes`); never wrapped.

    `position` is the id's index in the tokens given (None when the id was
    not read from a sequence).
    """

    def __init__(self, token_id: int, position: int | None, token_bytes: int) -> None:
        limit = (1 << (8 * token_bytes - 1)) - 1
        where = "" if position is None else f" at position {position}"
        hint = " (token_bytes=8 holds ids up to 2**63-1)" if token_bytes == 4 and 0 <= token_id <= (1 << 63) - 1 else ""
        super().__init__(
            f"token id {token_id}{where} is outside 0..{limit}, the range of "
            f"{token_bytes}-byte keys{hint}"
        )
        self.token_id = token_id
        self.position = position
        self.token_bytes = token_bytes


class UnknownNodeError(CacheError, KeyError):
    """A node handle that is not a live node of this cache (removed, reset, or foreign)."""

    def __init__(self, node_id: int, why: str) -> None:
        super().__init__(f"node {node_id}: {why}")
        self.node_id = node_id

    def __str__(self) -> str:
        return str(self.args[0])


class UnknownTicketError(CacheError, KeyError):
    """An ack names a ticket id or generation this cache never issued."""

    def __init__(self, ticket_id: int, generation: int, why: str) -> None:
        super().__init__(f"ticket {ticket_id} (generation {generation}): {why}")
        self.ticket_id = ticket_id
        self.generation = generation

    def __str__(self) -> str:
        return str(self.args[0])


class TicketNotLiveError(CacheError, KeyError):
    """A ticket this cache issued that is not waiting for its ack (settled, quarantined, or a joiner)."""

    def __init__(self, ticket_id: int, why: str) -> None:
        super().__init__(f"ticket {ticket_id}: {why}")
        self.ticket_id = ticket_id

    def __str__(self) -> str:
        return str(self.args[0])


class TicketPendingError(CacheError):
    """A ticket's result was asked for before its copy was acked."""

    def __init__(self, ticket_id: int, generation: int) -> None:
        super().__init__(
            f"ticket {ticket_id} (generation {generation}) is still in flight; "
            f"poll the cache until its ack settles it"
        )
        self.ticket_id = ticket_id
        self.generation = generation


class ForeignObjectError(CacheError, ForeignLeaseError):
    """A receipt, ticket or node of another cache was handed to this one."""

    def __init__(self, what: str, object_id: int, cache: str, owner: str) -> None:
        super().__init__(
            f"{what} {object_id} belongs to cache {owner!r}, not to cache {cache!r}"
        )
        self.object_id = object_id
        self.cache = cache
        self.owner = owner


class DoubleFreeError(CacheError):
    """Slots handed back to a pool that were already free (or listed twice)."""

    def __init__(self, pool: str, slots: Sequence[int]) -> None:
        super().__init__(f"pool {pool}: slots {_ids(slots)} freed twice")
        self.pool = pool
        self.slots = tuple(slots)


class InvalidSlotError(CacheError, ValueError):
    """Slots outside a pool, or not owned by the caller that hands them over."""

    def __init__(self, pool: str, slots: Sequence[int], why: str) -> None:
        super().__init__(f"pool {pool}: slots {_ids(slots)} {why}")
        self.pool = pool
        self.slots = tuple(slots)


class EngineStateError(CacheError, RuntimeError):
    """A transfer engine used out of order: before `attach(pools)` (or `bind`), or after `close()`."""


class PinnedValuesError(CacheError):
    """An engine-owned store was asked to hand back values of a node that live leases pin."""

    def __init__(self, component: str, tier: str, node: int, lease_ids: Sequence[int]) -> None:
        super().__init__(
            f"{component} {tier} values of node {node} are pinned by leases {list(lease_ids)}: "
            "they cannot be handed back to the engine until those leases are released"
        )
        self.component = component
        self.tier = tier
        self.node = node
        self.lease_ids = tuple(lease_ids)
