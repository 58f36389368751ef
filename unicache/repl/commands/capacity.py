"""Why a pool had no room: the REPL's reading of a capacity refusal, from the state the cache shows.

`describe_shortfall` looks at one pool's occupancy and at who holds its rows
(leases pinning nodes, reset quarantine, in-flight copies) and names the
holders. It implements `unicache.repl.errors.CapacityReason`; a reason the
cache itself reports can replace it without changing `CapacityError` or the
envelope (`error.reason`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from unicache.dump.schema import CrashDump, JSONObject


@dataclass(frozen=True, slots=True)
class PoolShortfall:
    """`needed` rows of `component` on `tier` could not be had: what held the pool's rows then.

    `kind` is "too-large" when the pool could never hold `needed`,
    "room-available" when it has `needed` free rows (the refusal had another
    cause), else the largest holder: "pins" (rows of nodes pinned by leases),
    "quarantine" (rows held until a reset's stale acks), "in-flight" (rows
    that copies of live tickets read or write), or "unexplained" when none
    holds any row (rows lent to requests, say). Holders may overlap: a
    load-back's destination rows are also on the nodes its leases pin.
    `ticket_pinned` counts the pinned rows whose every pin is a lease of a live
    ticket: they weigh as in-flight, not as pins, since the ack frees them.
    """

    component: str
    tier: str
    needed: int
    capacity: int
    free: int
    pinned: int
    pinned_by: tuple[int, ...]
    pinned_nodes: tuple[int, ...]
    quarantined: int
    quarantined_by: tuple[int, ...]
    in_flight: int
    in_flight_tickets: tuple[int, ...]
    ticket_pinned: int = 0
    kind: str = field(init=False)

    def __post_init__(self) -> None:
        held = {"pins": self.pinned - self.ticket_pinned, "quarantine": self.quarantined,
                "in-flight": self.in_flight}
        kind, rows = max(held.items(), key=lambda kv: kv[1])
        if self.needed > self.capacity:
            kind, rows = "too-large", 1
        elif self.free >= self.needed:
            kind, rows = "room-available", 1
        object.__setattr__(self, "kind", kind if rows else "unexplained")

    @property
    def summary(self) -> str:
        unit = "slots" if self.component == "mamba" else "pages"
        if self.kind == "too-large":
            return (f"{self.needed} {self.component} {unit} needed, but the {self.tier} pool holds only "
                    f"{self.capacity} in all")
        if self.kind == "room-available" and self.needed == 0:
            return (f"no {self.component} {unit} to move ({self.free} of {self.capacity} {self.tier} free): "
                    f"something other than {self.component} {self.tier} room refused it")
        if self.kind == "room-available":
            return (f"the {self.tier} {self.component} pool has room ({self.free} of {self.capacity} free for "
                    f"{self.needed} {unit}): something other than {self.component} {self.tier} room refused it")
        parts: list[str] = []
        if self.pinned:
            leases = " ".join(f"L{i}" for i in self.pinned_by)
            nodes = " ".join(f"#{i}" for i in self.pinned_nodes)
            parts.append(f"{self.pinned} pinned by {leases} on {nodes}")
        if self.quarantined:
            tickets = " ".join(f"T{i}" for i in self.quarantined_by) or "a reset"
            parts.append(f"{self.quarantined} quarantined until the stale acks of {tickets}")
        if self.in_flight:
            tickets = " ".join(f"T{i}" for i in self.in_flight_tickets)
            parts.append(f"{self.in_flight} under in-flight copies of {tickets}")
        held = "; ".join(parts) if parts else "no pins, quarantine or in-flight copy explains it"
        everything = ""
        if self.kind == "pins" and self.pinned + self.free >= self.capacity:
            everything = " (everything left is pinned)"
        elif self.kind == "in-flight":
            everything = " (the room frees when those tickets are acked)"
        return (f"no {self.tier} room for {self.needed} {self.component} {unit}: {self.free} of {self.capacity} "
                f"free after eviction; {held}{everything}")

    def to_json(self) -> JSONObject:
        return {
            "kind": self.kind,
            "component": self.component,
            "tier": self.tier,
            "needed": self.needed,
            "capacity": self.capacity,
            "free": self.free,
            "pinned": self.pinned,
            "pinned_by": list(self.pinned_by),
            "pinned_nodes": list(self.pinned_nodes),
            "quarantined": self.quarantined,
            "quarantined_by": list(self.quarantined_by),
            "in_flight": self.in_flight,
            "in_flight_tickets": list(self.in_flight_tickets),
            "ticket_pinned": self.ticket_pinned,
        }


def host_only_rows(view: CrashDump, node_id: int, component: str = "full") -> int:
    """Rows a load-back at `node_id` would move for `component`: the host-only chain ending there."""
    rows = 0
    for node in reversed(view.node_path(node_id)):
        res = node.components.get(component)
        if res is None or res.device is not None:
            break
        rows += _rows(res.host)
    return rows


def _rows(slots: object) -> int:
    if slots is None:
        return 0
    if isinstance(slots, int):
        return 1
    assert isinstance(slots, (list, tuple))
    return len(slots)


def describe_shortfall(view: CrashDump, component: str, tier: str, needed: int) -> PoolShortfall:
    """Who held the rows of pool `component.tier` in `view` when `needed` of them could not be had."""
    pool = view.pools.get(f"{component}.{tier}")
    capacity = pool.capacity if pool is not None else 0
    free = pool.free if pool is not None else 0
    pinned = 0
    pinned_by: set[int] = set()
    pinned_nodes: list[int] = []
    ticket_leases = {lid for t in view.tickets for lid in t.leases.values()}
    ticket_pinned = 0
    for node in view.nodes.values():
        res = node.components.get(component)
        if res is None or not res.pins:
            continue
        rows = _rows(res.device if tier == "device" else res.host)
        if rows:
            pinned += rows
            ticket_pinned += rows if set(res.pins) <= ticket_leases else 0
            pinned_by.update(res.pins)
            pinned_nodes.append(node.id)
    quarantined_by = tuple(sorted(q.ticket for q in view.quarantine if q.slots.get(f"{component}.{tier}")
                                  or q.slots.get(component)))
    in_flight = 0
    tickets: list[int] = []
    for t in view.tickets:
        held: set[int] = set()
        for c in t.copies:
            if c.component == component:
                held.update(c.src if c.src_tier == tier else ())
                held.update(c.dst if c.dst_tier == tier else ())
        rows = len(held)
        if rows:
            in_flight += rows
            tickets.append(t.id)
    return PoolShortfall(
        component, tier, needed, capacity, free, pinned, tuple(sorted(pinned_by)), tuple(pinned_nodes),
        pool.quarantined if pool is not None else 0, quarantined_by, in_flight, tuple(tickets), ticket_pinned,
    )
