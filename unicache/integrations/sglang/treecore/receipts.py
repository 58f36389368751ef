"""The lock receipt SGLang holds, and the owners of the core's other leases.

Every pin of tree core ``"unicache"`` is a lease of its ledger, in a pin set
of the node it covers: `Full` pin sets for the device tier (the Full store's
own), `FullHost` pin sets for the host tier (the store's engine-owned
outbox keeps them); with Mamba, `Mamba` and `MambaHost` pin sets of the
Mamba store likewise. Each lease's owner says who holds it (one owner may
hold a lease per component: a lock's receipt, a load-back's pin):

* `TreeReceipt`: a device lock (`inc_lock_ref`), a host lock
  (`inc_host_lock_ref`) or a Full pin (`inc_full_pin`). For the first two it
  is the object SGLang holds: its `IncLockRefResult` and, through
  `to_dec_params()` (itself), the `DecLockRefParams` it hands back to
  release; it names its lease (`lease_id`), its kind, its epoch and the core
  that issued it, so a spent, foreign or forged receipt is told apart before
  anything changes.
* `WriteThroughMark`: one in-flight write-through (or write-back) backup,
  by SGLang's ack id (`mark_write_through_pending` .. `finish_write_through`).
* `LoadBackPin`: one in-flight load-back reading host copies, by anchor and
  sequence (`commit_load_back` .. `finish_load_back`, FIFO per anchor).

Each owner has a `kind` (the metrics' ``owner_kind`` label: ``device lock``,
``host lock``, ``Full pin``, ``write-through``, ``load-back``), and its
`str()` is fixed when its lease is acquired (a receipt's lease id is known
before: the ledger issues ids in order), so the flight recorder and a dump
name it alike.
"""

from __future__ import annotations

import dataclasses
from typing import final

from sglang.srt.mem_cache.base_prefix_cache import DecLockRefParams, IncLockRefResult
from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

DEVICE_LOCK = "device lock"
HOST_LOCK = "host lock"
FULL_PIN = "Full pin"


@final
class FullHost:
    """Lease component of host-tier pins (host locks, write-through marks, load-back pins)."""


@final
class MambaHost:
    """Lease component of Mamba host-tier pins (host locks and load-backs reading a host state)."""


@final
class SWAHost:
    """Lease component of SWA host-tier pins (host locks over a window, load-backs reading host SWA values)."""


@dataclasses.dataclass(eq=False)
class TreeReceipt(IncLockRefResult, DecLockRefParams):
    """SGLang's lock receipt (acquire result and release params at once), the owner of one lease.

    `issuer` is the id of the core that issued it; `epoch` the ledger epoch
    it was issued in (a reset revokes it).
    """

    lease_id: int = 0
    kind: str = DEVICE_LOCK
    issuer: int = 0
    epoch: int = 0
    acquire_skipped: tuple[ComponentType, ...] = ()
    """The components the acquire skipped (`skipped_lock_components` may grow after: SGLang's lazy release)."""

    def __str__(self) -> str:
        return f"{self.kind} #{self.lease_id}"

    def to_dec_params(self) -> TreeReceipt:
        """The receipt itself: it carries everything the release reads, and its lease id."""
        return self


@final
class WriteThroughMark:
    """Owner of the lease marking the nodes of one in-flight backup, by SGLang's ack id."""

    __slots__ = ("ack_id",)
    kind = "write-through"

    def __init__(self, ack_id: int) -> None:
        self.ack_id = ack_id

    def __str__(self) -> str:
        return f"write-through ack {self.ack_id}"


@final
class LoadBackPin:
    """Owner of the lease pinning the host copies one in-flight load-back reads (anchor, sequence)."""

    __slots__ = ("anchor", "seq")
    kind = "load-back"

    def __init__(self, anchor: int, seq: int) -> None:
        self.anchor = anchor
        self.seq = seq

    def __str__(self) -> str:
        return f"load-back #{self.seq} anchor {self.anchor}"
