"""`LoadBack`: the linear record of one in-flight H->D load-back and its leases.

One lease per component the load-back reads from host (Full chain, SWA
window, Mamba state), pinning every node whose host slots it reads.
"""

from __future__ import annotations


from leases import Held, Lease, consumes, linear

from unicache.components.markers import SWA, Full, Mamba


@linear
class LoadBack:
    """One load-back, identified by `seq`, anchored at SGLang node `anchor`.

    Several may be in flight on one node and on one anchor; acks consume them
    in commit order per anchor. `release` gives back every lease once.
    """

    __slots__ = ("seq", "anchor", "generation", "full", "swa", "mamba", "_lease_consumed_by")

    def __init__(self, seq: int, anchor: int, generation: int) -> None:
        self.seq = seq
        self.anchor = anchor
        self.generation = generation
        self.full: Lease[Full, Held] | None = None
        self.swa: Lease[SWA, Held] | None = None
        self.mamba: Lease[Mamba, Held] | None = None

    def __str__(self) -> str:
        return f"load-back #{self.seq} anchor {self.anchor}"

    def __repr__(self) -> str:
        return f"<LoadBack #{self.seq} anchor={self.anchor} gen={self.generation} leases={self.lease_ids()}>"

    def lease_ids(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.full is not None:
            out["Full"] = self.full.id
        if self.swa is not None:
            out["SWA"] = self.swa.id
        if self.mamba is not None:
            out["Mamba"] = self.mamba.id
        return out

    def held_leases(self) -> int:
        return sum(1 for x in (self.full, self.swa, self.mamba) if x is not None and x.held)

    @consumes
    def release(self) -> None:
        """Release every lease still held, each exactly once (a revoked one settles stale)."""
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


