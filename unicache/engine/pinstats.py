"""Overlapping-pin statistics: how many leases pin one node at once, and by which components.

The production crash this project exists for was two in-flight load-backs
pinning one node for different components. :class:`PinTracker` observes the
nodes a new lease covers right after it is acquired and records:

- ``max_leases_on_one_node``: the most live leases seen on one node at once;
- ``nodes_pinned_by_two_components``: distinct nodes seen pinned at once by
  leases of two different components held by two different operations, at
  least one of them a transfer in flight (a load-back or a backup). Two lock
  receipts, or one receipt's own Full and Mamba lease, do not count;
- ``load_back_cross_component_nodes``: the subset where both leases belong to
  load-backs in flight (exactly the crash's shape);
- ``overlap_observations``: how many times such an overlap was seen (a node
  counts once in the node totals however often it is seen).

The engine tells the tracker which lease ids belong to lock receipts and
which to load-backs (``lock_leases`` / ``load_back_leases``); every other
live lease is a cache-owned backup. :class:`PinObserver` does that as a
scheduler observer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from leases import Held, Lease

from unicache.cache import UniCache
from unicache.components.store import ComponentStore
from unicache.engine.observer import SchedulerObserver
from unicache.tree.node import Node


class PinTracker:
    """Accumulates the overlap statistics described in the module docstring."""

    __slots__ = ("max_leases_on_one_node", "max_node", "_two", "_lb_two", "load_back_leases", "lock_leases",
                 "overlap_observations")

    def __init__(self) -> None:
        self.max_leases_on_one_node = 0
        self.max_node: int | None = None
        self._two: set[int] = set()
        self._lb_two: set[int] = set()
        self.load_back_leases: set[int] = set()
        self.lock_leases: set[int] = set()
        self.overlap_observations = 0

    @property
    def nodes_pinned_by_two_components(self) -> int:
        return len(self._two)

    @property
    def load_back_cross_component_nodes(self) -> int:
        return len(self._lb_two)

    def observe(self, nodes: Iterable[Node], stores: Iterable[ComponentStore]) -> None:
        """Look at the current pins of ``nodes`` (call right after a lease over them is acquired)."""
        lb = self.load_back_leases
        locks = self.lock_leases
        for node in nodes:
            leases: list[Lease[Any, Held]] = []
            for store in stores:
                pins = store.pins(node)
                if pins is not None and pins:
                    leases.extend(pins)
            n = len(leases)
            if n > self.max_leases_on_one_node:
                self.max_leases_on_one_node = n
                self.max_node = node.id
            if n < 2:
                continue
            seen = False
            for i, a in enumerate(leases):
                for b in leases[i + 1:]:
                    if a.component is b.component or a.owner == b.owner:
                        continue
                    if a.id in locks and b.id in locks:
                        continue
                    seen = True
                    self._two.add(node.id)
                    if a.id in lb and b.id in lb:
                        self._lb_two.add(node.id)
            self.overlap_observations += seen

    def to_json(self) -> dict[str, object]:
        return {
            "max_leases_on_one_node": self.max_leases_on_one_node,
            "max_leases_node": self.max_node,
            "nodes_pinned_by_two_components": self.nodes_pinned_by_two_components,
            "load_back_cross_component_nodes": self.load_back_cross_component_nodes,
            "overlap_observations": self.overlap_observations,
        }


class PinObserver(SchedulerObserver):
    """Feeds a :class:`PinTracker` from the scheduler's lock and load-back events."""

    __slots__ = ("tracker", "cache")

    def __init__(self, tracker: PinTracker, cache: UniCache) -> None:
        self.tracker = tracker
        self.cache = cache

    def _observe(self, lease_ids: tuple[int, ...]) -> None:
        for lease_id in lease_ids:
            scope = self.cache.lease_scope(lease_id)
            if scope:
                self.tracker.observe(scope, self.cache.components.configured)

    def on_load_back(self, anchor: Node, ticket: int, lease_ids: tuple[int, ...]) -> None:
        self.tracker.load_back_leases.update(lease_ids)
        self._observe(lease_ids)

    def on_load_back_end(self, lease_ids: tuple[int, ...]) -> None:
        self.tracker.load_back_leases.difference_update(lease_ids)

    def on_lock(self, node: Node, receipt: int, lease_ids: tuple[int, ...]) -> None:
        self.tracker.lock_leases.update(lease_ids)
        self._observe(lease_ids)

    def on_unlock(self, receipt: int, lease_ids: tuple[int, ...]) -> None:
        self.tracker.lock_leases.difference_update(lease_ids)
