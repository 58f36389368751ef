"""Node splits: the new upper fragment inherits every pin, scope and heap entry of the original."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicache.components.markers import FULL, SWA_IDX
from unicache.ops.pins import pins_full, pins_mamba, pins_swa
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import UniCache


def on_split(cache: UniCache, upper: Node, lower: Node) -> None:
    """Carry every pin of `lower` to the new `upper` fragment, with its scope and heap entries."""
    cache.counters.splits += 1
    ledger = cache.ledger
    scopes = cache._scopes
    p = lower.pins_full
    if p is not None and p:
        up = pins_full(upper)
        for lease in p:
            ledger.pin(lease, up)
            scope = scopes.get(lease.id)
            if scope is not None:
                scope.append(upper)
    s = lower.pins_swa
    if s is not None and s:
        us = pins_swa(upper)
        for sl in s:
            ledger.pin(sl, us)
            scope = scopes.get(sl.id)
            if scope is not None:
                scope.append(upper)
    m = lower.pins_mamba
    if m is not None and m:
        um = pins_mamba(upper)
        for ml in m:
            ledger.pin(ml, um)
            scope = scopes.get(ml.id)
            if scope is not None:
                scope.append(upper)
    if upper.dev_full is not None:
        cache._lru_dev[FULL].push(upper)
        if upper.host_pages is not None:
            cache._dups[upper.id] = upper
    if upper.dev_swa is not None:
        cache._lru_dev[SWA_IDX].push(upper)
    if upper.host_swa_pages is not None:
        cache._lru_host[SWA_IDX].push(upper)
