"""`ComponentSet.register`: a fourth component, defined here, takes part in every operation.

The store below is a `PagedStore` with no rule of its own; nothing in
`unicache/ops/` names it, yet lock, backup, eviction and load-back move and
pin its pages with the others'.
"""

from __future__ import annotations

from typing import final

import pytest
import torch

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain
from unicache import UniCache
from unicache.components.paged import PagedStore
from unicache.errors import InvalidArgumentError
from unicache.markers import ComponentIndex, Full
from unicache.pools.pool import KVPool
from unicache.transfer.base import Tier
from unicache.tree.radix import RadixTree


@final
class Indexer:
    """A toy fourth component: one page per page of a node's key (an indexer cache, say)."""


class IndexerStore(PagedStore[Indexer]):
    """The toy component's store: the defaults of a paged component, nothing else."""

    __slots__ = ()
    marker = Indexer
    index = ComponentIndex(3)
    unit = "page"


def _register(cache: UniCache, pages: int = 16) -> IndexerStore:
    ps = cache.config.page_size
    cpu = torch.device("cpu")
    dev = KVPool("indexer.device", pages, ps, 4, torch.int32, cpu)
    host = KVPool("indexer.host", pages, ps, 4, torch.int32, cpu, compact=True)
    cache.pools.add(Indexer, dev, host)
    store = IndexerStore(dev.alloc, host.alloc)
    tree = cache.root.tree
    assert isinstance(tree, RadixTree)
    cache.components.register(store, tree)
    return store


def test_a_fourth_component_is_backed_up_evicted_loaded_back_and_locked(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    store = _register(cache)
    (a,) = chain(cache, d, SEQ[:8], [8])
    ps = cache.config.page_size
    pages = store.device.alloc(8 // ps)
    assert pages is not None
    rows = torch.arange(len(pages) * ps * 4, dtype=torch.int32).reshape(len(pages), ps, 4) + 7
    cache.write_slots(Indexer, pages, rows)
    assert store.adopt_device(a, pages)

    tid = cache.backup(a)  # write_back: the backup carries the node's device-only Indexer pages too
    assert tid is not None
    job = d.engine.jobs[tid]
    assert [op.component for op in job.copies][-1] is Indexer
    d.settle()
    host = store.host_slots(a)
    assert host is not None and store.on_device(a)
    assert torch.equal(cache.read_slots(Indexer, list(host), Tier.HOST), rows)

    assert cache.evict_device(Full, 8) >= 8 // ps  # demoting the base cascades to every component
    assert not store.on_device(a) and store.on_host(a) and not cache.components.base.on_device(a)
    assert store.device.free_count == store.device.capacity

    m = cache.match_prefix(SEQ[:8])
    assert m.anchor is a and m.device_node is not a
    t = cache.load_back(a)
    assert t is not None
    d.settle()
    assert t.result().ok
    back = store.device_slots(a)
    assert back is not None
    assert torch.equal(cache.read_slots(Indexer, back), rows)

    receipt = cache.lock(a)
    lease = receipt.leases[store.index]
    pins = store.pins(a)
    assert lease is not None and pins is not None and lease in pins
    assert cache.evict_device(Indexer, 8) == 0  # locked: its own pass holds the node back
    cache.unlock(receipt)
    assert store.pins(a) is None
    assert cache.evict_device(Indexer, 8) == len(back)  # its own pass: host copy kept, nothing backed up
    assert not store.on_device(a) and store.on_host(a) and cache.components.base.on_device(a)
    report = cache.sanity_check()
    assert report.ok, report.describe()


def test_an_eviction_backs_up_a_fourth_components_device_only_pages(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4, mamba=True, sync_write_back=True)
    store = _register(cache)
    (a,) = chain(cache, d, SEQ[:8], [8])
    cache.backup(a)
    d.settle()
    pages = store.device.alloc(8 // cache.config.page_size)
    assert pages is not None
    assert store.adopt_device(a, pages)  # Indexer pages added after the base's backup: device only

    cache.evict_device(Full, 8)  # write_back: the victim's Indexer pages are backed up before it goes
    assert not store.on_device(a) and store.on_host(a)
    assert cache.counters.aux_backups == 1
    report = cache.sanity_check()
    assert report.ok, report.describe()


def test_register_refuses_a_store_out_of_priority_order(make_cache: MakeCache) -> None:
    cache, _ = make_cache()
    _register(cache)
    again = IndexerStore(cache.components.base.device, cache.components.base.host)
    tree = cache.root.tree
    assert isinstance(tree, RadixTree)
    with pytest.raises(InvalidArgumentError, match="'Indexer' \\(index 3\\) cannot follow 4 stores"):
        cache.components.register(again, tree)
    assert len(cache.components.configured) == 2


def test_every_store_carries_its_index_and_marker_and_gives_the_pin_sets_of_nodes(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    store = _register(cache)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    for st in cache.components.by_index:
        assert st.component_index == type(st).index and st.component_marker is type(st).marker
    assert (store.component_index, store.component_marker) == (3, Indexer)
    for st in cache.components.configured:
        sets = st.pin_sets_of([b, a])
        assert sets == (st.pin_set(b), st.pin_set(a)) and sets[0] is st.pins(b) and sets[1] is st.pins(a)
        assert sets[0].component is st.component_marker
        assert st.pin_sets_of([]) == ()
