"""Read-only, JSON-friendly snapshots of a cache for crash dumps and the REPL."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar

from leases import Borrowed, PinSet

from unicache.results import TicketStatus
from unicache.tickets import BackupTicket, LoadBack, Ticket
from unicache.ticket_table import QuarantineRecord
from unicache.tree.node import Node
from unicache.view import CacheView


C = TypeVar("C")


def _ids(p: PinSet[C, Node] | None) -> list[int]:
    return p.ids() if p is not None else []


@dataclass(slots=True)
class ComponentState:
    """One component of one node: slots per tier and the ids of the leases pinning it."""

    device: list[int] | int | None
    host: list[int] | int | None
    pins: list[int]

    def to_json(self) -> dict[str, object]:
        return {"device": self.device, "host": self.host, "pins": self.pins}


@dataclass(slots=True)
class NodeInfo:
    id: int
    parent_id: int | None
    start: int
    end: int
    key: tuple[int, ...]
    children: list[int]
    last_access: int
    hits: int
    components: dict[str, ComponentState] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "parent": self.parent_id,
            "start": self.start,
            "end": self.end,
            "key": list(self.key),
            "children": self.children,
            "last_access": self.last_access,
            "hits": self.hits,
            "components": {k: v.to_json() for k, v in self.components.items()},
        }


@dataclass(slots=True)
class TicketInfo:
    id: int
    generation: int
    kind: str
    node_id: int
    status: str
    owner: str
    leases: dict[str, int]
    copies: list[dict[str, object]]
    abandoned: bool

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "generation": self.generation,
            "kind": self.kind,
            "node": self.node_id,
            "status": self.status,
            "owner": self.owner,
            "leases": self.leases,
            "copies": self.copies,
            "abandoned": self.abandoned,
        }


@dataclass(slots=True)
class QuarantineInfo:
    ticket_id: int
    generation: int
    kind: str
    slots: dict[str, list[int]]
    timed_out: bool = False
    """True: the ticket timed out (`UniCache.time_out`) and its slots wait for its late ack, which
    may never come; False: a reset quarantined it until its stale ack."""

    def to_json(self) -> dict[str, object]:
        return {
            "ticket": self.ticket_id,
            "generation": self.generation,
            "kind": self.kind,
            "slots": self.slots,
            "timed_out": self.timed_out,
        }


def node_info(cache: CacheView, node: Node) -> NodeInfo:
    info = NodeInfo(
        node.id,
        node.parent.id if node.parent is not None else None,
        node.start,
        node.end,
        node.key,
        [c.id for c in node.children.values()],
        node.last_access,
        node.hits,
    )
    comps = cache.components
    for st in comps.configured:
        if st is comps.mamba:
            mamba = comps.mamba
            info.components[st.name] = ComponentState(
                mamba.device_state(node), mamba.host_state(node), _ids(st.pins(node))
            )
        else:
            dev = st.device_slots(node)
            host = st.host_slots(node)
            info.components[st.name] = ComponentState(
                list(dev) if dev is not None else None,
                list(host) if host is not None else None,
                _ids(st.pins(node)),
            )
    return info


def ticket_info(t: Borrowed[Ticket]) -> TicketInfo:
    job = t.job
    return TicketInfo(
        t.id,
        t.generation,
        "load_back" if isinstance(t, LoadBack) else "backup",
        t.node.id,
        t.status.value,
        str(t.owner),
        t.lease_ids(),
        [op.to_json() for op in job.copies] if job is not None else [],
        t.abandoned if isinstance(t, LoadBack) else False,
    )


def quarantine_info(q: QuarantineRecord) -> QuarantineInfo:
    slots: dict[str, list[int]] = {}
    for op in q.copies:
        for tier, rows in ((op.src_tier, op.src), (op.dst_tier, op.dst)):
            slots.setdefault(f"{op.component.__name__.lower()}.{tier.value}", []).extend(rows)
    kind = "backup" if isinstance(q.ticket, BackupTicket) else "load_back"
    return QuarantineInfo(q.ticket.id, q.generation, kind, slots, q.ticket.status is TicketStatus.TIMED_OUT)


def dump_state(cache: CacheView) -> dict[str, object]:
    """Config, tree (with pins), tickets, quarantine, pools, counters, leases and recent events."""
    ledger = cache.ledger
    return {
        "config": cache.config.to_json(),
        "epoch": ledger.epoch,
        "nodes": [node_info(cache, n).to_json() for n in cache.nodes()],
        "tickets": [ticket_info(t).to_json() for t in cache.live_tickets()],
        "quarantine": [quarantine_info(q).to_json() for q in cache.quarantine_records()],
        "pools": {k: v.to_json() for k, v in cache.pools.stats().items()},
        "lent": {
            c.__name__: sorted(cache.lent_slots(c)) for c in cache.config.components
        },
        "counters": cache.counters.as_dict(),
        "ledger": ledger.counters(),
        "leases": [
            {
                "id": lease.id,
                "component": lease.component.__name__,
                "owner": str(lease.owner),
                "generation": lease.generation,
                "site": lease.site,
                "nodes": [n.id for n in (cache.lease_scope(lease.id) or [])],
            }
            for lease in ledger.live()
        ],
        "events": [e.to_json() for e in ledger.events()],
    }
