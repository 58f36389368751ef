"""`LeaseTreeCore`: SGLang's Python tree core with every load-back pin a lease.

Registered as tree-core backend ``"leases"`` (see `plugin`). It keeps the
Python core's tree, LRUs and component drivers and changes only who owns
the load-back pins:

* each (load-back, component) takes one `Lease` pinning every node whose host
  slots it reads; the node's `load_back_pending_id` is a read-only view;
* a load-back whose transfer touches a node another load-back pins is
  served, not refused (stock 0.5.23 returns an empty spec: a lost host hit);
* several load-backs may be in flight on one anchor (acks consume them in
  commit order);
* `reset` advances the ledger's epoch, so a late ack settles stale;
* the Mamba component is swapped for `LeaseMambaComponent` (#36770).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Optional, Sequence

import torch
from leases import Borrowed, LeaseLedger, PinSet
from sglang.srt.disaggregation.kv_events import StorageMedium
from sglang.srt.mem_cache.base_prefix_cache import (
    DecLockRefParams,
    DecLockRefResult,
    IncLockRefResult,
)
from sglang.srt.mem_cache.hicache_storage import PoolTransfer
from sglang.srt.mem_cache.unified_cache.cache_action import CacheAction, ComponentAction
from sglang.srt.mem_cache.unified_cache.components import (
    BASE_COMPONENT_TYPE,
    CacheTransferPhase,
    ComponentType,
    TreeComponent,
)
from sglang.srt.mem_cache.unified_cache.components.mamba import MambaComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core import (
    UnifiedTreeCore,
    UnifiedTreeNode,
)
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import DecSwaLockOnlyResult
from sglang.srt.mem_cache.radix_cache import RadixKey

from unicache.components.markers import SWA, Full, Mamba
from unicache.integrations.sglang.errors import (
    LeaseCoreError,
    LeaseSanityError,
    LockReleasedTwiceError,
    SplitPinMismatchError,
    UnknownLoadBackError,
    UnleasedReceiptError,
)
from unicache.integrations.sglang.loadback import LoadBack
from unicache.integrations.sglang.lockcheck import expected_lock_refs, lock_problems
from unicache.integrations.sglang.locks import (
    LeasedDecLockRefParams,
    LeasedIncLockRefResult,
    TreeLock,
)
from unicache.integrations.sglang.mamba import LeaseMambaComponent
from unicache.integrations.sglang.node import LeaseTreeNode

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

LOAD_BACK = CacheTransferPhase.LOAD_BACK
_FULL = int(BASE_COMPONENT_TYPE)


class LeaseTreeCore(UnifiedTreeCore):
    """SGLang's Python tree core whose load-back pins are leases of one ledger."""

    def __init__(
        self, params: CacheInitParams, components: dict[ComponentType, TreeComponent]
    ) -> None:
        self.ledger = LeaseLedger("sglang-tree-core", history=0)
        self.load_backs: dict[int, deque[LoadBack]] = {}
        self._seq = 0
        self._epoch_first_node_id = 0
        self.overlapping_load_backs = 0
        self.stale_acks = 0
        self.lock_ledger = LeaseLedger("sglang-tree-locks", history=0)
        self.tree_locks: dict[int, TreeLock] = {}
        self.full_pins: dict[int, list[TreeLock]] = {}
        self._lock_seq = 0
        mamba = components.get(ComponentType.MAMBA)
        if mamba is not None and type(mamba) is MambaComponent:
            mamba.__class__ = LeaseMambaComponent
        super().__init__(params, components)

    def _new_node(self, priority: int = 0) -> UnifiedTreeNode:
        node = LeaseTreeNode(self.component_types, priority=priority)
        self._register_node(node)
        return node

    def reset(self) -> None:
        """Rebuild the tree; every load-back still in flight settles stale (epoch advance)."""
        if self.load_backs:
            self.ledger.advance_epoch()
            for queue in self.load_backs.values():
                while queue:
                    queue.popleft().release()
            self.load_backs.clear()
        if self.tree_locks or self.full_pins:
            self.lock_ledger.advance_epoch()
            while self.tree_locks:
                self.tree_locks.pop(next(iter(self.tree_locks))).release()
            for pins in self.full_pins.values():
                while pins:
                    pins.pop().release()
            self.full_pins.clear()
        super().reset()
        self._epoch_first_node_id = self.root_node.id

    @property
    def mamba_states_not_cached(self) -> int:
        """Checkpoints whose Mamba state could not be cached for want of a slot (#36770)."""
        comp = self.components_by_type.get(ComponentType.MAMBA)
        return comp.states_not_cached if isinstance(comp, LeaseMambaComponent) else 0

    def build_load_back_spec(
        self, node_id: int, req: Optional[Req] = None
    ) -> tuple[PoolTransfer, dict[ComponentType, list[PoolTransfer]]]:
        """The H->D transfers of a load-back; overlap with another load-back is served."""
        mamba_pool_idx = req.kv.mamba_pool_idx if req is not None else None
        node = self.node_by_id(node_id)
        kv_xfers = self.components_by_type[BASE_COMPONENT_TYPE].build_hicache_transfers(
            node, LOAD_BACK
        )
        if not kv_xfers:
            raise LeaseCoreError(f"build_load_back_spec: node {node_id} yields no Full KV transfer")
        kv_xfer = kv_xfers[0]
        comp_xfers: dict[ComponentType, list[PoolTransfer]] = {}
        for comp in self.components:
            ct = comp.component_type
            if ct == BASE_COMPONENT_TYPE:
                continue
            xfers = comp.build_hicache_transfers(node, LOAD_BACK, mamba_pool_idx=mamba_pool_idx)
            if xfers:
                comp_xfers[ct] = xfers
        if self._touches_foreign_pin(node_id, kv_xfer, comp_xfers):
            self.overlapping_load_backs += 1
        return kv_xfer, comp_xfers

    def _touches_foreign_pin(
        self,
        anchor: int,
        kv_xfer: PoolTransfer,
        comp_xfers: dict[ComponentType, list[PoolTransfer]],
    ) -> bool:
        for xfers in ([kv_xfer], *comp_xfers.values()):
            for xfer in xfers:
                for nid in xfer.nodes_to_load or ():
                    pinned = self.node_by_id(nid).load_back_pending_id
                    if pinned is not None and pinned != anchor:
                        return True
        return False

    def _pin_nodes(
        self, nodes: list[LeaseTreeNode], ct: ComponentType, lb: Borrowed[LoadBack]
    ) -> None:
        if ct == ComponentType.FULL:
            full_pins: list[PinSet[Full]] = []
            for n in nodes:
                if n.pins_full is None:
                    n.pins_full = PinSet(Full, n.id)
                full_pins.append(n.pins_full)
            if lb.full is not None:
                raise LeaseCoreError(f"{lb} already holds Full lease #{lb.full.id}")
            lb.full = self.ledger.acquire(Full, owner=lb, pins=tuple(full_pins))
        elif ct == ComponentType.SWA:
            swa_pins: list[PinSet[SWA]] = []
            for n in nodes:
                if n.pins_swa is None:
                    n.pins_swa = PinSet(SWA, n.id)
                swa_pins.append(n.pins_swa)
            if lb.swa is not None:
                raise LeaseCoreError(f"{lb} already holds SWA lease #{lb.swa.id}")
            lb.swa = self.ledger.acquire(SWA, owner=lb, pins=tuple(swa_pins))
        elif ct == ComponentType.MAMBA:
            mamba_pins: list[PinSet[Mamba]] = []
            for n in nodes:
                if n.pins_mamba is None:
                    n.pins_mamba = PinSet(Mamba, n.id)
                mamba_pins.append(n.pins_mamba)
            if lb.mamba is not None:
                raise LeaseCoreError(f"{lb} already holds Mamba lease #{lb.mamba.id}")
            lb.mamba = self.ledger.acquire(Mamba, owner=lb, pins=tuple(mamba_pins))

    def _lease_nodes(self, xfers: list[PoolTransfer]) -> list[LeaseTreeNode]:
        out: list[LeaseTreeNode] = []
        for xfer in xfers:
            for nid in xfer.nodes_to_load or ():
                node = self.node_by_id(nid)
                assert isinstance(node, LeaseTreeNode)
                out.append(node)
        return out

    def commit_load_back(
        self,
        node_id: int,
        device_indices: torch.Tensor,
        kv_xfer: PoolTransfer,
        comp_xfers: dict[ComponentType, list[PoolTransfer]],
    ) -> list[CacheAction | ComponentAction]:
        """Publish the loaded device indices and lease every node the load reads from host."""
        node = self.node_by_id(node_id)
        actions: list[CacheAction | ComponentAction] = []
        if self.is_write_back:
            self._seq += 1
            lb = LoadBack(self._seq, node_id, self.ledger.epoch)
            full_nodes = self._lease_nodes([kv_xfer])
            if full_nodes:
                self._pin_nodes(full_nodes, ComponentType.FULL, lb)
            for ct, xfers in comp_xfers.items():
                aux_nodes = self._lease_nodes(xfers)
                if aux_nodes:
                    self._pin_nodes(aux_nodes, ct, lb)
            self.load_backs.setdefault(node_id, deque()).append(lb)
        kv_xfer.device_indices = device_indices
        self.components_by_type[BASE_COMPONENT_TYPE].commit_hicache_transfer(
            node, LOAD_BACK, [kv_xfer], cache_actions=actions
        )
        for nid in kv_xfer.nodes_to_load or ():
            self.kv_events.record_store(self.node_by_id(nid), medium=StorageMedium.GPU)
        for ct, xfers in comp_xfers.items():
            self.components_by_type[ct].commit_hicache_transfer(
                node, LOAD_BACK, xfers, cache_actions=actions
            )
        self._update_evictable_leaf_sets(node)
        return actions

    def finish_load_back(self, anchor_node_id: int) -> None:
        """Ack the oldest load-back on this anchor: release its leases once, refresh duplicates."""
        if not self.is_write_back:
            self._refresh_path_duplicates(anchor_node_id)
            return
        queue = self.load_backs.get(anchor_node_id)
        if not queue:
            if anchor_node_id < self._epoch_first_node_id:
                self.stale_acks += 1
                return
            raise UnknownLoadBackError(anchor_node_id, self.ledger.epoch, sorted(self.load_backs))
        lb = queue.popleft()
        if not queue:
            del self.load_backs[anchor_node_id]
        full = lb.full
        touched = self._nodes_pinned_on_path(anchor_node_id, full.id if full is not None else None)
        lb.release()
        for node in touched:
            if node.pins_full is not None and not node.pins_full:
                node.pins_full = None
            self._update_duplicate_tracking(node)

    def _nodes_pinned_on_path(self, anchor: int, full_lease_id: Optional[int]) -> list[LeaseTreeNode]:
        out: list[LeaseTreeNode] = []
        if full_lease_id is None:
            return out
        node: Optional[UnifiedTreeNode] = self.node_by_id(anchor)
        while node is not None and node is not self.root_node:
            assert isinstance(node, LeaseTreeNode)
            pins = node.pins_full
            if pins is not None and pins._refs is not None and full_lease_id in pins._refs:
                out.append(node)
            node = node.parent
        return out

    def _refresh_path_duplicates(self, anchor: int) -> None:
        node: Optional[UnifiedTreeNode] = self.node_by_id(anchor)
        while node is not None and node is not self.root_node:
            self._update_duplicate_tracking(node)
            node = node.parent

    def _split_node(
        self, key: RadixKey, child: UnifiedTreeNode, split_len: int
    ) -> tuple[UnifiedTreeNode, Optional[CacheAction | ComponentAction]]:
        """Split as SGLang does, then pin the new parent fragment with the child's Full/SWA leases."""
        new_node, action = super()._split_node(key, child, split_len)
        assert isinstance(new_node, LeaseTreeNode) and isinstance(child, LeaseTreeNode)
        if child.pins_full:
            new_node.pins_full = PinSet(Full, new_node.id)
            for full in child.pins_full:
                self.ledger.pin(full, new_node.pins_full)
        if child.pins_swa:
            new_node.pins_swa = PinSet(SWA, new_node.id)
            for swa in child.pins_swa:
                self.ledger.pin(swa, new_node.pins_swa)
        declared, new_node.split_anchor = new_node.split_anchor, None
        view = new_node.load_back_pending_id
        if declared != view:
            raise SplitPinMismatchError(new_node.id, child.id, declared, view)
        if view is not None:
            self._update_duplicate_tracking(new_node)
        return new_node, action

    def _update_evictable_leaf_sets(self, node: UnifiedTreeNode) -> None:
        """SGLang's leaf-set update with `_is_device_leaf`/`_is_host_leaf` inlined in one frame.

        The hottest tree-core helper on the harness workload (called on every
        insert step, lock change, eviction and ack). Same predicates, no
        generator frames; SGLang's `sanity_check` recomputes both sets with
        its own predicates and compares.
        """
        device_leaf = host_leaf = False
        if node is not self.root_node:
            data = node.component_data
            locked = False
            for cd in data:
                if cd.lock_ref > 0:
                    locked = True
                    break
            if not locked:
                full = data[_FULL]
                if full.value is None and node.parent is not None:
                    if full.host_value is not None and not node.children:
                        host_leaf = True
                        for cd in data:
                            if cd.host_lock_ref > 0:
                                host_leaf = False
                                break
                else:
                    device_leaf = True
                    for child in node.children.values():
                        if child.component_data[_FULL].value is not None:
                            device_leaf = False
                            break
        if device_leaf:
            self.evictable_device_leaves.add(node)
        else:
            self.evictable_device_leaves.discard(node)
        if host_leaf:
            self.evictable_host_leaves.add(node)
        else:
            self.evictable_host_leaves.discard(node)

    def _take_lock(
        self, result: IncLockRefResult, node: UnifiedTreeNode, host: bool, full_pin: bool = False
    ) -> TreeLock:
        """One lease per component the acquire just counted on `node`'s segment."""
        self._lock_seq += 1
        uuids = result.component_host_lock_uuids if host else result.component_lock_uuids
        lock = TreeLock(self._lock_seq, node.id, host, full_pin, uuids)
        if node is not self.root_node:
            self._lease_lock(lock, node, result, host, full_pin)
        return lock

    def _lease_lock(
        self,
        lock: Borrowed[TreeLock],
        node: UnifiedTreeNode,
        result: IncLockRefResult,
        host: bool,
        full_pin: bool,
    ) -> None:
        assert isinstance(node, LeaseTreeNode)
        types = self.component_types
        skipped = result.skipped_lock_components
        host_uuids = result.component_host_lock_uuids
        if lock.full is not None or lock.swa is not None or lock.mamba is not None:
            raise LeaseCoreError(f"{lock} already holds leases {lock.lease_ids()}")
        if ComponentType.FULL not in skipped and (not host or ComponentType.FULL in host_uuids):
            if node.locks is None:
                node.locks = PinSet(Full, node.id)
            lock.full = self.lock_ledger.acquire(Full, owner=lock, pins=(node.locks,))
        if full_pin:
            return
        if ComponentType.SWA in types and ComponentType.SWA not in skipped:
            lock.swa = self.lock_ledger.acquire(SWA, owner=lock)
        if ComponentType.MAMBA in types and ComponentType.MAMBA not in skipped:
            lock.mamba = self.lock_ledger.acquire(Mamba, owner=lock)

    def _leased(self, result: LeasedIncLockRefResult, lock: TreeLock) -> LeasedIncLockRefResult:
        seq = lock.seq
        self.tree_locks[seq] = lock
        result.lock_seq = seq
        return result

    def _live_lock(self, node_id: int, params: DecLockRefParams, host: bool) -> int:
        """The seq of the live lock behind a receipt; typed errors for a foreign or spent one."""
        if not isinstance(params, LeasedDecLockRefParams):
            raise UnleasedReceiptError(node_id, params)
        seq = params.lock_seq
        lock = self.tree_locks.get(seq)
        if lock is None or lock.host != host:
            raise LockReleasedTwiceError(node_id, seq, "host lock" if host else "lock")
        return seq

    def inc_lock_ref(
        self, node_id: int, skip_lock_components: Sequence[ComponentType] = ()
    ) -> IncLockRefResult:
        """SGLang's lock walk on a leased receipt, then one lease per locked component behind it."""
        node = self.node_by_id(node_id)
        skipped = tuple(skip_lock_components)
        result = LeasedIncLockRefResult(node_id=node.id, skipped_lock_components=skipped)
        for component in self.components:
            if component.component_type not in skipped:
                component.acquire_component_lock(node=node, result=result)
        self._update_evictable_leaf_sets(node)
        return self._leased(result, self._take_lock(result, node, False))

    def inc_host_lock_ref(self, node_id: int) -> IncLockRefResult:
        """SGLang's host lock walk on a leased receipt, then one lease per locked component."""
        node = self.node_by_id(node_id)
        result = LeasedIncLockRefResult(node_id=node.id)
        for component in self.components:
            component.acquire_component_lock(node=node, result=result, lock_host=True)
        self._update_evictable_leaf_sets(node)
        return self._leased(result, self._take_lock(result, node, True))

    def dec_lock_ref(
        self, node_id: int, params: DecLockRefParams, skip_swa: bool = False
    ) -> DecLockRefResult:
        """Release the receipt's leases (after an early SWA release: Full only), then SGLang's walk."""
        seq = self._live_lock(node_id, params, False)
        out = super().dec_lock_ref(node_id, params, skip_swa)
        if skip_swa:
            self.tree_locks[seq].release_component(ComponentType.FULL)
            if self.tree_locks[seq].lease_ids():
                return out
        self.tree_locks.pop(seq).release()
        return out

    def dec_swa_lock_only(self, node_id: int, params: DecLockRefParams) -> DecSwaLockOnlyResult:
        """Release the receipt's SWA (and Mamba) leases early, then SGLang's walk."""
        seq = self._live_lock(node_id, params, False)
        if "SWA" not in self.tree_locks[seq].lease_ids() and ComponentType.SWA in self.component_types \
                and node_id != self.root_node.id:
            raise LockReleasedTwiceError(node_id, seq, "SWA part of lock")
        out = super().dec_swa_lock_only(node_id, params)
        self.tree_locks[seq].release_component(ComponentType.SWA)
        self.tree_locks[seq].release_component(ComponentType.MAMBA)
        return out

    def dec_window_lock_only(
        self, node_id: int, component_type: ComponentType, params: DecLockRefParams
    ) -> DecSwaLockOnlyResult:
        """Release the receipt's lease of one window component early, then SGLang's walk."""
        seq = self._live_lock(node_id, params, False)
        out = super().dec_window_lock_only(node_id, component_type, params)
        self.tree_locks[seq].release_component(component_type)
        return out

    def dec_host_lock_ref(self, node_id: int, params: DecLockRefParams) -> DecLockRefResult:
        """Release the host receipt's leases, then SGLang's walk."""
        seq = self._live_lock(node_id, params, True)
        out = super().dec_host_lock_ref(node_id, params)
        self.tree_locks.pop(seq).release()
        return out

    def inc_full_pin(self, node_id: int) -> None:
        """SGLang's Full pin walk, backed by a Full lease (no receipt: a stack per node)."""
        super().inc_full_pin(node_id)
        node = self.node_by_id(node_id)
        self.full_pins.setdefault(node_id, []).append(
            self._take_lock(IncLockRefResult(node_id=node_id), node, False, full_pin=True)
        )

    def dec_full_pin(self, node_id: int) -> None:
        pins = self.full_pins.get(node_id)
        if not pins:
            raise LockReleasedTwiceError(node_id, 0, "Full pin")
        super().dec_full_pin(node_id)
        pins.pop().release()
        if not pins:
            del self.full_pins[node_id]

    def expected_lock_refs(self) -> dict[tuple[int, int, bool], int]:
        """(node id, component, host) -> the count the live lock leases stand for."""
        return expected_lock_refs(self)

    def live_load_back_leases(self) -> int:
        return sum(lb.held_leases() for q in self.load_backs.values() for lb in q)

    def sanity_check(
        self,
        ongoing_write_through: list[tuple[int, int]],
        ongoing_load_back: list[tuple[int, int]],
    ) -> None:
        """SGLang's checks, then: every pin belongs to a live load-back of this epoch, and back."""
        super().sanity_check(ongoing_write_through, ongoing_load_back)
        problems: list[str] = []
        live_ids: dict[int, LoadBack] = {}
        for anchor, queue in self.load_backs.items():
            for lb in queue:
                for name, lid in lb.lease_ids().items():
                    live_ids[lid] = lb
                    if self.ledger.get(lid) is None:
                        problems.append(f"{lb}: {name} lease #{lid} is not live in the ledger")
                if lb.generation != self.ledger.epoch:
                    problems.append(f"{lb}: generation {lb.generation} != epoch {self.ledger.epoch}")
        anchors = {nid for _, nid in ongoing_load_back}
        for anchor in self.load_backs:
            if anchor not in anchors:
                problems.append(f"anchor {anchor} holds load-back leases but has no ongoing load-back")
        if self.ledger.live_count != len(live_ids):
            problems.append(
                f"ledger has {self.ledger.live_count} live leases, load-backs hold {len(live_ids)}"
            )
        for node in self._collect_all_nodes():
            assert isinstance(node, LeaseTreeNode)
            for pins in (node.pins_full, node.pins_swa, node.pins_mamba):
                if pins is None:
                    continue
                for lid in pins.ids():
                    if lid not in live_ids:
                        problems.append(f"node {node.id} pinned by lease #{lid} of no live load-back")
            if node.split_anchor is not None:
                problems.append(f"node {node.id} has an unchecked inherited anchor {node.split_anchor}")
        problems.extend(lock_problems(self))
        if problems:
            raise LeaseSanityError(problems)
