"""Tree locks as leases: one lease per SGLang lock receipt, owned by the core.

`inc_lock_ref`/`inc_host_lock_ref`/`inc_full_pin` return a `LockReceipt`,
SGLang's acquire receipt and release params in one object (its
`to_dec_params()` is itself, so a lock allocates the receipt and its lease,
nothing else). Behind it the core holds one `Lease[Locked]` covering every
component the receipt locked, pinning the anchor's lock pin set; the receipt
is the lease's owner and records what it locked (SGLang's skipped components
and boundary uuids) and what it gave back early (`released_early`). SGLang's
integer `lock_ref`/`host_lock_ref` are the view its eviction walks read,
written only inside these acquires and releases (see `counters`);
`LeaseTreeCore.sanity_check` recomputes every counter from the live leases
(`add_expected_refs`).
"""

from __future__ import annotations

import dataclasses
from typing import Final, Optional, final

from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, IncLockRefResult
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode

_FULL: Final = ComponentType.FULL
_SWA: Final = ComponentType.SWA
_MAMBA: Final = ComponentType.MAMBA


@final
class Locked:
    """Lease component of tree locks: one lease stands for every component a receipt locked."""


@dataclasses.dataclass(eq=False)
class LockReceipt(IncLockRefResult, DecLockRefParams):
    """SGLang's lock receipt (acquire result and release params at once), naming its lease.

    `lock_seq` is the id of the lease behind it; `kind` is ``"lock"``,
    ``"host lock"`` or ``"Full pin"``; `released_early` lists the components
    whose part `dec_swa_lock_only`/`dec_window_lock_only` gave back.
    """

    lock_seq: int = 0
    kind: str = "lock"
    released_early: frozenset[ComponentType] = frozenset()

    def __str__(self) -> str:
        return f"{self.kind} #{self.lock_seq} on node {self.node_id}"

    def to_dec_params(self) -> LockReceipt:
        """The receipt itself: it carries everything SGLang's release reads, and the lease id."""
        return self

    @property
    def host(self) -> bool:
        return self.kind == "host lock"

    def holds(self, ct: ComponentType, tree_components: tuple[ComponentType, ...]) -> bool:
        """Whether the live lease still stands for component `ct`'s part of this lock."""
        if ct not in tree_components or ct in self.skipped_lock_components or ct in self.released_early:
            return False
        if self.kind == "Full pin":
            return ct == _FULL
        if ct == _FULL and self.kind == "host lock":
            return _FULL in self.component_host_lock_uuids
        return True


def _segment_end(node_uuid: Optional[int], boundary: Optional[int]) -> bool:
    return bool(boundary) and node_uuid == boundary


def add_expected_refs(
    receipt: LockReceipt,
    anchor: UnifiedTreeNode,
    root: UnifiedTreeNode,
    tree_components: tuple[ComponentType, ...],
    write_back: bool,
    out: dict[tuple[int, int, bool], int],
) -> None:
    """Add the per-node counts `receipt`'s live lease stands for to `out[(node id, component, host)]`.

    Mirrors SGLang 0.5.23's release walks: Full device from the anchor to the
    root; Full host and SWA from the anchor up to the receipt's boundary uuid
    (the root when it has none); Mamba on the anchor alone.
    """
    host = receipt.host
    uuid_key = "host_uuid" if host else "uuid"
    uuids = receipt.component_host_lock_uuids if host else receipt.component_lock_uuids
    if receipt.holds(_FULL, tree_components):
        ct = int(_FULL)
        boundary = uuids.get(_FULL)
        cur: Optional[UnifiedTreeNode] = anchor
        while cur is not None and cur is not root:
            cd = cur.component_data[ct]
            if host and cd.host_value is None and not write_back:
                break
            key = (cur.id, ct, host)
            out[key] = out.get(key, 0) + 1
            if host and cd.metadata.get(uuid_key) == boundary:
                break
            cur = cur.parent
    if receipt.holds(_SWA, tree_components):
        ct = int(_SWA)
        boundary = uuids.get(_SWA)
        cur = anchor
        while cur is not None and cur is not root:
            key = (cur.id, ct, host)
            out[key] = out.get(key, 0) + 1
            if _segment_end(cur.component_data[ct].metadata.get(uuid_key), boundary):
                break
            cur = cur.parent
    if receipt.holds(_MAMBA, tree_components) and anchor is not root:
        key = (anchor.id, int(_MAMBA), host)
        out[key] = out.get(key, 0) + 1
