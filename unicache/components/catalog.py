"""`ComponentSet`: the stores of one cache, every known component by index and the configured ones."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leases import PinSet

from unicache.components.full import FullStore
from unicache.components.mamba import MambaStore
from unicache.components.registry import STORES
from unicache.components.store import ComponentStore
from unicache.components.swa import SWAStore
from unicache.config import CacheConfig
from unicache.errors import InvalidArgumentError
from unicache.markers import FULL, MAMBA, SWA_IDX, ComponentIndex, component_name
from unicache.pools.allocator import SlotAllocator
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree

if TYPE_CHECKING:
    from unicache.pools.pools import PoolSet


class ComponentSet:
    """Every component store of one cache.

    `by_index` holds one store per registered component in eviction-priority
    order (a component the config leaves out gets a store with no slots, so
    generic loops need no checks); `configured` holds the configured ones:
    `base` (Full, whose prefix-closed device residency shapes the tree)
    first, then `aux`, the others. The operations (`unicache/ops/`) use only
    these. `full`, `swa` and `mamba` are the typed stores that checks,
    engines and views outside the operations read; `has_swa` / `has_mamba`
    say whether those two are configured.
    Only configured stores hold per-node columns (`attach` registers them
    with the tree): an unconfigured store's columns hold the null slot only,
    so code reads SWA or Mamba residency only where `has_swa` / `has_mamba`.
    """

    __slots__ = (
        "by_index", "configured", "base", "aux", "span", "full", "swa", "mamba", "has_swa", "has_mamba", "_index", "_pin_cols",
    )

    by_index: tuple[ComponentStore, ...]
    configured: tuple[ComponentStore, ...]
    base: FullStore
    aux: tuple[ComponentStore, ...]
    span: int
    """One more than the highest configured index: the length of every per-component container."""
    full: FullStore
    swa: SWAStore
    mamba: MambaStore
    has_swa: bool
    has_mamba: bool
    _index: dict[type, ComponentIndex]
    _pin_cols: tuple[dict[int, PinSet[Any, Node]], ...]

    def __init__(self, config: CacheConfig, pools: PoolSet) -> None:
        stores: list[ComponentStore] = []
        for comp, store_class in STORES.items():
            if comp in config.components:
                dev = pools.device_pool(comp).alloc
                host = pools.host_pool(comp).alloc
            else:
                name = component_name(comp)
                dev = SlotAllocator(f"{name}.device (not configured)", 0)
                host = SlotAllocator(f"{name}.host (not configured)", 0)
            store = store_class(dev, host)
            store.configure(config.page_size, config.swa_window or 0)
            stores.append(store)
        self.by_index = tuple(stores)
        self.configured = tuple(st for st in stores if st.marker in config.components)
        self.aux = self.configured[1:]
        self.span = self.configured[-1].index + 1
        full, swa, mamba = stores[FULL], stores[SWA_IDX], stores[MAMBA]
        assert isinstance(full, FullStore) and isinstance(swa, SWAStore)
        assert isinstance(mamba, MambaStore)
        self.full = full
        self.base = full
        self.swa = swa
        self.mamba = mamba
        self.has_swa = swa.marker in config.components
        self.has_mamba = mamba.marker in config.components
        self._index = {st.marker: st.index for st in self.configured}
        self._pin_cols = tuple(st.pin_sets for st in self.configured)

    def attach(self, tree: RadixTree) -> None:
        """Register every configured store's per-node columns with `tree` (which grows and clears them)."""
        for store in self.configured:
            tree.register(store.marker, store)

    def pinned(self, node: Node) -> bool:
        """Whether any lease of any component pins `node`."""
        slot = node.slot
        for col in self._pin_cols:
            p = col.get(slot)
            if p is not None and p:
                return True
        return False

    def aux_pinned(self, node: Node) -> bool:
        """Whether a lease of a component other than the base pins `node`."""
        slot = node.slot
        for col in self._pin_cols[1:]:
            p = col.get(slot)
            if p is not None and p:
                return True
        return False

    def aux_device_only(self, node: Node) -> bool:
        """Whether `node` holds data of a component other than the base on device with no host copy."""
        for store in self.aux:
            if store.device_only(node):
                return True
        return False

    def register(self, store: ComponentStore, tree: RadixTree) -> None:
        """Add a configured component beyond the registry's (a store with its own allocators), lowest in
        eviction priority; every operation takes it into account from now on."""
        if store.index != len(self.by_index) or store.marker in self._index:
            raise InvalidArgumentError(
                f"component {store.name!r} (index {store.index}) cannot follow {len(self.by_index)} stores"
            )
        store.configure(self.base.page_size, 0)
        self.by_index += (store,)
        self.configured += (store,)
        self.aux += (store,)
        self.span = store.index + 1
        self._index[store.marker] = store.index
        self._pin_cols += (store.pin_sets,)
        tree.register(store.marker, store)

    def index(self, component: type) -> ComponentIndex:
        """The index of a configured component; `InvalidArgumentError` for anything else."""
        i = self._index.get(component)
        if i is not None:
            return i
        raise InvalidArgumentError(
            f"component {getattr(component, '__name__', component)!r} is not enabled in this cache "
            f"(enabled: {[st.name for st in self.configured]})"
        )

    def new_tree(self) -> None:
        """Empty every store's heaps and indexes (a reset)."""
        for store in self.by_index:
            store.new_tree()
