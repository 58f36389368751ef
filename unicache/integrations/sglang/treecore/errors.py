"""Typed errors of tree core ``"unicache"``; each names the node, the lock (lease) and the component.

Every instance built is counted by class (`leases.errors.raised_counts`, the
``unicache_errors`` metric), as unicache's and the lease runtime's errors are.
"""

from __future__ import annotations

from typing import Any

from leases.errors import count_raised


class TreeCoreError(RuntimeError):
    """Misuse of tree core ``"unicache"`` detected before anything changed."""

    def __new__(cls, *args: Any, **kwargs: Any) -> TreeCoreError:
        count_raised(cls)
        return super().__new__(cls, *args)


class UnknownNodeError(TreeCoreError, KeyError):
    """A NodeId that names no live node of this core (never minted, or removed)."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        super().__init__(f"node {node_id} is not a live node of this tree core")

    def __str__(self) -> str:
        return str(self.args[0])


class ReceiptError(TreeCoreError):
    """A lock receipt that cannot release what it names (spent, foreign, forged, misdirected)."""

    def __init__(self, node_id: int, lock: str, component: str, why: str) -> None:
        self.node_id = node_id
        self.lock = lock
        self.component = component
        super().__init__(f"{component} {lock} on node {node_id}: {why}")


class SpentReceiptError(ReceiptError):
    """The receipt's lease was already released (a second release) or revoked by a reset."""


class ForeignReceiptError(ReceiptError):
    """A receipt issued by another tree core, or a plain SGLang receipt no lease of this core stands behind."""


class MisdirectedReceiptError(ReceiptError):
    """A receipt released on another node than its anchor, or through the wrong release (device vs host)."""


class FullPinMissingError(TreeCoreError):
    """`dec_full_pin` on a node with no Full pin of its own."""

    def __init__(self, node_id: int) -> None:
        self.node_id = node_id
        super().__init__(f"FULL dec_full_pin on node {node_id}: the node holds no Full pin lease")


class PendingMarkError(TreeCoreError):
    """A write-through pending mark that conflicts with another ack's mark on the node."""

    def __init__(self, node_id: int, ack_id: int, held_by: int) -> None:
        self.node_id = node_id
        super().__init__(
            f"FULL write-through mark of ack {ack_id} on node {node_id}: the node is pending under "
            f"ack {held_by} (lease of that ack still held)"
        )


class UnknownLoadBackError(TreeCoreError):
    """`finish_load_back` for an anchor with no load-back pin lease in flight."""

    def __init__(self, anchor_id: int, epoch: int) -> None:
        self.anchor_id = anchor_id
        super().__init__(
            f"FULL finish_load_back: anchor {anchor_id} has no load-back in flight in epoch {epoch}"
        )


class NodeStateError(TreeCoreError):
    """An operation on a node whose residency does not allow it (a demote of an unbacked node, say)."""

    def __init__(self, op: str, node_id: int, why: str) -> None:
        self.node_id = node_id
        super().__init__(f"FULL {op} on node {node_id}: {why}")


class NamespacedKeyError(TreeCoreError, ValueError):
    """A key with an `extra_key`/`cache_salt` namespace or bigram view, which this core does not cover."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"tree core 'unicache' does not cover keys with {what} yet; use tree core 'leases'"
        )


class RefusedFeatureError(TreeCoreError, ValueError):
    """A feature switched on after construction that this core does not cover (storage, buffer mode, ...)."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"tree core 'unicache' does not cover {what} yet; use tree core 'leases' "
            "(SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=leases)"
        )


class TreeCoreSanityError(AssertionError):
    """`sanity_check` found the tree, the values or the leases out of line; lists every problem."""

    def __new__(cls, *args: Any, **kwargs: Any) -> TreeCoreSanityError:
        count_raised(cls)
        return super().__new__(cls, *args)

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__(
            f"tree core 'unicache' sanity check failed ({len(problems)} problems):\n  "
            + "\n  ".join(problems)
        )
