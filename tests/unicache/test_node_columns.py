"""Per-node state lives in registered stores' columns: a store defined here needs no Node or tree edit."""

from __future__ import annotations

from typing import final

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain
from unicache.components.paged import PagedStore
from unicache.markers import ComponentIndex
from unicache.pools.allocator import SlotAllocator
from unicache.tree.radix import RadixTree


@final
class Indexer:
    """A toy fourth component: one slot per page of a node's key (an indexer cache, say)."""


class IndexerStore(PagedStore[Indexer]):
    """The toy component's store: pages per node, like Full and SWA, with no rule of its own."""

    __slots__ = ()
    marker = Indexer
    index = ComponentIndex(3)
    unit = "page"


def test_a_store_defined_outside_the_package_gets_per_node_columns(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=4, mamba=True)
    tree = cache.root.tree
    assert isinstance(tree, RadixTree)
    store = IndexerStore(SlotAllocator("indexer.device", 64), SlotAllocator("indexer.host", 64))
    tree.register(Indexer, store)  # the one registration step; Node and RadixTree are unchanged
    assert store.columns() == cache.components.full.columns()
    (a,) = chain(cache, d, SEQ[:8], [8])
    assert store.device_slots(a) is None and store.pins(a) is None
    ps = cache.config.page_size
    pages = store.device.alloc(8 // ps)
    assert pages is not None
    store.set_device(a, list(pages))
    pin = cache.ledger.acquire(Indexer, owner="test", pins=(store.pin_set(a),))

    cache.match_prefix(SEQ[:4] + [9] * 4)  # splits `a` at 4: the tree splits every registered store
    upper = a.parent
    assert upper is not None and upper.end == 4
    assert store.device_slots(upper) == list(pages[: 4 // ps])
    assert store.device_slots(a) == list(pages[4 // ps :])
    assert store.columns() == cache.components.full.columns()
    pinned = store.pins(a)
    assert pinned is not None and pin in pinned and store.pins(upper) is None  # carrying pins is the cache's

    pin.release()
    host = store.host.alloc_compact(4 // ps)
    assert host is not None
    store.set_host(a, host)
    assert store.host_slots(a) == host and store.host_slots(upper) is None
    assert cache.sanity_check().ok, cache.sanity_check().describe()

    cache.reset()  # every node dies: its slot goes to 0, every registered store's columns are cut back
    assert not a.alive and not upper.alive and a.slot == upper.slot == 0
    assert store.device_slots(a) is None and store.host_slots(a) is None and store.pins(a) is None
    assert store.columns() == cache.components.full.columns() == 2  # the null slot and the new root
    assert store.null_slot_empty()
    (b,) = chain(cache, d, SEQ[10:18], [8])  # new nodes start empty in every store
    assert store.device_slots(b) is None and store.pins(b) is None
    assert store.columns() == cache.components.full.columns()
    d.assert_ok()
