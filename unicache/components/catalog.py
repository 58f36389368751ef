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
from unicache.markers import FULL, MAMBA, SWA_IDX, component_name
from unicache.pools.allocator import SlotAllocator
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree

if TYPE_CHECKING:
    from unicache.pools.pools import PoolSet


class ComponentSet:
    """Every component store of one cache.

    `by_index` holds one store per registered component in eviction-priority
    order (a component the config leaves out gets a store with no slots, so
    generic loops need no checks); `configured` holds the configured ones.
    `full`, `swa` and `mamba` are the typed stores the per-component rules
    call; `has_swa` / `has_mamba` say whether those two are configured.
    Only configured stores hold per-node columns (`attach` registers them
    with the tree): an unconfigured store's columns hold the null slot only,
    so code reads SWA or Mamba residency only where `has_swa` / `has_mamba`.
    """

    __slots__ = (
        "by_index", "configured", "full", "swa", "mamba", "has_swa", "has_mamba", "_index", "_pin_cols",
    )

    by_index: tuple[ComponentStore, ...]
    configured: tuple[ComponentStore, ...]
    full: FullStore
    swa: SWAStore
    mamba: MambaStore
    has_swa: bool
    has_mamba: bool
    _index: dict[type, int]
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
            stores.append(store_class(dev, host))
        self.by_index = tuple(stores)
        self.configured = tuple(st for st in stores if st.marker in config.components)
        full, swa, mamba = stores[FULL], stores[SWA_IDX], stores[MAMBA]
        assert isinstance(full, FullStore) and isinstance(swa, SWAStore)
        assert isinstance(mamba, MambaStore)
        self.full = full
        self.swa = swa
        self.mamba = mamba
        self.has_swa = swa.marker in config.components
        self.has_mamba = mamba.marker in config.components
        self._index = {st.marker: st.index for st in self.configured}
        cols: list[dict[int, PinSet[Any, Node]]] = [full.pin_sets]
        if self.has_swa:
            cols.append(swa.pin_sets)
        if self.has_mamba:
            cols.append(mamba.pin_sets)
        self._pin_cols = tuple(cols)

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
        """Whether an SWA or Mamba lease pins `node`."""
        slot = node.slot
        if self.has_swa:
            p = self.swa.pin_sets.get(slot)
            if p is not None and p:
                return True
        if self.has_mamba:
            m = self.mamba.pin_sets.get(slot)
            if m is not None and m:
                return True
        return False

    def aux_device_only(self, node: Node) -> bool:
        """Whether `node` holds SWA pages or a Mamba state on device with no host copy."""
        slot = node.slot
        if self.has_mamba:
            mamba = self.mamba
            if mamba.dev[slot] >= 0 and mamba.host_col[slot] < 0:
                return True
        if self.has_swa:
            swa = self.swa
            if swa.dev[slot] is not None and swa.host_col[slot] is None:
                return True
        return False

    def index(self, component: type) -> int:
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
