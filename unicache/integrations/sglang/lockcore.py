"""`LockLeaseCore`: SGLang's Python tree core whose every tree lock is a lease.

One lease per lock receipt (`locks.LockReceipt`), of a ledger of its own:
`inc_lock_ref`, `inc_host_lock_ref` and `inc_full_pin` run SGLang's lock
walk, then take the lease (pinning the anchor's lock pin set); every release
checks the receipt first (a spent receipt raises `LockReleasedTwiceError`, a
foreign one `UnleasedReceiptError`, both naming node and lock, before any
counter moves), runs SGLang's walk, then releases the lease. The integer
counters SGLang's walks write are the view its fast paths read; on this
core's nodes they can be written only while one of these operations (or a
split, or the root's set-up) holds the `CounterGate` open (`counters`).

SGLang derives partial releases from a receipt with `dataclasses.replace`
(0.5.23 `components/mamba.py:539-548`: the lazy Mamba extra buffer gives back
a lock's Mamba part with a copy that skips every other component, then adds
Mamba to the original's skipped set): a copy naming a live lease releases
those parts early (`released_early`), and the lease once nothing is left.
"""

from __future__ import annotations

import time

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Sequence, TypeVar

from leases import Held, Lease, LeaseLedger, PinSet, takes_from
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, DecLockRefResult
from sglang.srt.mem_cache.unified_cache.components import ComponentType, TreeComponent
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeCore, UnifiedTreeNode
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import DecSwaLockOnlyResult

from unicache.integrations.sglang.counters import CounterGate, guarded_component_data
from unicache.integrations.sglang.errors import (
    LockReleasedTwiceError,
    UnleasedReceiptError,
    WindowLockHeldError,
)
from unicache.integrations.sglang.locks import Locked, LockReceipt, add_expected_refs
from unicache.integrations.sglang.node import LeaseTreeNode

if TYPE_CHECKING:
    from sglang.srt.mem_cache.cache_init_params import CacheInitParams

STRICT_COUNTERS_ENV = "UNICACHE_SGLANG_STRICT_LOCK_COUNTERS"
_SWA = ComponentType.SWA
_T = TypeVar("_T")


