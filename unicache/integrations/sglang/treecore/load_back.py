"""Load-backs from host: their specs, commits (a load-back pin lease per one) and acks, FIFO per anchor."""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import torch
from sglang.srt.mem_cache.base_prefix_cache import InsertResult
from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransfer
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.components import CacheTransferPhase
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import NodeId
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import NodeStateError, RefusedFeatureError, UnknownLoadBackError
from unicache.integrations.sglang.treecore.receipts import FullHost, LoadBackPin
from unicache.integrations.sglang.treecore.state import FULL, TreeState
from unicache.integrations.sglang.treecore.values import host_tensor, id_list
from unicache.integrations.sglang.treecore.walk import Actions
from unicache.tree.node import Node

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.mem_cache.hicache_storage import PoolTransferResult


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class LoadBacks(TreeState):
    """The load back part of `UnicacheTreeCore` (see the module docstring)."""

    def _load_back_chain(self, node: Node) -> list[Node]:
        """The host-only nodes from `node` up to the first on device, root first."""
        chain, _top = self.store.evicted_chain(node)
        host = self.store.host_col
        for x in chain:
            if host[x.slot] is None:
                raise NodeStateError("load-back", x.id, "its Full KV is on neither tier")
        return chain

    def build_load_back_spec(
        self, node_id: NodeId, req: Optional[Req] = None
    ) -> tuple[PoolTransfer, dict[ComponentType, list[PoolTransfer]]]:
        chain = self._load_back_chain(self.node(node_id))
        host = self.store.host_col
        gathered = array("q")
        for x in chain:
            h = host[x.slot]
            assert h is not None
            gathered += h
        ids = [x.id for x in chain]
        xfer = PoolTransfer(name=PoolName.KV, host_indices=host_tensor(gathered) if chain else self._empty_host,
                            device_indices=None, nodes_to_load=ids)
        if not self.aux:
            self.record.spec_built(node_id, len(gathered), ids)
            return xfer, {}
        anchor = self.node(node_id)
        comp_xfers: dict[ComponentType, list[PoolTransfer]] = {}
        for comp in self.aux:
            t = comp.load_back_transfers(anchor, req)
            if t:
                comp_xfers[comp.component_type] = t
        if self.is_write_back:
            for xfers in comp_xfers.values():
                for comp_xfer in xfers:
                    for nid in comp_xfer.nodes_to_load or ():
                        other = self._loading_for_other(nid, anchor.id)
                        if other is not None:
                            self.record.spec_declined(node_id, len(gathered), ids,
                                                      f"node #{nid}'s host copy is read by {other} (write-back)")
                            return PoolTransfer(name=PoolName.KV, host_indices=self._empty_host, nodes_to_load=[]), {}
        self.record.spec_built(node_id, len(gathered), ids)
        return xfer, comp_xfers

    def _loading_for_other(self, node_id: NodeId, anchor_id: NodeId) -> Optional[LoadBackPin]:
        """The load-back of another anchor that holds the node, if any (SGLang declines the spec then)."""
        p = self.handed.host_pins(self.node(node_id))
        if p is None:
            return None
        for lease in p:
            owner = lease.owner
            if isinstance(owner, LoadBackPin) and owner.anchor != anchor_id:
                return owner
        return None

    def commit_load_back(
        self, node_id: NodeId, device_indices: torch.Tensor, kv_xfer: PoolTransfer,
        comp_xfers: dict[ComponentType, list[PoolTransfer]],
    ) -> Actions:
        anchor = self.node(node_id)
        parts = [(self._part(ct), xfers) for ct, xfers in comp_xfers.items()]
        chain = [self.node(nid) for nid in kv_xfer.nodes_to_load or ()]
        store = self.store
        want = 0
        for x in chain:
            h = store.host_col[x.slot]
            if store.dev[x.slot] is not None or h is None:
                raise NodeStateError("commit_load_back", x.id, "not host-only")
            want += len(h)
        if device_indices.numel() != want:
            raise NodeStateError("commit_load_back", node_id,
                                 f"{device_indices.numel()} device indices for {want} host values")
        pin = LoadBackPin(anchor.id, next(self._load_back_seq))
        lease = self.ledger.acquire(FullHost, owner=pin, pins=tuple(self.handed.host_pin_set(x) for x in chain))
        self.load_backs.setdefault(anchor.id, deque()).append(lease)
        kv_xfer.device_indices = device_indices
        vals = id_list(device_indices)
        off = 0
        for x in chain:
            h = store.host_col[x.slot]
            assert h is not None
            k = len(h)
            self._publish_device(x, vals[off: off + k], device_indices[off: off + k].clone())
            off += k
        for x in chain:
            self._maybe_file(x)
        actions: Actions = []
        for comp, xfers in parts:
            comp.commit_load_back(anchor, xfers, pin, actions)
        self.record.committed()
        return actions

    def finish_load_back(self, anchor_node_id: NodeId) -> None:
        anchor = self.node(anchor_node_id)
        fifo = self.load_backs.get(anchor.id)
        if not fifo:
            raise UnknownLoadBackError(anchor_node_id, self.ledger.epoch)
        lease = fifo.popleft()
        if not fifo:
            del self.load_backs[anchor.id]
        owner = lease.owner
        assert isinstance(owner, LoadBackPin)
        for comp in self.aux:
            comp.finish_load_back(owner)
        lease_id, generation = lease.id, lease.generation
        holders = self._unpin_host(lease)
        self.record.load_back_ack(lease_id, owner, generation, [x.id for x in holders])
        pinned = set(holders)
        x: Optional[Node] = anchor
        while x is not None and x is not self.root:
            if not self.is_write_back or x in pinned:
                self._track_dup(x)
            x = x.parent

    def build_hicache_transfers(
        self, component_type: ComponentType, node_id: NodeId, phase: CacheTransferPhase, *,
        host_indices: Optional[torch.Tensor] = None, token_ids: Optional[Sequence[int]] = None,
        prefetch_tokens: int = 0, staging_tokens: int = 0, last_hash: Optional[str] = None,
    ) -> Optional[list[PoolTransfer]]:
        if component_type != FULL:
            comp = self._part(component_type)
            if phase == CacheTransferPhase.LOAD_BACK:
                return comp.load_back_transfers(self.node(node_id), None)
            if phase == CacheTransferPhase.BACKUP_HOST:
                return comp.backup_transfers(self.node(node_id), missing_only=False)
            raise RefusedFeatureError(f"HiCache transfers of phase {phase.name} (storage prefetch)")
        if phase == CacheTransferPhase.LOAD_BACK:
            return [self.build_load_back_spec(node_id)[0]]
        if phase == CacheTransferPhase.BACKUP_HOST:
            return None
        raise RefusedFeatureError(f"HiCache transfers of phase {phase.name} (storage prefetch)")

    def commit_hicache_transfers(
        self, node_id: NodeId, phase: CacheTransferPhase, comp_xfers: dict[ComponentType, list[PoolTransfer]], *,
        cache_actions: Actions, insert_result: Optional[InsertResult] = None,
        pool_storage_result: Optional[PoolTransferResult] = None,
    ) -> None:
        raise RefusedFeatureError(f"committing HiCache transfers of phase {phase.name} (storage prefetch)")

    def prefetch_anchor_info(self, node_id: NodeId) -> tuple[Optional[str], Optional[str]]:
        self.node(node_id)
        return None, None
