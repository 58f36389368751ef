"""Backups to host: their specs and commits, write-through pending marks (leases) and their acks."""

from __future__ import annotations

from typing import Optional

import torch
from sglang.srt.mem_cache.hicache_storage import PoolTransfer
from sglang.srt.mem_cache.unified_cache.cache_action import BackupKV
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import NodeId
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import NodeStateError, PendingMarkError
from unicache.integrations.sglang.treecore.receipts import FullHost, WriteThroughMark
from unicache.integrations.sglang.treecore.state import TreeState, lease_holders
from unicache.integrations.sglang.treecore.values import host_array
from unicache.tree.node import Node


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Backups(TreeState):
    """The backup part of `UnicacheTreeCore` (see the module docstring)."""

    def build_backup_spec(self, node_id: NodeId) -> tuple[torch.Tensor, dict[ComponentType, list[PoolTransfer]]]:
        node = self.node(node_id)
        vals = self.store.dev[node.slot]
        if vals is None:
            raise NodeStateError("build_backup_spec", node_id, "its Full KV is not on device")
        full = self._empty if self.store.host_col[node.slot] is not None else self._tensors[node.id]
        xfers: dict[ComponentType, list[PoolTransfer]] = {}
        for comp in self.aux:
            t = comp.backup_transfers(node, missing_only=True)
            if t:
                xfers[comp.component_type] = t
        return full, xfers

    def build_backup_kv_action(self, node_id: NodeId) -> BackupKV:
        return self._backup_action(self.node(node_id), write_back=False)

    def commit_backup(self, node_id: NodeId, host_indices: torch.Tensor,
                      comp_xfers: dict[ComponentType, list[PoolTransfer]]) -> None:
        node = self.node(node_id)
        parts = [(self._part(ct), xfers) for ct, xfers in comp_xfers.items()]
        for comp, xfers in parts:
            comp.commit_backup(node, xfers)
        if host_indices.numel() == 0:
            return
        if self.store.host_col[node.slot] is not None:
            raise NodeStateError("commit_backup", node_id, "its Full KV is already on host")
        vals = self.store.dev[node.slot]
        if vals is None or len(vals) != host_indices.numel():
            raise NodeStateError("commit_backup", node_id,
                                 f"{host_indices.numel()} host indices for {0 if vals is None else len(vals)} device values")
        self.store.set_host(node, host_array(host_indices))

    def mark_write_through_pending(self, node_ids: list[NodeId], ack_id: NodeId) -> list[NodeId]:
        nodes = [self.node(nid) for nid in node_ids]
        for x in nodes:
            held = self.write_through_ack(x)
            if held is not None and held != ack_id:
                raise PendingMarkError(x.id, ack_id, held)
        sets = [self.handed.host_pin_set(x) for x in nodes]
        lease = self.write_marks.get(ack_id)
        if lease is None:
            self.write_marks[ack_id] = self.ledger.acquire(FullHost, owner=WriteThroughMark(ack_id),
                                                           pins=tuple(dict.fromkeys(sets)))
        else:
            for p in sets:
                self.ledger.pin(lease, p)
        if len(nodes) == 1:
            return [nodes[0].id]
        depth: dict[int, int] = {}
        for x in nodes:  # each ancestor walked once for the whole batch (a batch is often one path)
            chain: list[Node] = []
            up: Optional[Node] = x
            while up is not None and up.id not in depth:
                chain.append(up)
                up = up.parent
            d = -1 if up is None else depth[up.id]
            for y in reversed(chain):
                d += 1
                depth[y.id] = d
        return sorted(node_ids, key=lambda nid: (depth[nid], nid))

    def finish_write_through(self, node_ids: list[NodeId], ack_id: int) -> None:  # lease: takes-from write_marks
        nodes = [self.node(nid) for nid in node_ids]
        lease = self.write_marks.get(ack_id)
        if lease is None:
            self.record.stale_ack(ack_id, node_ids)
            return
        marked = lease_holders(lease)
        self.record.write_through_ack(ack_id, lease.id, lease.owner, lease.generation, node_ids, len(marked))
        if all(x in nodes for x in marked):
            self._unpin_host(self.write_marks.pop(ack_id))
            for x in nodes:
                self._track_dup(x)
            return
        for x in nodes:
            p = self.handed.host_pins(x)
            if p is not None and lease in p:
                self.ledger.unpin(lease, p)
                self._track_dup(x)
                self._maybe_file(x)

    def is_write_through_compatible(self) -> bool:
        host = self.store.host_col
        for x in self.tree:
            parent = x.parent
            if (parent is not None and parent is not self.root and host[x.slot] is not None
                    and host[parent.slot] is None):
                return False
        return True