class LockLeaseCore(UnifiedTreeCore):
    """SGLang's Python tree core with one lease behind every lock receipt.

    `strict_counters` (or ``UNICACHE_SGLANG_STRICT_LOCK_COUNTERS=1``) guards
    the lock counters of every node (see `counters`): a write outside the
    core's lock operations raises at once. Off by default: intercepting
    writes costs SGLang's fast paths 2-3% (docs/sglang.md); `sanity_check`
    recomputes the counters from the leases in either mode.
    """

    strict_counters: bool = False

    def __init__(
        self, params: CacheInitParams, components: dict[ComponentType, TreeComponent]
    ) -> None:
        clock = time.monotonic if params.enable_metrics else None
        self.lock_ledger = LeaseLedger("sglang-tree-locks", history=0, clock=clock)
        self.tree_locks: dict[int, Lease[Locked, Held]] = {}
        self.full_pins: dict[int, list[Lease[Locked, Held]]] = {}
        self.counter_gate = gate = CounterGate(lambda: self._node_arena.values())
        self._guarded_data = guarded_component_data(gate)
        self._tree_cts: tuple[int, ...] = tuple(int(ct) for ct in components)
        self._guard_new_nodes = False
        gate.open += 1
        try:
            super().__init__(params, components)
        finally:
            gate.open -= 1
        self._tree_cts = tuple(int(ct) for ct in self.component_types)
        if self.strict_counters or os.environ.get(STRICT_COUNTERS_ENV, "") == "1":
            self._guard_new_nodes = True
            for node in self._node_arena.values():
                self._guard_counters(node)

    def _guard_counters(self, node: UnifiedTreeNode) -> None:
        """Make `node`'s lock counters writable only through the gate (see `counters`)."""
        data, guarded = node.component_data, self._guarded_data
        for ct in self._tree_cts:
            data[ct].__class__ = guarded

    def _new_node(self, priority: int = 0) -> UnifiedTreeNode:
        node = LeaseTreeNode(self.component_types, priority=priority)
        self._register_node(node)
        if self._guard_new_nodes:
            self._guard_counters(node)
        return node

    def reset(self) -> None:
        """Settle every lock lease stale, then SGLang's reset (which sets the root's counters)."""
        self._revoke_locks()
        self._gated(super().reset)

    def _revoke_locks(self) -> None:
        """Advance the lock epoch (every live lock lease revoked) and settle them all stale."""
        if not (self.tree_locks or self.full_pins):
            return
        self.lock_ledger.advance_epoch()
        locks = self.tree_locks
        while locks:
            _, lease = locks.popitem()
            lease.release()
        for pins in self.full_pins.values():
            while pins:
                pins.pop().release()
        self.full_pins.clear()

    def _lease_lock(self, receipt: LockReceipt, node: UnifiedTreeNode) -> Lease[Locked, Held]:
        """The one lease behind `receipt`, pinning `node`'s lock pin set."""
        assert isinstance(node, LeaseTreeNode)
        locks = node.locks
        if locks is None:
            node.locks = locks = PinSet(Locked, node.id)
        lease = self.lock_ledger.acquire(Locked, owner=receipt, pins=(locks,))
        receipt.lock_seq = lease.id
        return lease

    def _receipt(self, node_id: int, params: DecLockRefParams, kind: str) -> LockReceipt:
        """The live receipt `params` is (or was derived from); typed errors for a foreign or spent one."""
        if type(params) is not LockReceipt or params.kind != kind:
            raise UnleasedReceiptError(node_id, params)
        lease = self.tree_locks.get(params.lock_seq)
        if lease is None:
            if params.lock_seq > self.lock_ledger.acquired:
                raise UnleasedReceiptError(node_id, params)
            raise LockReleasedTwiceError(node_id, params.lock_seq, kind)
        owner = lease.owner
        if owner is not params and (
            type(owner) is not LockReceipt or owner.node_id != params.node_id or owner.kind != kind
        ):
            raise UnleasedReceiptError(node_id, params)
        return owner

    def _partial_release(self, node_id: int, receipt: LockReceipt, params: DecLockRefParams) -> bool:
        """Record the parts a derived copy releases; whether the lease still stands for anything."""
        types = self.component_types
        parts = frozenset(ct for ct in types if ct not in params.skipped_lock_components)
        for ct in parts:
            if not receipt.holds(ct, types):
                raise LockReleasedTwiceError(node_id, receipt.lock_seq, f"{ct.name} part of lock")
        receipt.released_early = receipt.released_early | parts
        return any(receipt.holds(ct, types) for ct in types)

    def inc_lock_ref(
        self, node_id: int, skip_lock_components: Sequence[ComponentType] = ()
    ) -> LockReceipt:
        """SGLang's lock walk on a `LockReceipt`, then the one lease behind it."""
        skipped = tuple(skip_lock_components)
        return self._lock(node_id, LockReceipt(node_id=node_id, skipped_lock_components=skipped), False)

    def inc_host_lock_ref(self, node_id: int) -> LockReceipt:
        """SGLang's host lock walk on a `LockReceipt`, then the one lease behind it."""
        return self._lock(node_id, LockReceipt(node_id=node_id, kind="host lock"), True)

    def _lock(self, node_id: int, receipt: LockReceipt, host: bool) -> LockReceipt:
        """SGLang's `inc_lock_ref`/`inc_host_lock_ref` walk with the gate open, then the lease."""
        node = self.node_by_id(node_id)
        skipped = receipt.skipped_lock_components
        gate = self.counter_gate
        gate.open += 1
        try:
            for component in self.components:
                if component.component_type not in skipped:
                    component.acquire_component_lock(node=node, result=receipt, lock_host=host)
            self._update_evictable_leaf_sets(node)
            lease = self._lease_lock(receipt, node)
        finally:
            gate.open -= 1
        self.tree_locks[lease.id] = lease
        return receipt

    @takes_from("tree_locks")
    def dec_lock_ref(
        self, node_id: int, params: DecLockRefParams, skip_swa: bool = False
    ) -> DecLockRefResult:
        """Check the receipt, run SGLang's release walk, release the receipt's lease."""
        receipt = self._receipt(node_id, params, "lock")
        early = receipt.released_early
        if _SWA in self.components_by_type and node_id != self.root_node.id:
            if skip_swa and _SWA not in early and _SWA not in receipt.skipped_lock_components:
                raise WindowLockHeldError(node_id, receipt.lock_seq)
            if not skip_swa and _SWA in early and _SWA not in params.skipped_lock_components:
                raise LockReleasedTwiceError(node_id, receipt.lock_seq, "SWA part of lock")
        held = receipt is params or self._partial_release(node_id, receipt, params)
        gate = self.counter_gate
        gate.open += 1
        try:
            out = super().dec_lock_ref(node_id, params, skip_swa)
            if receipt is params or not held:
                self.tree_locks.pop(receipt.lock_seq).release()
        finally:
            gate.open -= 1
        return out

    @takes_from("tree_locks")
    def dec_host_lock_ref(self, node_id: int, params: DecLockRefParams) -> DecLockRefResult:
        """Check the host receipt, run SGLang's release walk, release its lease."""
        receipt = self._receipt(node_id, params, "host lock")
        if receipt is not params:
            raise UnleasedReceiptError(node_id, params)
        out = self._gated(lambda: super(LockLeaseCore, self).dec_host_lock_ref(node_id, params))
        self.tree_locks.pop(receipt.lock_seq).release()
        return out

    def dec_swa_lock_only(self, node_id: int, params: DecLockRefParams) -> DecSwaLockOnlyResult:
        """Give back the receipt's SWA part (and the lower-priority parts SGLang drops with it)."""
        receipt = self._receipt(node_id, params, "lock")
        swa = self.components_by_type.get(_SWA)
        if swa is None or node_id == self.root_node.id:
            return super().dec_swa_lock_only(node_id, params)
        if _SWA in receipt.released_early:
            raise LockReleasedTwiceError(node_id, receipt.lock_seq, "SWA part of lock")
        out = self._gated(lambda: super(LockLeaseCore, self).dec_swa_lock_only(node_id, params))
        priority = swa.eviction_priority(is_leaf=False)
        receipt.released_early = receipt.released_early | {_SWA} | {
            c.component_type for c in self.components if c.eviction_priority(is_leaf=False) < priority
        }
        return out

    def dec_window_lock_only(
        self, node_id: int, component_type: ComponentType, params: DecLockRefParams
    ) -> DecSwaLockOnlyResult:
        """Give back the receipt's part of one window component early."""
        receipt = self._receipt(node_id, params, "lock")
        if component_type in receipt.released_early:
            raise LockReleasedTwiceError(node_id, receipt.lock_seq, f"{component_type.name} part of lock")
        out = self._gated(
            lambda: super(LockLeaseCore, self).dec_window_lock_only(node_id, component_type, params)
        )
        if node_id != self.root_node.id and component_type not in receipt.skipped_lock_components:
            receipt.released_early = receipt.released_early | {component_type}
        return out

    def inc_full_pin(self, node_id: int) -> None:
        """SGLang's Full pin walk, backed by a lease (no receipt in SGLang's API: a stack per node)."""
        self._gated(lambda: super(LockLeaseCore, self).inc_full_pin(node_id))
        receipt = LockReceipt(node_id=node_id, kind="Full pin")
        lease = self._lease_lock(receipt, self.node_by_id(node_id))
        self.full_pins.setdefault(node_id, []).append(lease)

    @takes_from("full_pins")
    def dec_full_pin(self, node_id: int) -> None:
        """Release the node's newest Full pin lease after SGLang's walk; none left raises."""
        pins = self.full_pins.get(node_id)
        if not pins:
            raise LockReleasedTwiceError(node_id, 0, "Full pin")
        self._gated(lambda: super(LockLeaseCore, self).dec_full_pin(node_id))
        pins.pop().release()
        if not pins:
            del self.full_pins[node_id]

    def _gated(self, walk: Callable[[], _T]) -> _T:
        """Run one of SGLang's lock walks with the counter gate open."""
        gate = self.counter_gate
        gate.open += 1
        try:
            return walk()
        finally:
            gate.open -= 1

    def live_lock_receipts(self) -> list[LockReceipt]:
        """The receipt of every live lock lease (locks, host locks, Full pins)."""
        out: list[LockReceipt] = []
        for lease in self.tree_locks.values():
            assert isinstance(lease.owner, LockReceipt)
            out.append(lease.owner)
        for pins in self.full_pins.values():
            for pin in pins:
                assert isinstance(pin.owner, LockReceipt)
                out.append(pin.owner)
        return out

    def expected_lock_refs(self) -> dict[tuple[int, int, bool], int]:
        """(node id, component, host) -> the count the live lock leases stand for."""
        out: dict[tuple[int, int, bool], int] = {}
        root, types, write_back = self.root_node, self.component_types, self.is_write_back
        for receipt in self.live_lock_receipts():
            assert receipt.node_id is not None
            add_expected_refs(receipt, self.node_by_id(receipt.node_id), root, types, write_back, out)
        return out

    def lock_problems(self) -> list[str]:
        """Every counter that differs from the live lock leases, and a ledger/lock count mismatch."""
        problems: list[str] = []
        expected = self.expected_lock_refs()
        checked = [int(ct) for ct in (ComponentType.FULL, _SWA, ComponentType.MAMBA)
                   if ct in self.component_types]
        root = self.root_node
        for node in self._collect_all_nodes():
            base = 1 if node is root else 0
            for ct in checked:
                cd = node.component_data[ct]
                want = expected.get((node.id, ct, False), 0) + base
                if cd.lock_ref != want:
                    problems.append(
                        f"node {node.id} component {ct}: lock_ref {cd.lock_ref}, live lock leases say {want}"
                    )
                want = expected.get((node.id, ct, True), 0)
                if cd.host_lock_ref != want:
                    problems.append(
                        f"node {node.id} component {ct}: host_lock_ref {cd.host_lock_ref}, "
                        f"live lock leases say {want}"
                    )
        held = len(self.tree_locks) + sum(len(pins) for pins in self.full_pins.values())
        if self.lock_ledger.live_count != held:
            problems.append(f"lock ledger has {self.lock_ledger.live_count} live leases, locks hold {held}")
        return problems
