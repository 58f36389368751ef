"""Tree locks as leases: SGLang's lock receipts carry the id of a `TreeLock`.

`inc_lock_ref`/`inc_host_lock_ref`/`inc_full_pin` take one lease per
component they lock, pinning the anchor's lock pin set of that component and
tier. SGLang's integer `lock_ref`/`host_lock_ref` stay the derived per-node
view its eviction walks read (updated by SGLang's own walks in the same
frame, so the fast paths are unchanged); `LeaseTreeCore.sanity_check`
recomputes every counter from the live leases (`expected_lock_refs`).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from leases import Borrowed, Held, Lease, consumes, linear
from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, IncLockRefResult
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode

from unicache.components.markers import SWA, Full, Mamba


@dataclasses.dataclass
class LeasedDecLockRefParams(DecLockRefParams):
    """SGLang's release receipt, naming the `TreeLock` it releases."""

    lock_seq: int = 0


@dataclasses.dataclass
class LeasedIncLockRefResult(IncLockRefResult):
    """SGLang's acquire receipt, naming the `TreeLock` behind it."""

    lock_seq: int = 0

    def to_dec_params(self) -> LeasedDecLockRefParams:
        return LeasedDecLockRefParams(
            node_id=self.node_id,
            skipped_lock_components=tuple(self.skipped_lock_components),
            component_lock_uuids=dict(self.component_lock_uuids),
            component_host_lock_uuids=dict(self.component_host_lock_uuids),
            lock_seq=self.lock_seq,
        )


@linear
class TreeLock:
    """One device or host lock on `anchor`: a lease per component it locked.

    `dec_swa_lock_only` releases the SWA and Mamba leases early
    (`release_component`); `release` gives back whatever is still held, once.
    """

    __slots__ = (
        "seq", "anchor", "host", "full_pin", "uuids", "full", "swa", "mamba", "_lease_consumed_by",
    )

    def __init__(
        self, seq: int, anchor: int, host: bool, full_pin: bool, uuids: dict[ComponentType, Optional[int]]
    ) -> None:
        self.seq = seq
        self.anchor = anchor
        self.host = host
        self.full_pin = full_pin
        self.uuids = uuids
        self.full: Lease[Full, Held] | None = None
        self.swa: Lease[SWA, Held] | None = None
        self.mamba: Lease[Mamba, Held] | None = None

    def __str__(self) -> str:
        kind = "full pin" if self.full_pin else "host lock" if self.host else "lock"
        return f"{kind} #{self.seq} on node {self.anchor}"

    def lease_ids(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.full is not None:
            out["Full"] = self.full.id
        if self.swa is not None:
            out["SWA"] = self.swa.id
        if self.mamba is not None:
            out["Mamba"] = self.mamba.id
        return out

    def release_component(self, ct: ComponentType) -> bool:
        """Release the lease of one component if held; whether one was."""
        if ct == ComponentType.FULL:
            full = self.full
            if full is None:
                return False
            self.full = None
            full.release()
        elif ct == ComponentType.SWA:
            swa = self.swa
            if swa is None:
                return False
            self.swa = None
            swa.release()
        elif ct == ComponentType.MAMBA:
            mamba = self.mamba
            if mamba is None:
                return False
            self.mamba = None
            mamba.release()
        else:
            return False
        return True

    @consumes
    def release(self) -> None:
        """Release every lease still held, each exactly once."""
        full = self.full
        if full is not None:
            self.full = None
            full.release()
        swa = self.swa
        if swa is not None:
            self.swa = None
            swa.release()
        mamba = self.mamba
        if mamba is not None:
            self.mamba = None
            mamba.release()


def _segment_end(node_uuid: Optional[int], boundary: Optional[int]) -> bool:
    return bool(boundary) and node_uuid == boundary


def add_expected_refs(
    lock: Borrowed[TreeLock],
    anchor: UnifiedTreeNode,
    root: UnifiedTreeNode,
    write_back: bool,
    out: dict[tuple[int, int, bool], int],
) -> None:
    """Add the per-node counts `lock` stands for to `out[(node id, component, host)]`.

    Mirrors SGLang 0.5.23's release walks: Full device from the anchor to the
    root; Full host and SWA from the anchor up to the receipt's boundary uuid
    (the root when it has none); Mamba on the anchor alone.
    """
    host = lock.host
    uuid_key = "host_uuid" if host else "uuid"
    if lock.full is not None:
        ct = int(ComponentType.FULL)
        boundary = lock.uuids.get(ComponentType.FULL)
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
    if lock.swa is not None:
        ct = int(ComponentType.SWA)
        boundary = lock.uuids.get(ComponentType.SWA)
        cur = anchor
        while cur is not None and cur is not root:
            key = (cur.id, ct, host)
            out[key] = out.get(key, 0) + 1
            if _segment_end(cur.component_data[ct].metadata.get(uuid_key), boundary):
                break
            cur = cur.parent
    if lock.mamba is not None and anchor is not root:
        key = (anchor.id, int(ComponentType.MAMBA), host)
        out[key] = out.get(key, 0) + 1
