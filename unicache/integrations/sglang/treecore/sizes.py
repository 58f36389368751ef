"""Evictable and protected sizes, kept incrementally from values and live leases."""

from __future__ import annotations

from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import NodeId
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import RefusedFeatureError
from unicache.integrations.sglang.treecore.state import FULL, TreeState


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Sizes(TreeState):
    """The sizes part of `UnicacheTreeCore` (see the module docstring)."""

    def evictable_size(self) -> int:
        if self._live_request.pending:
            self.live_dump.poll()
        return self._total - self._protected

    def protected_size(self) -> int:
        return self._protected

    def component_evictable_size(self, component_type: ComponentType) -> int:
        if component_type == FULL:
            return self._total - self._protected
        for comp in self.aux:
            if comp.component_type == component_type:
                return comp.total - comp.protected
        return 0

    def component_protected_size(self, component_type: ComponentType) -> int:
        if component_type == FULL:
            return self._protected
        for comp in self.aux:
            if comp.component_type == component_type:
                return comp.protected
        return 0

    def full_evictable_size(self) -> int:
        return self._total - self._protected

    def full_protected_size(self) -> int:
        return self._protected

    def swa_evictable_size(self) -> int:
        return 0 if self.swa is None else self.swa.total - self.swa.protected

    def mamba_evictable_size(self) -> int:
        return 0 if self.mamba is None else self.mamba.total - self.mamba.protected

    def swa_protected_size(self) -> int:
        return 0 if self.swa is None else self.swa.protected

    def mamba_protected_size(self) -> int:
        return 0 if self.mamba is None else self.mamba.protected

    def adjust_component_size(self, node_id: NodeId, component_type: ComponentType, delta: int) -> None:
        """Only hybrid allocators' donors call this (Mamba, SWA compaction), which this core refuses."""
        self.node(node_id)
        if component_type != FULL:
            self._part(component_type)
        raise RefusedFeatureError("per-node size adjustments (its sizes are derived from values and leases)")

    def total_size(self) -> tuple[int, int]:
        return self._total, sum(comp.total for comp in self.aux)
