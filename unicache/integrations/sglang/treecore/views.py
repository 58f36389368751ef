"""Reads of the tree SGLang makes (residency, hashes, path info, canary walks), and reset."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (
    NodeId,
    RadixCacheWalkResult,
    TreePathNodeInfo,
)
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import RefusedFeatureError
from unicache.integrations.sglang.treecore.state import FULL, TreeState
from unicache.tree.node import Node


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class TreeViews(TreeState):
    """The views part of `UnicacheTreeCore` (see the module docstring)."""

    def get_component_device_value(self, node_id: NodeId, component_type: ComponentType) -> Optional[torch.Tensor]:
        node = self.node(node_id)
        if component_type != FULL:
            for comp in self.aux:
                if comp.component_type == component_type:
                    return comp.device_state(node)
            return None
        return self._tensors.get(node.id)

    def component_has_host_value_only(self, node_id: NodeId, component_type: ComponentType) -> bool:
        node = self.node(node_id)
        if component_type != FULL:
            return any(comp.component_type == component_type and comp.host_only(node) for comp in self.aux)
        return self.store.dev[node.slot] is None and self.store.host_col[node.slot] is not None

    def reset(self) -> None:
        """Revoke every lease (epoch advance; late releases settle stale), drop the tree, start a new one."""
        self.ledger.advance_epoch()
        for locks in (self.device_locks, self.host_locks, self.write_marks):
            while locks:
                _, lease = locks.popitem()
                lease.release()
        for stack in self.full_pins.values():
            while stack:
                stack.pop().release()
        self.full_pins.clear()
        for fifo in self.load_backs.values():
            while fifo:
                fifo.popleft().release()
        self.load_backs.clear()
        for comp in self.aux:
            comp.release_all()
        self.record.reset()
        self.tree.kill()
        self._build_tree()

    def node_by_id(self, node_id: NodeId) -> UnifiedTreeNode:
        raise RefusedFeatureError(
            f"node_by_id({node_id}): SGLang node objects (sessions, C128); its nodes are unicache's")

    @property
    def root_node(self) -> UnifiedTreeNode:
        raise RefusedFeatureError("root_node: SGLang node objects (sessions, C128); its nodes are unicache's")

    def is_backuped(self, node_id: NodeId) -> bool:
        node = self.node(node_id)
        return self.store.host_col[node.slot] is not None and node.parent is not None

    def is_root(self, node_id: NodeId) -> bool:
        return self.node(node_id) is self.root

    def get_last_hash_value(self, node_id: NodeId) -> Optional[str]:
        """No page hashes: they exist only with storage or KV events, both refused."""
        self.node(node_id)
        return None

    def get_prefix_hash_values(self, node_id: NodeId) -> list[str]:
        self.node(node_id)
        return []

    def get_hash_values(self, node_id: NodeId) -> list[str]:
        self.node(node_id)
        return []

    def root_node_handle(self, extra_key: Optional[str] = None) -> NodeId:
        return self.root.id

    def dfs_weight_order(self, node_ids: Sequence[NodeId]) -> list[int]:
        """SGLang's order: depth first, heavier subtrees (more requests ending in them) first."""
        by_node: dict[int, list[int]] = {}
        for i, nid in enumerate(node_ids):
            by_node.setdefault(self.node(nid).id, []).append(i)
        weight: dict[int, int] = {k: len(v) for k, v in by_node.items()}
        post: list[Node] = []
        stack: list[tuple[Node, bool]] = [(self.root, False)]
        while stack:
            x, seen = stack.pop()
            if seen:
                post.append(x)
                continue
            stack.append((x, True))
            stack.extend((c, False) for c in reversed(list(x.children.values())))
        for x in post:
            weight[x.id] = weight.get(x.id, 0) + sum(weight.get(c.id, 0) for c in x.children.values())
        order: list[int] = []
        stack = [(self.root, False)]
        while stack:
            x, seen = stack.pop()
            if seen:
                order.extend(by_node.get(x.id, ()))
                continue
            kids = sorted(x.children.values(), key=lambda c: -weight.get(c.id, 0))
            stack.append((x, True))
            stack.extend((c, False) for c in reversed(kids))
        return order

    def collect_path_info(self, end_node_ids: Sequence[NodeId]) -> tuple[tuple[TreePathNodeInfo, ...], ...]:
        dev = self.store.dev
        out: list[tuple[TreePathNodeInfo, ...]] = []
        for nid in end_node_ids:
            path = self._path(self.node(nid))
            infos: list[TreePathNodeInfo] = []
            for x in reversed(path):
                parent = x.parent
                assert parent is not None
                vals = dev[x.slot]
                infos.append(TreePathNodeInfo(x.id, parent.id, x.start, x.end,
                                              None if vals is None else len(vals), len(x.children)))
            out.append(tuple(infos))
        return tuple(out)

    def walk_for_kv_canary(self, unlocked_only: bool, swa_resident_only: bool) -> RadixCacheWalkResult:
        slots: list[int] = []
        positions: list[int] = []
        prev: list[int] = []
        dev = self.store.dev
        stack: list[tuple[Node, int]] = [(self.root, -1)]
        while stack:
            x, parent_last = stack.pop()
            vals = dev[x.slot] or []
            emit = x is not self.root and not (unlocked_only and self._dev_pinned(x))
            last = parent_last
            for j, s in enumerate(vals):
                if emit:
                    slots.append(s)
                    positions.append(x.start + j)
                    prev.append(parent_last if j == 0 else vals[j - 1])
                last = s
            stack.extend((c, last) for c in reversed(list(x.children.values())))
        return RadixCacheWalkResult(
            slot_indices=torch.tensor(slots, dtype=torch.int64),
            positions=torch.tensor(positions, dtype=torch.int64),
            prev_slot_indices=torch.tensor(prev, dtype=torch.int64),
        )

    def all_values_flatten(self) -> torch.Tensor:
        tensors = self._tensors
        chunks = [tensors[x.id] for x in self.tree if x.id in tensors]
        return torch.cat(chunks) if chunks else self._empty

    def all_mamba_values_flatten(self) -> torch.Tensor:
        if self.mamba is None:
            return torch.tensor([], dtype=torch.int64, device=self.device)
        mamba = self.mamba
        chunks = [t for t in (mamba.device_state(x) for x in self._dfs()) if t is not None]
        return torch.cat(chunks) if chunks else torch.tensor([], dtype=torch.int64, device=self.device)

    def _dfs(self) -> list[Node]:
        """Every node in SGLang's depth-first order (children in insertion order)."""
        out: list[Node] = []
        stack = [self.root]
        while stack:
            x = stack.pop()
            out.append(x)
            stack.extend(reversed(list(x.children.values())))
        return out

    def pretty_print(self) -> None:
        dev, host = self.store.dev, self.store.host_col
        for x in self.tree:
            depth = len(self._path(x))
            print(f"{'  ' * depth}node {x.id} [{x.start},{x.end}) device={dev[x.slot] is not None} "
                  f"host={host[x.slot] is not None} device_pins={self.device_lock_count(x)} "
                  f"host_pins={len(self.host_leases(x))}")
