"""The flight recorder's event kinds and records."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol


class EventKind(enum.Enum):
    """What happened. The lease runtime emits the first five; engines record the rest."""

    ACQUIRE = "acquire"
    RELEASE = "release"
    REVOKE = "revoke"
    STALE = "stale"
    LEAK = "leak"
    PIN = "pin"
    UNPIN = "unpin"
    EPOCH = "epoch"
    ACK = "ack"
    STALE_ACK = "stale-ack"
    DUPLICATE_ACK = "duplicate-ack"
    FAILED_TRANSFER = "failed-transfer"
    EVICT_BLOCKED = "evict-blocked"
    RECLAIM_BLOCKED = "reclaim-blocked"
    NOTE = "note"


class TicketBearer(Protocol):
    """An owner whose leases belong to a ticket: its lease events carry `ticket_id`."""

    @property
    def ticket_id(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class LeaseEvent:
    """One entry of a ledger's bounded event ring.

    `seq` is monotonic per ledger and never reused; `step` is whatever the engine
    last stored in `LeaseLedger.step`. `nodes` are the holders of the pin sets the
    event touched (for a lease event) or the nodes an engine event names.
    `generation` is the lease's, or what the engine passed (an ack's own
    generation), else the epoch at record time. `ticket` of a lease event is
    its owner's `ticket_id` when the owner has an int one (see `TicketBearer`).
    """

    seq: int
    step: int
    kind: EventKind
    lease_id: int | None
    component: str | None
    owner: str | None
    generation: int
    nodes: tuple[object, ...]
    ticket: int | None
    detail: str

    def to_json(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "step": self.step,
            "kind": self.kind.value,
            "lease": self.lease_id,
            "component": self.component,
            "owner": self.owner,
            "generation": self.generation,
            "nodes": [n if isinstance(n, (int, str)) else str(n) for n in self.nodes],
            "ticket": self.ticket,
            "detail": self.detail,
        }
