"""Device eviction, SGLang's step-wise protocol: start, next node, leaf (demote / backup / drop), end."""

from __future__ import annotations

from array import array

import torch
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    BaseEvictionResult,
    DemoteResult,
    DropSubtreeNoHostResult,
    EvictDeviceLeafResult,
    EvictDeviceNextNodeResult,
    NodeId,
)
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import NodeStateError, RefusedFeatureError
from unicache.integrations.sglang.treecore.state import FULL, TreeState
from unicache.integrations.sglang.treecore.values import host_tensor
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.tree.node import Node


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class DeviceEviction(TreeState):
    """The eviction part of `UnicacheTreeCore` (see the module docstring)."""

    def evict_device_start(self, component_type: ComponentType, request_cnt: int) -> None:
        self.record.evicting()
        if component_type != FULL:
            self._part(component_type).evict_start(request_cnt)
            return
        self._walk_quota = request_cnt
        self._walk_returned = []

    def evict_device_next_node(
        self, component_type: ComponentType, tracker: dict[ComponentType, int]
    ) -> EvictDeviceNextNodeResult:
        result = EvictDeviceNextNodeResult()
        if component_type != FULL:
            self._part(component_type).evict_next(tracker, result)
            return result
        quota = self._walk_quota
        if quota is None:
            raise NodeStateError("evict_device_next_node", self.root.id, "no device eviction walk started")
        if tracker.get(FULL, 0) >= quota:
            return result
        lru = self.store.lru_device
        while True:
            x = lru.pop()
            if x is None:
                return result
            if self.is_evictable_device_leaf(x):
                self._walk_returned.append(x)
                result.node_id = x.id
                result.made_progress = True
                return result

    def evict_device_end(self, component_type: ComponentType) -> None:
        if component_type != FULL:
            self._part(component_type).evict_end()
            return
        for x in self._walk_returned:
            self._maybe_file(x)
        self._walk_returned = []
        self._walk_quota = None

    def finish_mamba_state_eviction(self, node_id: NodeId) -> EvictDeviceNextNodeResult:
        if self.mamba is None:
            raise NodeStateError("finish_mamba_state_eviction", node_id, "MAMBA is not a component of this core")
        return self.mamba.finish_eviction(node_id)

    def finish_swa_state_eviction(self, node_id: NodeId) -> EvictDeviceNextNodeResult:
        if self.swa is None:
            raise NodeStateError("finish_swa_state_eviction", node_id, "SWA is not a component of this core")
        return self.swa.finish_eviction(node_id)

    def _device_leaf(self, op: str, node_id: NodeId) -> Node:
        node = self.node(node_id)
        if not self.is_evictable_device_leaf(node):
            raise NodeStateError(op, node_id, "not an evictable device leaf (pinned, or a device child, or not on device)")
        return node

    def evict_device_leaf(self, node_id: NodeId, is_write_back: bool) -> EvictDeviceLeafResult:
        node = self._device_leaf("evict_device_leaf", node_id)
        result = EvictDeviceLeafResult()
        if self.store.host_col[node.slot] is None:
            if is_write_back:
                result.backup_kv = self._backup_action(node, write_back=True)
                return result
            n = self._delete_unbacked(node, result)
            result.tracker[FULL] += n
            result.unbacked_tokens = n
            return result
        result.tracker[FULL] += self._demote(node, result)
        return result

    def _demote(self, node: Node, result: BaseEvictionResult) -> int:
        """Drop the node's Full device KV and (cascading, as SGLang's) every auxiliary device state on it."""
        frees = result.device_frees[FULL]
        for part in self.aux:
            if part.on_device(node):
                part.drop_device(node, result)
        n = self._drop_device(node, frees)
        self._maybe_file(node)
        return n

    def _delete_unbacked(self, node: Node, result: BaseEvictionResult) -> int:
        """Free an unbacked device leaf (every component), remove it, then its childless tombstone ancestors."""
        frees = result.device_frees[FULL]
        for part in self.aux:
            part.drop_all(node, result, count_host=False)
        n = self._drop_device(node, frees)
        parent = node.parent
        assert parent is not None
        self._remove(node)
        self._remove_tombstones(parent, result)
        return n

    def demote(self, node_id: NodeId) -> DemoteResult:
        node = self.node(node_id)
        slot = node.slot
        if node.parent is None or self.store.dev[slot] is None or self.store.host_col[slot] is None:
            raise NodeStateError("demote", node_id, "not on both tiers")
        result = DemoteResult()
        result.tracker[FULL] += self._demote(node, result)
        return result

    def drop_subtree_no_host(self, node_id: NodeId) -> DropSubtreeNoHostResult:
        node = self._device_leaf("drop_subtree_no_host", node_id)
        result = DropSubtreeNoHostResult(is_dropped=False)
        if self.store.host_col[node.slot] is not None:
            raise NodeStateError("drop_subtree_no_host", node_id, "the node is backed up")
        if self._host_pinned(node) or (self.aux and self._aux_pinned(node)):
            return result
        order: list[Node] = []
        stack = list(node.children.values())
        while stack:
            x = stack.pop()
            if self._dev_pinned(x) or self._host_pinned(x) or (self.aux and self._aux_pinned(x)):
                return result
            order.append(x)
            stack.extend(x.children.values())
        hvals: list[array[int]] = []
        for x in reversed(order):
            if self.store.host_col[x.slot] is not None:
                self._drop_host(x, hvals)
            for part in self.aux:
                part.drop_all(x, result, count_host=False)
            self._remove(x)
        if hvals:
            result.host_frees[FULL].extend(host_tensor(h) for h in hvals)
        result.tracker[FULL] += self._delete_unbacked(node, result)
        result.is_dropped = True
        return result

    def evict_excess_path_states(
        self,
        tail_node_id: NodeId,
        device_frees: dict[ComponentType, list[torch.Tensor]],
        host_frees: dict[ComponentType, list[torch.Tensor]],
        cache_actions: Actions,
    ) -> None:
        raise RefusedFeatureError("a Mamba path cap (--mamba-max-states-per-path)")
