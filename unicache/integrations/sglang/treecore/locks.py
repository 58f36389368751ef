"""Device and host locks and Full pins: each a lease, released through the receipt SGLang holds."""

from __future__ import annotations

from collections.abc import Sequence

from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, DecLockRefResult, IncLockRefResult
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import DecSwaLockOnlyResult, NodeId
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import (
    ForeignReceiptError,
    FullPinMissingError,
    MisdirectedReceiptError,
    SpentReceiptError,
)
from unicache.integrations.sglang.treecore.receipts import DEVICE_LOCK, FULL_PIN, HOST_LOCK, FullHost, TreeReceipt
from unicache.integrations.sglang.treecore.state import FULL, TreeState

SWA = ComponentType.SWA


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class Locks(TreeState):
    """The locks part of `UnicacheTreeCore` (see the module docstring)."""

    def inc_lock_ref(
        self, node_id: NodeId, skip_lock_components: Sequence[ComponentType] = ()
    ) -> IncLockRefResult:
        node = self.node(node_id)
        skipped = tuple(skip_lock_components)
        receipt = TreeReceipt(node_id=node.id, skipped_lock_components=skipped, lease_id=self.ledger.acquired + 1,
                              kind=DEVICE_LOCK, issuer=id(self), epoch=self.ledger.epoch, acquire_skipped=skipped)
        path = [] if FULL in skipped else self._path(node)
        lease, delta = self._pin_device(path, receipt)
        receipt.lease_id = lease.id
        receipt.delta = delta
        self.device_locks[lease.id] = lease
        for part in self.aux:
            if part.component_type not in skipped:
                part.lock(node, receipt, receipt.lease_id)
        return receipt

    def _receipt(self, node_id: NodeId, params: DecLockRefParams, kind: str) -> TreeReceipt:
        """The receipt `params` is, checked against this core, `kind` and `node_id`; raises before any change."""
        if not isinstance(params, TreeReceipt):
            raise ForeignReceiptError(node_id, kind, "FULL",
                                      f"receipt {params!r} was not issued by this core (no lease behind it)")
        if params.issuer != id(self):
            raise ForeignReceiptError(node_id, str(params), "FULL", "the receipt was issued by another tree core")
        if params.kind != kind:
            raise MisdirectedReceiptError(node_id, str(params), "FULL", f"released as a {kind}")
        if params.node_id != node_id:
            raise MisdirectedReceiptError(node_id, str(params), "FULL",
                                          f"the receipt is anchored on node {params.node_id}")
        locks = self.host_locks if kind == HOST_LOCK else self.device_locks
        key = params.lease_id
        if key not in locks and not any(part.holds_host_lock(key) if kind == HOST_LOCK else part.holds_lock(key)
                                        for part in self.aux):
            why = ("its lease was revoked by a reset" if params.epoch != self.ledger.epoch
                   else "its lease was already released (one receipt, one release)")
            raise SpentReceiptError(node_id, str(params), "FULL", why)
        return params

    def dec_lock_ref(  # lease: takes-from device_locks
        self, node_id: NodeId, params: DecLockRefParams, skip_swa: bool = False
    ) -> DecLockRefResult:
        """Release the leases of the receipt's components `params` does not skip.

        SGLang's lazy Mamba release hands a copy of the receipt skipping all
        but MAMBA, then the receipt itself skipping MAMBA: each releases its
        part. A Full lease the acquire left without pins goes with the last part.
        """
        receipt = self._receipt(node_id, params, DEVICE_LOCK)
        key = receipt.lease_id
        skipped = receipt.skipped_lock_components
        if skip_swa and self.swa is not None and SWA not in skipped and self.swa.holds_lock(key):
            raise MisdirectedReceiptError(node_id, str(receipt), "SWA",
                                          "released with skip_swa while its SWA lease is held "
                                          "(dec_swa_lock_only releases it first)")
        parts = [part for part in self.aux if part.component_type not in skipped and part.holds_lock(key)]
        remaining = any(part.holds_lock(key) for part in self.aux if part not in parts)
        full = key in self.device_locks and (
            FULL not in skipped or (FULL in receipt.acquire_skipped and not remaining))
        if not full and not parts:
            raise SpentReceiptError(node_id, str(receipt), "+".join(c.name for c in skipped) or "FULL",
                                    "its leases for these components were already released")
        for part in parts:
            part.unlock(key)
        if full:
            self._unpin_device(self.device_locks.pop(key))
        return DecLockRefResult()

    def dec_swa_lock_only(self, node_id: NodeId, params: DecLockRefParams) -> DecSwaLockOnlyResult:
        """SGLang's early SWA release: the receipt's SWA lease goes (its Full lease stays, released later with
        ``skip_swa``); a drained node that is an evictable device leaf loses its SWA into the result. Without
        an SWA part (or with a receipt skipping SWA) the receipt is checked and nothing released."""
        receipt = self._receipt(node_id, params, DEVICE_LOCK)
        result = DecSwaLockOnlyResult()
        swa = self.swa
        if swa is None or SWA in receipt.skipped_lock_components:
            return result
        if not swa.holds_lock(receipt.lease_id):
            raise SpentReceiptError(node_id, str(receipt), "SWA", "its SWA lease was already released")
        swa.unlock_window(receipt.lease_id, result)
        return result

    def inc_host_lock_ref(self, node_id: NodeId) -> IncLockRefResult:
        node = self.node(node_id)
        receipt = TreeReceipt(node_id=node.id, lease_id=self.ledger.acquired + 1, kind=HOST_LOCK,
                              issuer=id(self), epoch=self.ledger.epoch)
        locked = node is not self.root and (self.store.host_col[node.slot] is not None or self.is_write_back)
        pins = (self.handed.host_pin_set(node),) if locked else ()
        lease = self.ledger.acquire(FullHost, owner=receipt, pins=pins)
        receipt.lease_id = lease.id
        if locked:
            receipt.set_lock_uuid(FULL, lease.id, lock_host=True)
        self.host_locks[lease.id] = lease
        for part in self.aux:
            part.host_lock(node, receipt, receipt.lease_id)
        return receipt

    def dec_host_lock_ref(  # lease: takes-from host_locks
        self, node_id: NodeId, params: DecLockRefParams
    ) -> DecLockRefResult:
        receipt = self._receipt(node_id, params, HOST_LOCK)
        for part in self.aux:
            part.host_unlock(receipt.lease_id)
        self._unpin_host(self.host_locks.pop(receipt.lease_id))
        if self.record.attempt is not None:
            pinning = [*self.device_locks, *(lease.id for pins in self.full_pins.values() for lease in pins)]
            self.record.given_up(node_id, self._protected, self._total, sorted(pinning))
        return DecLockRefResult()

    def inc_full_pin(self, node_id: NodeId) -> None:
        node = self.node(node_id)
        owner = TreeReceipt(node_id=node.id, lease_id=self.ledger.acquired + 1, kind=FULL_PIN, issuer=id(self),
                            epoch=self.ledger.epoch)
        lease, _ = self._pin_device(self._path(node), owner)
        owner.lease_id = lease.id
        self.full_pins.setdefault(node.id, []).append(lease)

    def dec_full_pin(self, node_id: NodeId) -> None:  # lease: takes-from full_pins
        self.node(node_id)
        pins = self.full_pins.get(node_id)
        if not pins:
            raise FullPinMissingError(node_id)
        self._unpin_device(pins.pop())
        if not pins:
            del self.full_pins[node_id]
