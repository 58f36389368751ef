"""unicache: a unified hierarchical radix prefix cache (Full / SWA / Mamba, device + host)
whose every pin is an ownership-typed lease.

Torch-backed names (`UniCache`, `PoolSet`, pools) load on first use, so the
bookkeeping modules (`unicache.tree`, `unicache.components`, ...) import
without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from unicache.markers import COMPONENTS, SWA, Component, Full, Mamba
from unicache.config import CacheConfig, TokenBytes, WritePolicy
from unicache.counters import CacheCounters
from unicache.errors import (
    CacheError,
    ConfigError,
    DoubleFreeError,
    EngineStateError,
    ForeignObjectError,
    InvalidArgumentError,
    InvalidSlotError,
    TicketNotLiveError,
    TicketPendingError,
    TokenIdRangeError,
    UnknownNodeError,
    UnknownTicketError,
)
from unicache.introspect import ComponentState, NodeInfo, QuarantineInfo, TicketInfo
from unicache.results import (
    Completion,
    InsertResult,
    LoadBackResult,
    MatchResult,
    TicketStatus,
    TimedOut,
)
from unicache.sanity import SanityError, SanityReport, Violation
from unicache.tickets import BackupTicket, LoadBack, LoadBackTicket, LockReceipt
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.transfer.immediate import ImmediateEngine
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import QuarantineRecord, UniCache
    from unicache.pools.pool import KVPool, StatePool
    from unicache.pools.pools import PoolSet, PoolStats

_LAZY = {
    "UniCache": "unicache.cache",
    "QuarantineRecord": "unicache.cache",
    "PoolSet": "unicache.pools.pools",
    "PoolStats": "unicache.pools.pools",
    "KVPool": "unicache.pools.pool",
    "StatePool": "unicache.pools.pool",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'unicache' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "COMPONENTS",
    "SWA",
    "Ack",
    "BackupTicket",
    "CacheConfig",
    "CacheCounters",
    "CacheError",
    "Completion",
    "Component",
    "ComponentState",
    "ConfigError",
    "CopyOp",
    "DoubleFreeError",
    "EngineStateError",
    "ForeignObjectError",
    "Full",
    "ImmediateEngine",
    "InsertResult",
    "InvalidArgumentError",
    "InvalidSlotError",
    "JobKind",
    "KVPool",
    "LoadBack",
    "LoadBackResult",
    "LoadBackTicket",
    "LockReceipt",
    "Mamba",
    "MatchResult",
    "Node",
    "NodeInfo",
    "PoolSet",
    "PoolStats",
    "QuarantineInfo",
    "QuarantineRecord",
    "SanityError",
    "SanityReport",
    "StatePool",
    "TicketInfo",
    "TicketNotLiveError",
    "TicketPendingError",
    "TicketStatus",
    "TokenBytes",
    "TokenIdRangeError",
    "TimedOut",
    "Tier",
    "TransferEngine",
    "TransferJob",
    "UniCache",
    "UnknownNodeError",
    "UnknownTicketError",
    "Violation",
    "WritePolicy",
]
