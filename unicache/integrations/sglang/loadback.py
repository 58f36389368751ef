"""`LoadBack`: the linear record of one in-flight H->D load-back and its leases.

One lease per component the load-back reads from host (Full chain, SWA
window, Mamba state), pinning every node whose host slots it reads.
"""

from __future__ import annotations

from typing import Final, Optional

from leases import Borrowed, Held, Lease, consumes, linear
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

from unicache.markers import SWA, Full, Mamba

MARKERS: Final[dict[ComponentType, type[object]]] = {
    ComponentType.FULL: Full, ComponentType.SWA: SWA, ComponentType.MAMBA: Mamba,
}
"""The lease component marker of each SGLang component a load-back pins."""


@linear
class LoadBack:
    """One load-back, identified by `seq`, anchored at SGLang node `anchor`.

    Several may be in flight on one node and on one anchor; acks consume them
    in commit order per anchor. `leases` holds one lease per component read
    from host, keyed by the component; `release` gives back every one once.
    """

    __slots__ = ("seq", "anchor", "generation", "leases", "_lease_consumed_by")

    def __init__(self, seq: int, anchor: int, generation: int) -> None:
        self.seq = seq
        self.anchor = anchor
        self.generation = generation
        self.leases: dict[ComponentType, Lease[object, Held]] = {}

    def __str__(self) -> str:
        return f"load-back #{self.seq} anchor {self.anchor}"

    def __repr__(self) -> str:
        return f"<LoadBack #{self.seq} anchor={self.anchor} gen={self.generation} leases={self.lease_ids()}>"

    def lease(self, ct: ComponentType) -> Optional[Borrowed[Lease[object, Held]]]:
        """The lease of component `ct`, if this load-back holds one."""
        return self.leases.get(ct)

    def lease_ids(self) -> dict[str, int]:
        """Component name -> lease id, for reports and errors."""
        return {MARKERS[ct].__name__: lease.id for ct, lease in self.leases.items()}

    def held_leases(self) -> int:
        return sum(1 for lease in self.leases.values() if lease.held)

    @consumes
    def release(self) -> None:
        """Release every lease still held, each exactly once (a revoked one settles stale)."""
        leases = self.leases
        while leases:
            _, lease = leases.popitem()
            lease.release()
