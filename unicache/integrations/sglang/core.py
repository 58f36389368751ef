"""`LeaseTreeCore`: SGLang's Python tree core with every load-back pin and tree lock a lease.

Registered as tree-core backend ``"leases"`` (see `plugin`). It keeps the
Python core's tree, LRUs and component drivers; its tree locks are leases
(`lockcore.LockLeaseCore`), and it changes who owns the load-back pins:

* each (load-back, component) takes one `Lease` pinning every node whose host
  slots it reads; the node's `load_back_pending_id` is a read-only view;
* a load-back whose transfer touches a node another load-back pins is
  served, not refused (stock 0.5.23 returns an empty spec: a lost host hit);
* several load-backs may be in flight on one anchor (acks consume them in
  commit order);
* `reset` advances the ledger's epoch, so a late ack settles stale;
* the Mamba component is swapped for `LeaseMambaComponent` (#36770).

A few of SGLang's hottest tree-core helpers (leaf-set update, D-/H-leaf
predicates, the match walk) are overridden with the same steps in fewer
frames; `sanity_check` compares the leaf sets with SGLang's own predicates.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Optional

import torch
from leases import Borrowed, LeaseLedger
from prometheus_client import REGISTRY, CollectorRegistry
from sglang.srt.disaggregation.kv_events import StorageMedium
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams, MatchResult
from sglang.srt.mem_cache.hicache_storage import PoolTransfer
from sglang.srt.mem_cache.unified_cache.cache_action import CacheAction, ComponentAction
from sglang.srt.mem_cache.unified_cache.components import (
    BASE_COMPONENT_TYPE,
    CacheTransferPhase,
    ComponentType,
    TreeComponent,
)
from sglang.srt.mem_cache.unified_cache.components.mamba import MambaComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore, UnifiedTreeNode
from sglang.srt.mem_cache.radix_cache import RadixKey

from unicache.integrations.sglang.errors import (
    LeaseCoreError,
    LeaseSanityError,
    SplitPinMismatchError,
    UnknownLoadBackError,
)
from unicache.integrations.sglang.loadback import MARKERS, LoadBack
from unicache.integrations.sglang.lockcore import LockLeaseCore
from unicache.integrations.sglang.mamba import LeaseMambaComponent
from unicache.integrations.sglang.metrics import SGLangMetrics, register_sglang_metrics
from unicache.metrics.families import Family, error_families, ledger_families, merge
from unicache.integrations.sglang.node import LeaseTreeNode

if TYPE_CHECKING:
    from sglang.srt.managers.schedule_batch import Req
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

LOAD_BACK = CacheTransferPhase.LOAD_BACK
_FULL = int(BASE_COMPONENT_TYPE)


class LeaseTreeCore(LockLeaseCore):
    """SGLang's Python tree core whose load-back pins (and tree locks) are leases."""

    def __init__(
        self, params: CacheInitParams, components: dict[ComponentType, TreeComponent]
    ) -> None:
        self.ledger = LeaseLedger(
            "sglang-tree-core", history=0, clock=time.monotonic if params.enable_metrics else None
        )
        self.load_backs: dict[int, deque[LoadBack]] = {}
        self._seq = 0
        self._epoch_first_node_id = 0
        self.overlapping_load_backs = 0
        self.stale_acks = 0
        mamba = components.get(ComponentType.MAMBA)
        if mamba is not None and type(mamba) is MambaComponent:
            mamba.__class__ = LeaseMambaComponent
        super().__init__(params, components)
        self.metrics: Optional[SGLangMetrics] = None
        if params.enable_metrics:
            self.register_metrics()

    def register_metrics(
        self, *, start: bool = True, registry: CollectorRegistry = REGISTRY
    ) -> Optional[SGLangMetrics]:
        """Put this core's lease metrics into SGLang's ``/metrics`` (`register_sglang_metrics`).

        Labelled as SGLang labels its own radix-cache metrics
        (`radix_cache_metric_labels`: cache type and tp/pp/dp ranks), so the
        series of every scheduler rank stay apart and line up with SGLang's.
        """
        from sglang.srt.layers.dp_attention import is_dp_attention_enabled
        from sglang.srt.observability.metrics_collector import radix_cache_metric_labels
        from sglang.srt.runtime_context import get_parallel

        raw = radix_cache_metric_labels(type(self).__name__, get_parallel(), is_dp_attention_enabled())
        labels = {str(k): str(v) for k, v in raw.items()}
        self.metrics = register_sglang_metrics(self.metric_families, labels, start=start, registry=registry)
        return self.metrics

    def metric_families(self) -> list[Family]:
        """Both ledgers' lease metrics (load-back pins and tree locks), the core's counters, typed errors."""
        fams = merge(ledger_families(self.ledger), ledger_families(self.lock_ledger), error_families())
        stale = Family("unicache_acks", "counter", "Transfer acks by outcome.", ("outcome",))
        stale.add(("stale",), self.stale_acks)
        served = Family("unicache_overlapping_load_backs", "counter",
                        "Load-backs served over nodes another load-back pins (stock 0.5.23 refuses them).")
        served.add((), self.overlapping_load_backs)
        skipped = Family("unicache_mamba_states_skipped", "counter",
                         "Mamba states not cached or not copied for want of a slot (#36770), by where.", ("where",))
        skipped.add(("checkpoint",), self.mamba_states_not_cached)
        skipped.add(("match_copy",), self.mamba_states_not_copied)
        in_flight = Family("unicache_transfers_in_flight", "gauge", "Load-backs awaiting their ack.")
        in_flight.add((), sum(len(q) for q in list(self.load_backs.values())))
        return fams + [stale, served, skipped, in_flight]

    def reset(self) -> None:
        """Rebuild the tree; every load-back still in flight settles stale (epoch advance)."""
        if self.load_backs:
            self.ledger.advance_epoch()
            for queue in self.load_backs.values():
                while queue:
                    queue.popleft().release()
            self.load_backs.clear()
        super().reset()
        self._epoch_first_node_id = self.root_node.id

    @property
    def mamba_states_not_cached(self) -> int:
        """Checkpoints whose Mamba state could not be cached for want of a slot (#36770)."""
        comp = self.components_by_type.get(ComponentType.MAMBA)
        return comp.states_not_cached if isinstance(comp, LeaseMambaComponent) else 0

    @property
    def mamba_states_not_copied(self) -> int:
        """Matches whose Mamba state could not be copied for want of a slot (#36770), served as misses."""
        comp = self.components_by_type.get(ComponentType.MAMBA)
        return comp.states_not_copied if isinstance(comp, LeaseMambaComponent) else 0

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
        """One lease of component `ct` for `lb`, pinning each node's pin set of that component."""
        if ct in lb.leases:
            raise LeaseCoreError(f"{lb} already holds a {ct.name} lease #{lb.leases[ct].id}")
        lb.leases[ct] = self.ledger.acquire(
            MARKERS[ct], owner=lb, pins=tuple(n.ensure_pins(ct) for n in nodes)
        )

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
            for ct, xfers in ((BASE_COMPONENT_TYPE, [kv_xfer]), *comp_xfers.items()):
                nodes = self._lease_nodes(xfers)
                if nodes and ct in MARKERS:
                    self._pin_nodes(nodes, ct, lb)
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
        full = lb.lease(BASE_COMPONENT_TYPE)
        touched = self._nodes_pinned_on_path(anchor_node_id, full.id if full is not None else None)
        lb.release()
        for node in touched:
            self._update_duplicate_tracking(node)

    def _nodes_pinned_on_path(self, anchor: int, full_lease_id: Optional[int]) -> list[LeaseTreeNode]:
        out: list[LeaseTreeNode] = []
        if full_lease_id is None:
            return out
        node: Optional[UnifiedTreeNode] = self.node_by_id(anchor)
        while node is not None and node is not self.root_node:
            assert isinstance(node, LeaseTreeNode)
            pins = node.pins(BASE_COMPONENT_TYPE)
            if pins is not None and pins.has(full_lease_id):
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
        new_node, action = self._gated(lambda: super(LeaseTreeCore, self)._split_node(key, child, split_len))
        assert isinstance(new_node, LeaseTreeNode) and isinstance(child, LeaseTreeNode)
        for ct in (ComponentType.FULL, ComponentType.SWA):
            pins = child.pins(ct)
            if pins:
                inherited = new_node.ensure_pins(ct)
                for lease in pins:
                    self.ledger.pin(lease, inherited)
        declared, new_node.split_anchor = new_node.split_anchor, None
        view = new_node.load_back_pending_id
        if declared != view:
            raise SplitPinMismatchError(new_node.id, child.id, declared, view)
        if view is not None:
            self._update_duplicate_tracking(new_node)
        return new_node, action

    def _match_prefix_helper(self, key: RadixKey, params: MatchPrefixParams) -> MatchResult:
        """SGLang's match walk with its per-node closures and list comprehensions inlined.

        Same steps as 0.5.23's `_match_prefix_helper`: every validator runs on
        every visited node (SWA's are stateful, so no short-circuit), the same
        split, the same post-processing. A visited node is `evicted` exactly
        when its Full value is None (it has a parent), so the value test
        stands for SGLang's `not node.evicted`.
        """
        node = self.root_node
        page_size = self.page_size
        key_offset = 0
        child_key = key.child_key_at(key_offset, page_size)
        value: list[torch.Tensor] = []
        best_match_node = best_match_device_node = node
        best_match_device_value_len = 0
        full_kv_hit_length = 0
        action: Optional[CacheAction | ComponentAction] = None
        separate_device_match = self.enable_hicache
        validators = self._create_match_validators(params, match_device_only=not separate_device_match)
        device_validators = (
            self._create_match_validators(params, match_device_only=True)
            if separate_device_match
            else validators
        )
        key_len = len(key)
        while key_offset < key_len and child_key in node.children:
            child = node.children[child_key]
            if child.evicted and not child.backuped:
                break
            child_node_key = child.key
            if child_node_key is None:
                raise LeaseCoreError(f"match: node {child.id} under node {node.id} has no key")
            prefix_len = child_node_key.match_at(key, key_offset, page_size=page_size)
            full_kv_hit_length += prefix_len
            split = prefix_len < len(child_node_key)
            if split:
                node, action = self._split_node(child_node_key, child, prefix_len)
            else:
                node = child
            full_value = node.component_data[_FULL].value
            if full_value is not None:
                value.append(full_value)
            matched = True
            for validator in validators:
                if not validator(node):
                    matched = False
            if matched:
                best_match_node = node
            if separate_device_match:
                matched = True
                for validator in device_validators:
                    if not validator(node):
                        matched = False
            if matched:
                best_match_device_value_len = len(value)
                best_match_device_node = node
            if split:
                break
            key_offset += prefix_len
            if key_offset < key_len:
                child_key = key.child_key_at(key_offset, page_size)
        return self._match_post_processor(
            params,
            value,
            best_match_node,
            best_match_device_node,
            best_match_device_value_len,
            full_kv_hit_length,
            action,
            last_visited_node_id=node.id if node is not self.root_node else None,
            device_validators=device_validators,
        )

    def _is_device_leaf(self, node: UnifiedTreeNode) -> bool:
        """SGLang's D-leaf predicate without generator frames (over the tree's own components)."""
        if node is self.root_node or node.evicted:
            return False
        data = node.component_data
        for ct in self._tree_cts:
            if data[ct].lock_ref > 0:
                return False
        for child in node.children.values():
            if child.component_data[_FULL].value is not None:
                return False
        return True

    def _is_host_leaf(self, node: UnifiedTreeNode) -> bool:
        """SGLang's H-leaf predicate without generator frames (over the tree's own components)."""
        if node is self.root_node or not node.evicted or node.children:
            return False
        data = node.component_data
        if data[_FULL].host_value is None:
            return False
        for ct in self._tree_cts:
            cd = data[ct]
            if cd.host_lock_ref > 0 or cd.lock_ref > 0:
                return False
        return True

    def _update_evictable_leaf_sets(self, node: UnifiedTreeNode) -> None:
        """SGLang's leaf-set update with `_is_device_leaf`/`_is_host_leaf` inlined in one frame.

        The hottest tree-core helper on the harness workload (called on every
        insert step, lock change, eviction and ack). Same predicates, no
        generator frames, and the lock tests over the tree's own components
        only (the others' counters are never written, so they stay 0);
        SGLang's `sanity_check` recomputes both sets with its own predicates
        and compares.
        """
        device_leaf = host_leaf = False
        if node is not self.root_node:
            data = node.component_data
            locked = False
            for ct in self._tree_cts:
                if data[ct].lock_ref > 0:
                    locked = True
                    break
            if not locked:
                full = data[_FULL]
                if full.value is None and node.parent is not None:
                    if full.host_value is not None and not node.children:
                        host_leaf = True
                        for ct in self._tree_cts:
                            if data[ct].host_lock_ref > 0:
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

    def _leaf_problems(self) -> list[str]:
        """The evictable-leaf sets against SGLang's own predicates (this core overrides them)."""
        problems: list[str] = []
        for node in self._collect_all_nodes():
            for name, leaves, stock in (
                ("device", self.evictable_device_leaves, UnifiedTreeCore._is_device_leaf),
                ("host", self.evictable_host_leaves, UnifiedTreeCore._is_host_leaf),
            ):
                if (node in leaves) != stock(self, node):
                    problems.append(f"node {node.id}: evictable {name} leaf set disagrees with SGLang's predicate")
        return problems

    def live_load_back_leases(self) -> int:
        return sum(lb.held_leases() for q in self.load_backs.values() for lb in q)

    def sanity_check(
        self,
        ongoing_write_through: list[tuple[int, int]],
        ongoing_load_back: list[tuple[int, int]],
    ) -> None:
        """SGLang's checks, then: every pin belongs to a live load-back of this epoch, and back."""
        super().sanity_check(ongoing_write_through, ongoing_load_back)
        problems: list[str] = self._leaf_problems()
        live_ids: dict[int, Borrowed[LoadBack]] = {}  # an index of the queues' load-backs, which own them
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
            for pins in (node.load_back_pins or {}).values():
                for lid in pins.ids():
                    if lid not in live_ids:
                        problems.append(f"node {node.id} pinned by lease #{lid} of no live load-back")
            if node.split_anchor is not None:
                problems.append(f"node {node.id} has an unchecked inherited anchor {node.split_anchor}")
        problems.extend(self.lock_problems())
        if problems:
            raise LeaseSanityError(problems)
