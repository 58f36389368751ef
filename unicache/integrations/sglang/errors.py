"""Typed errors of the SGLang lease tree core; each names the ids involved."""

from __future__ import annotations


class LeaseCoreError(RuntimeError):
    """Base class for misuse detected by the lease tree core."""


class PinFieldWriteError(LeaseCoreError):
    """Someone cleared `load_back_pending_id` on a node whose Full host slots are leased."""

    def __init__(self, node_id: int, lease_ids: list[int]) -> None:
        super().__init__(
            f"node {node_id}: load_back_pending_id is a view of load-back leases "
            f"{lease_ids}; release the leases through finish_load_back instead of "
            f"clearing the field"
        )
        self.node_id = node_id
        self.lease_ids = lease_ids


class UnknownLoadBackError(LeaseCoreError):
    """An ack arrived for an anchor with no load-back in flight in the current epoch."""

    def __init__(self, anchor_id: int, epoch: int, live_anchors: list[int]) -> None:
        super().__init__(
            f"finish_load_back: anchor {anchor_id} has no load-back in flight in "
            f"epoch {epoch} (anchors in flight: {live_anchors})"
        )
        self.anchor_id = anchor_id
        self.epoch = epoch


class SplitPinMismatchError(LeaseCoreError):
    """A split fragment's inherited pin does not match the leases it was given."""

    def __init__(self, node_id: int, child_id: int, declared: int | None, view: int | None) -> None:
        super().__init__(
            f"split: new node {node_id} (from child {child_id}) inherited "
            f"load_back_pending_id={declared}, but its leases say {view}"
        )


class LeaseSanityError(AssertionError):
    """`sanity_check` found pins that disagree with the live load-back leases."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            f"lease core sanity check failed ({len(problems)} problems):\n  "
            + "\n  ".join(problems)
        )
        self.problems = problems


class MambaSlotUnavailable(LeaseCoreError):
    """No Mamba slot could be had even after eviction (SGLang #36770's assertion)."""

    def __init__(self, needed: int, available: int) -> None:
        super().__init__(
            f"no Mamba slot after evict_for_alloc(mamba_num={needed}): "
            f"{available} available; every cached state is pinned"
        )
        self.needed = needed
        self.available = available


class LockReceiptError(LeaseCoreError):
    """Misuse of one lock receipt; names the node and the lock (`lock_seq`, its lease id)."""

    def __init__(self, node_id: int, lock_seq: int, message: str) -> None:
        self.node_id = node_id
        self.lock_seq = lock_seq
        super().__init__(message)


class LockReleasedTwiceError(LockReceiptError):
    """A lock receipt was released after its lease (or that part of it) was already released."""

    def __init__(self, node_id: int, lock_seq: int, what: str) -> None:
        super().__init__(
            node_id, lock_seq,
            f"{what} #{lock_seq} on node {node_id} released twice: "
            "its lease was already given back (one receipt, one release)",
        )


class UnleasedReceiptError(LeaseCoreError):
    """A release receipt that no lease of this core stands behind."""

    def __init__(self, node_id: int, receipt: object) -> None:
        self.node_id = node_id
        super().__init__(
            f"release on node {node_id} with receipt {receipt!r}: not issued by this core's "
            "inc_lock_ref/inc_host_lock_ref (no lease stands behind it)"
        )


class WindowLockHeldError(LockReceiptError):
    """`dec_lock_ref(skip_swa=True)` on a receipt whose SWA part was never given back early."""

    def __init__(self, node_id: int, lock_seq: int) -> None:
        super().__init__(
            node_id, lock_seq,
            f"lock #{lock_seq} on node {node_id}: dec_lock_ref(skip_swa=True) but its SWA part "
            "is still held (release it with dec_swa_lock_only first, or pass skip_swa=False)",
        )


class LockCounterWriteError(LeaseCoreError):
    """A lock counter was written outside the lease core's lock acquires and releases."""

    def __init__(
        self, node_id: int | None, component: int | None, field: str, old: object, new: object
    ) -> None:
        self.node_id = node_id
        self.component = component
        super().__init__(
            f"node {node_id} component {component}: {field} {old} -> {new} written outside a lock "
            "lease acquire/release; the counters are a view of the live lock leases "
            "(take a lock with inc_lock_ref/inc_host_lock_ref and release its receipt)"
        )
