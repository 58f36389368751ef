"""`CacheView`: what the read-only readers of a cache (`sanity.py`, `introspect.py`) use of it.

A protocol, so the readers sit below the facade (`UniCache` satisfies it)
and import nothing above their layer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from leases import Borrowed, LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.config import CacheConfig
from unicache.counters import CacheCounters
from unicache.markers import Component
from unicache.ticket_table import QuarantineRecord
from unicache.tickets import Ticket
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.pools.pools import PoolSet


class CacheView(Protocol):
    """The read-only face of a cache: its config, stores, pools, ledger, tree and tickets."""

    @property
    def config(self) -> CacheConfig: ...

    @property
    def ledger(self) -> LeaseLedger: ...

    @property
    def pools(self) -> PoolSet: ...

    @property
    def counters(self) -> CacheCounters: ...

    @property
    def components(self) -> ComponentSet: ...

    @property
    def root(self) -> Node: ...

    @property
    def node_count(self) -> int: ...

    def nodes(self) -> Iterator[Node]: ...

    def live_tickets(self) -> list[Borrowed[Ticket]]: ...

    def quarantine_records(self) -> list[QuarantineRecord]: ...

    def lent_slots(self, component: Component) -> set[int]: ...

    def lease_scope(self, lease_id: int) -> list[Node] | None: ...
