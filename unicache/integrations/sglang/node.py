"""`LeaseTreeNode`: SGLang's tree node whose load-back pin is a view of leases."""

from __future__ import annotations

from typing import Optional

from leases import PinSet
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode

from unicache.components.markers import SWA, Full, Mamba
from unicache.integrations.sglang.errors import PinFieldWriteError
from unicache.integrations.sglang.loadback import LoadBack


class LeaseTreeNode(UnifiedTreeNode):
    """A node carrying one weak pin set per component for in-flight load-backs.

    `load_back_pending_id` stays readable for SGLang's own readers (reclaim,
    `drop_subtree_no_host`, Mamba eviction, `sanity_check`): it is the anchor
    of a load-back whose Full lease pins this node, or None. The core never
    writes it; SGLang's split writes the inherited value, which the core
    checks against the leases it re-pins (`split_anchor`). `locks` holds the
    Full leases of the tree locks anchored here (see `locks`).
    """

    __slots__ = ("pins_full", "pins_swa", "pins_mamba", "split_anchor", "locks")

    def __init__(self, tree_components: tuple[ComponentType, ...], priority: int = 0) -> None:
        self.pins_full: PinSet[Full] | None = None
        self.pins_swa: PinSet[SWA] | None = None
        self.pins_mamba: PinSet[Mamba] | None = None
        self.split_anchor: Optional[int] = None
        self.locks: PinSet[Full] | None = None
        super().__init__(tree_components, priority)

    @property
    def load_back_pending_id(self) -> Optional[int]:
        pins = self.pins_full
        if pins is None:
            return None
        for lease in pins:
            owner = lease.owner
            if isinstance(owner, LoadBack):
                return owner.anchor
        return None

    @load_back_pending_id.setter
    def load_back_pending_id(self, value: Optional[int]) -> None:
        if value is None:
            pins = self.pins_full
            if pins:
                raise PinFieldWriteError(self.id, pins.ids())
            return
        self.split_anchor = value
