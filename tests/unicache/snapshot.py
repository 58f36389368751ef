"""`CacheSnapshot`: everything a cache operation could change, to prove a refused call changed nothing.

Byte-for-byte (every pool tensor, every allocator's free stack, used map and
quarantine) and lease-for-lease (live lease ids, ledger counters and event
sequence, the pin set of every node per component, tickets, quarantine
records), plus the tree's shape and per-node fields, the eviction heaps,
counters, reasons, the cache clock, the engine's pending jobs and the inbox.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from unicache import UniCache
from unicache.pools.allocator import SlotAllocator
from unicache.tree.node import Node
from tests.unicache.support import residency

_NODE_FIELDS = ("start", "end", "last_access", "hits", "slot", "dev_children", "lru", "alive")
_RESIDENCY = ("full_device", "full_host", "swa_device", "swa_host", "mamba_device", "mamba_host")


def _allocator(alloc: SlotAllocator) -> tuple[object, ...]:
    return (
        alloc.capacity,
        tuple(alloc._stack[: alloc._top]),
        tuple(alloc._used),
        tuple(sorted(alloc._quarantine.items())),
        tuple(sorted(alloc._deferred)),
    )


def _pins(node: Node) -> tuple[tuple[int, ...], ...]:
    out: list[tuple[int, ...]] = []
    for pins in (residency(node).full_pins, residency(node).swa_pins, residency(node).mamba_pins):
        out.append(tuple(sorted(pins.ids())) if pins is not None else ())
    return tuple(out)


def _node(node: Node) -> tuple[object, ...]:
    values: list[object] = [node.id, node.parent.id if node.parent is not None else None, node.kb]
    for name in _NODE_FIELDS:
        value = getattr(node, name)
        values.append(value)
    r = residency(node)
    for name in _RESIDENCY:
        value = getattr(r, name)
        values.append(tuple(value) if isinstance(value, list) else value)
    values.append(tuple(sorted(k if isinstance(k, bytes) else repr(k) for k in node.children)))
    values.append(_pins(node))
    return tuple(values)


@dataclass(frozen=True)
class CacheSnapshot:
    """A deep, comparable copy of a cache's observable state (take it on the owner thread)."""

    pools: tuple[tuple[str, bytes], ...]
    allocators: tuple[tuple[str, tuple[object, ...]], ...]
    live_leases: tuple[int, ...]
    ledger: tuple[tuple[str, int], ...]
    last_event: int
    tree: tuple[tuple[object, ...], ...]
    heaps: tuple[tuple[str, tuple[tuple[int, int, int], ...]], ...]
    tickets: tuple[tuple[object, ...], ...]
    quarantine: tuple[tuple[object, ...], ...]
    counters: tuple[tuple[str, int], ...]
    reasons: tuple[tuple[str, int], ...]
    clock: int
    dups: tuple[int, ...]
    engine_pending: int
    inbox: int

    @classmethod
    def of(cls, cache: UniCache) -> CacheSnapshot:
        pools = cache.pools.pools()
        ledger = cache.ledger
        events = ledger.events(last=1)
        heaps: list[tuple[str, tuple[tuple[int, int, int], ...]]] = []
        for store in cache.components.by_index:
            for tier, lru in (("device", store.lru_device), ("host", store.lru_host)):
                entries = sorted((e[0], e[1], e[2]) for e in lru.entries())
                heaps.append((f"{store.marker.__name__}.{tier}", tuple(entries)))
        allocs = [(p.name, _allocator(p.alloc)) for p in pools]
        allocs += [(f"store {s.marker.__name__}", (s.device.name, s.host.name)) for s in cache.components.by_index]
        return cls(
            pools=tuple((p.name, p.data.cpu().numpy().tobytes()) for p in pools),
            allocators=tuple(allocs),
            live_leases=tuple(sorted(lease.id for lease in ledger.live())),
            ledger=tuple(sorted({**ledger.counters(), "epoch": ledger.epoch}.items())),
            last_event=events[-1].seq if events else 0,
            tree=tuple(_node(x) for x in cache.nodes()),
            heaps=tuple(heaps),
            tickets=tuple(
                (t.id, t.generation, t.status.value, t.node.id, tuple(sorted(t.lease_ids().items())))
                for t in cache.live_tickets()
            ),
            quarantine=tuple(
                (q.ticket.id, q.generation, q.ticket.status.value, len(q.copies))
                for q in cache.quarantine_records()
            ),
            counters=tuple(sorted(asdict(cache.counters).items())),
            reasons=tuple(sorted(cache.reasons.counts().items())),
            clock=cache.clock,
            dups=tuple(sorted(cache.components.full.dups)),
            engine_pending=cache.engine.pending,
            inbox=len(cache.inbox),
        )

    def diff(self, other: CacheSnapshot) -> list[str]:
        """The names of the fields that differ, each with a short description of the change."""
        out: list[str] = []
        for f in fields(self):
            a = getattr(self, f.name)
            b = getattr(other, f.name)
            if a != b:
                out.append(f"{f.name}: {_describe(a, b)}")
        return out


def _describe(a: object, b: object) -> str:
    if isinstance(a, tuple) and isinstance(b, tuple):
        if len(a) != len(b):
            return f"{len(a)} entries -> {len(b)}"
        for x, y in zip(a, b):
            if x != y:
                return f"{_short(x)} -> {_short(y)}"
    return f"{_short(a)} -> {_short(b)}"


def _short(x: object) -> str:
    text = repr(x)
    return text if len(text) < 300 else text[:300] + "..."
