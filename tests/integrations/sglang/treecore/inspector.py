"""Test-only: SGLang's kit inspection interface over tree core "unicache" (as SGLang does for its Rust core).

Reads go through the core's public views (nodes, values, pin sets); the
kit's raw writes that have a meaning here (a node's host values, its device
values, the duplicate index) write the store's columns without bookkeeping,
as the interface asks. Lock counts, sizes and LRU lists are derived from
leases and values in this core, so the writes that would set them directly
raise `NotImplementedError` naming why; the kit flows run here use none.
"""

from __future__ import annotations

from array import array
from typing import Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams, MatchResult
from sglang.srt.mem_cache.unified_cache.components import ComponentType, EvictLayer
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import BaseEvictionResult, NodeId
from sglang.test.kits.unified_radix_cache.unified_tree_core_inspection_interface import (
    UnifiedTreeCoreInspectionInterface,
)

from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.treecore.values import host_array, host_tensor

_FULL = ComponentType.FULL
_MAMBA = ComponentType.MAMBA
_SWA = ComponentType.SWA


def _derived(what: str) -> NotImplementedError:
    return NotImplementedError(f"{what}: derived from leases and values in tree core 'unicache', not stored")


class InspectedUnicacheTreeCore(UnicacheTreeCore, UnifiedTreeCoreInspectionInterface):
    """Tree core "unicache" plus the kit's inspection interface, for the kit's fixtures only."""

    def contains_node(self, node_id: NodeId) -> bool:
        try:
            self.node(node_id)
        except KeyError:
            return False
        return True

    def get_parent_node_id(self, node_id: NodeId) -> Optional[NodeId]:
        parent = self.node(node_id).parent
        return None if parent is None else parent.id

    def get_child_node_ids(self, node_id: NodeId) -> list[NodeId]:
        return [c.id for c in self.node(node_id).children.values()]

    def get_node_key_length(self, node_id: NodeId) -> int:
        node = self.node(node_id)
        return node.end - node.start

    def get_node_token_ids(self, node_id: NodeId) -> list[int]:
        tokens = array("q")
        tokens.frombytes(self.node(node_id).kb)
        return tokens.tolist()

    def is_node_key_bigram(self, node_id: NodeId) -> bool:
        self.node(node_id)
        return False

    def get_component_host_value(self, node_id: NodeId, component_type: ComponentType) -> Optional[torch.Tensor]:
        node = self.node(node_id)
        if component_type == _MAMBA and self.mamba is not None:
            return self.mamba.host_state(node)
        if component_type == _SWA and self.swa is not None:
            return self.swa.host_state(node)
        vals = self.host_values(node)
        return None if vals is None or component_type != _FULL else host_tensor(vals).clone()

    def get_component_device_lock_ref(self, node_id: NodeId, component_type: ComponentType) -> int:
        node = self.node(node_id)
        if component_type == _MAMBA and self.mamba is not None:
            return self.mamba.device_lock_count(node)
        if component_type == _SWA and self.swa is not None:
            return self.swa.device_lock_count(node)
        return self.device_lock_count(node) if component_type == _FULL else 0

    def get_component_host_lock_ref(self, node_id: NodeId, component_type: ComponentType) -> int:
        node = self.node(node_id)
        if component_type == _MAMBA and self.mamba is not None:
            return self.mamba.host_lock_count(node)
        if component_type == _SWA and self.swa is not None:
            return self.swa.host_lock_count(node)
        return self.host_lock_count(node) if component_type == _FULL else 0

    def get_node_hit_count(self, node_id: NodeId) -> int:
        return self.node(node_id).hits

    def get_write_through_pending_id(self, node_id: NodeId) -> Optional[int]:
        return self.write_through_ack(self.node(node_id))

    def is_external_cache_stored(self, node_id: NodeId) -> bool:
        self.node(node_id)
        return False

    def is_node_in_device_lru(self, node_id: NodeId, component_type: ComponentType) -> bool:
        self.node(node_id)
        return False

    def is_node_in_host_lru(self, node_id: NodeId, component_type: ComponentType) -> bool:
        self.node(node_id)
        return False

    def get_component_device_lru_node_ids(self, component_type: ComponentType) -> list[NodeId]:
        return []

    def is_device_evictable_leaf(self, node_id: NodeId) -> bool:
        return self.contains_node(node_id) and self.is_evictable_device_leaf(self.node(node_id))

    def is_host_evictable_leaf(self, node_id: NodeId) -> bool:
        return self.contains_node(node_id) and self.is_evictable_host_leaf(self.node(node_id))

    def is_device_leaf(self, node_id: NodeId) -> bool:
        return self.is_evictable_device_leaf(self.node(node_id))

    def get_all_node_ids(self) -> list[NodeId]:
        return [x.id for x in self.nodes()]

    def set_node_hash_values(self, node_id: NodeId, hash_values: Optional[list[str]]) -> None:
        raise NotImplementedError("page hashes: tree core 'unicache' keeps none (storage is refused)")

    def set_component_device_value_raw(
        self, node_id: NodeId, component_type: ComponentType, value: Optional[torch.Tensor]
    ) -> None:
        if component_type != _FULL:
            raise ValueError(f"component is not enabled: {component_type}")
        self.store.dev[self.node(node_id).slot] = None if value is None else value.tolist()

    def set_component_host_value_raw(
        self, node_id: NodeId, component_type: ComponentType, value: Optional[torch.Tensor]
    ) -> None:
        if component_type != _FULL:
            raise ValueError(f"component is not enabled: {component_type}")
        self.store.host_col[self.node(node_id).slot] = None if value is None else host_array(value)

    def set_component_device_lock_ref(self, node_id: NodeId, component_type: ComponentType, lock_ref: int) -> None:
        raise _derived("lock counts")

    def remove_node_from_device_lru(self, node_id: NodeId, component_type: ComponentType) -> None:
        raise ValueError("FULL has no LRU list (SGLang's neither): its candidates are the evictable leaves")

    def insert_node_into_host_lru(self, node_id: NodeId, component_type: ComponentType) -> None:
        raise ValueError("FULL has no LRU list (SGLang's neither): its candidates are the evictable leaves")

    def set_component_evictable_size(self, component_type: ComponentType, value: int) -> None:
        raise _derived("evictable sizes")

    def set_component_protected_size(self, component_type: ComponentType, value: int) -> None:
        raise _derived("protected sizes")

    def update_duplicate_tracking(self, node_id: NodeId) -> None:
        self.track_duplicate(node_id)

    def advance_insert_walk_once(self) -> None:
        raise NotImplementedError("single insert-walk steps: tree core 'unicache' suspends only at its barriers")

    def evict_component(self, node_id: NodeId, component_type: ComponentType, target: EvictLayer) -> BaseEvictionResult:
        raise NotImplementedError("evicting one layer outside an eviction walk")

    def validate_cascade_evict(self, node_id: NodeId, component_type: ComponentType, target: EvictLayer) -> None:
        raise NotImplementedError("cascade eviction: FULL alone has none")

    def cleanup_tombstone_ancestors(self, node_id: NodeId) -> BaseEvictionResult:
        raise NotImplementedError("tombstone cleanup outside an eviction")

    def finalize_component_match_result(
        self, component_type: ComponentType, result: MatchResult, params: MatchPrefixParams,
        value_chunks: list[torch.Tensor], best_value_len: int,
    ) -> MatchResult:
        raise NotImplementedError("per-component match finalizers: FULL's is part of match_prefix")

    def build_backup_node_ids(self, node_id: NodeId, write_back: bool = False) -> list[NodeId]:
        return list(self.build_backup_kv_action(node_id).node_ids) if not write_back else [node_id]

