"""`LeaseTreeNode`: SGLang's tree node whose load-back pin is a view of leases."""

from __future__ import annotations

from typing import Optional

from leases import PinSet
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode

from unicache.integrations.sglang.errors import PinFieldWriteError
from unicache.integrations.sglang.loadback import MARKERS, LoadBack
from unicache.integrations.sglang.locks import Locked

_FULL = ComponentType.FULL


class LeaseTreeNode(UnifiedTreeNode):
    """A node carrying one weak pin set per component for in-flight load-backs.

    `load_back_pending_id` stays readable for SGLang's own readers (reclaim,
    `drop_subtree_no_host`, Mamba eviction, `sanity_check`): it is the anchor
    of a load-back whose Full lease pins this node, or None. The core never
    writes it; SGLang's split writes the inherited value, which the core
    checks against the leases it re-pins (`split_anchor`). `locks` holds the
    leases of the tree locks anchored here (see `locks`).

    The lease fields default at class level (None), so building a node costs
    nothing beyond SGLang's own constructor; they are set on first pin.
    """

    load_back_pins: Optional[dict[ComponentType, PinSet[object]]] = None
    split_anchor: Optional[int] = None
    locks: Optional[PinSet[Locked]] = None

    def pins(self, ct: ComponentType) -> Optional[PinSet[object]]:
        """The load-back pin set of component `ct`, or None before its first pin."""
        pins = self.load_back_pins
        return pins.get(ct) if pins is not None else None

    def ensure_pins(self, ct: ComponentType) -> PinSet[object]:
        """The load-back pin set of component `ct`, created on first use."""
        pins = self.load_back_pins
        if pins is None:
            self.load_back_pins = pins = {}
        found = pins.get(ct)
        if found is None:
            found = pins[ct] = PinSet(MARKERS[ct], self.id)
        return found

    @property
    def load_back_pending_id(self) -> Optional[int]:
        pins = self.load_back_pins
        full = pins.get(_FULL) if pins is not None else None
        if full is None:
            return None
        for lease in full:
            owner = lease.owner
            if isinstance(owner, LoadBack):
                return owner.anchor
        return None

    @load_back_pending_id.setter
    def load_back_pending_id(self, value: Optional[int]) -> None:
        if value is None:
            pins = self.load_back_pins
            if pins is None:
                return
            full = pins.get(_FULL)
            if full:
                raise PinFieldWriteError(self.id, full.ids())
            return
        self.split_anchor = value
