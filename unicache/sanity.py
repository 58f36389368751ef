"""`sanity_check`: recompute every derived count and pin set of a cache from first principles."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from leases import PinSet

from unicache.errors import CacheError
from unicache.owners import LeaseOwner
from unicache.results import TicketStatus
from unicache.tickets import BackupTicket, LoadBack
from unicache.transfer.base import Tier
from unicache.tree.node import Node
from unicache.tree.pins import covered
from unicache.view import CacheView


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: what, where (node, component), which lease, and details."""

    kind: str
    node_id: int | None
    component: str | None
    lease_id: int | None
    detail: str

    def describe(self) -> str:
        where = []
        if self.node_id is not None:
            where.append(f"node {self.node_id}")
        if self.component is not None:
            where.append(self.component)
        if self.lease_id is not None:
            where.append(f"lease #{self.lease_id}")
        return f"[{self.kind}] {' '.join(where) or '-'}: {self.detail}"

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "node": self.node_id,
            "component": self.component,
            "lease": self.lease_id,
            "detail": self.detail,
        }


class SanityError(CacheError):
    """`UniCache.check()` found violations; `report` lists each one."""

    def __init__(self, report: SanityReport) -> None:
        super().__init__(report.describe())
        self.report = report


@dataclass(slots=True)
class SanityReport:
    violations: list[Violation] = field(default_factory=list)
    nodes: int = 0
    live_leases: int = 0
    max_pins_on_node: int = 0

    @property
    def ok(self) -> bool:
        return not self.violations

    def add(
        self,
        kind: str,
        detail: str,
        *,
        node: Node | None = None,
        component: str | None = None,
        lease: int | None = None,
    ) -> None:
        self.violations.append(
            Violation(kind, node.id if node is not None else None, component, lease, detail)
        )

    def describe(self) -> str:
        if self.ok:
            return f"sanity ok ({self.nodes} nodes, {self.live_leases} live leases)"
        lines = "\n".join(f"  {v.describe()}" for v in self.violations[:50])
        more = f"\n  ... {len(self.violations) - 50} more" if len(self.violations) > 50 else ""
        return f"{len(self.violations)} sanity violation(s):\n{lines}{more}"

    def to_json(self) -> dict[str, object]:
        return {
            "ok": self.ok,
            "nodes": self.nodes,
            "live_leases": self.live_leases,
            "max_pins_on_node": self.max_pins_on_node,
            "violations": [v.to_json() for v in self.violations],
        }




def _pinsets(cache: CacheView, node: Node) -> list[PinSet[Any, Node] | None]:
    """The node's pin set of each component, by index (None for an unconfigured one)."""
    comps = cache.components
    return [st.pins(node) if st in comps.configured else None for st in comps.by_index]


def sanity_check(cache: CacheView) -> SanityReport:
    """Check structure, residency, pool accounting, pins, tickets, heaps and duplicates."""
    r = SanityReport()
    ps = cache.config.page_size
    nodes = list(cache.nodes())
    r.nodes = len(nodes)
    _check_structure(cache, nodes, ps, r)
    _check_pools(cache, nodes, r)
    _check_pins(cache, nodes, r)
    _check_tickets(cache, nodes, r)
    _check_heaps(cache, nodes, r)
    return r


def _check_structure(cache: CacheView, nodes: list[Node], ps: int, r: SanityReport) -> None:
    comps = cache.components
    full = comps.full
    paged = [st for st in (comps.full, comps.swa) if st in comps.configured]
    aux = comps.configured[1:]
    if cache.node_count != len(nodes):
        r.add("count", f"tree size {cache.node_count} != {len(nodes)} nodes reachable")
    ids = Counter(x.id for x in nodes)
    for nid, k in ids.items():
        if k > 1:
            r.add("ids", f"node id {nid} appears {k} times")
    tw = cache.config.token_bytes
    if cache.root.tree.token_bytes != tw:
        r.add("links", f"the tree keys {cache.root.tree.token_bytes}-byte token ids, the config says {tw}")
    for x in nodes:
        if not x.alive or x.tree.owner is not cache:
            r.add("links", "reachable node is dead or belongs to another cache", node=x)
        parent = x.parent
        if parent is None:
            if x is not cache.root:
                r.add("links", "a node without parent that is not the root", node=x)
            continue
        klen, rest = divmod(len(x.kb), tw)
        if rest or not klen or klen % ps:
            r.add("links", f"key of {len(x.kb)} bytes is not a positive number of pages", node=x)
            continue
        if parent.children.get(x.kb[: ps * tw]) is not x:
            r.add("links", f"parent {parent.id} does not list this node under its key", node=x)
        if x.start != parent.end or x.end != x.start + klen:
            r.add("links", f"positions [{x.start}, {x.end}) after parent end {parent.end}", node=x)
        pages = klen // ps
        for st in paged:
            for tier, val in (("device", st.device_slots(x)), ("host", st.host_slots(x))):
                if val is not None and len(val) != pages:
                    r.add("residency", f"{st.name} {tier} has {len(val)} pages for {pages}", node=x)
        on_dev = full.on_device(x)
        if not on_dev and not full.on_host(x):
            r.add("residency", "Full KV on neither tier", node=x, component="Full")
        if on_dev and not full.on_device(parent):
            r.add("residency", "Full on device below a host-only parent", node=x, component="Full")
        for other in aux:
            if not on_dev and other.device_slots(x) is not None:
                r.add("residency", f"{other.name} on device without Full on device", node=x,
                      component=other.name)
        devc = sum(1 for c in x.children.values() if full.on_device(c))
        if x.dev_children != devc:
            r.add("count", f"dev_children {x.dev_children} != {devc} device children", node=x)
    root = cache.root
    devc = sum(1 for c in root.children.values() if full.on_device(c))
    if root.dev_children != devc:
        r.add("count", f"dev_children {root.dev_children} != {devc} device children", node=root)
    if full.device_slots(root) != [] or full.host_list(root) != []:
        r.add("residency", "the root must hold empty Full lists", node=root)
    _check_columns(cache, nodes, r)


def _check_columns(cache: CacheView, nodes: list[Node], r: SanityReport) -> None:
    """Every configured store's columns are as long as the tree's slots; slots are unique; slot 0 is empty."""
    comps = cache.components
    slots = Counter(x.slot for x in nodes)
    for slot, k in slots.items():
        if slot == 0:
            r.add("slots", f"{k} live nodes hold the null slot 0")
        elif k > 1:
            r.add("slots", f"slot {slot} is held by {k} live nodes")
    size = comps.full.columns()
    for st in comps.by_index:
        n = st.columns()
        if st not in comps.configured:
            if n != 1:
                r.add("slots", f"unconfigured {st.name} holds {n} column entries (only the null slot)")
            continue
        if n != size:
            r.add("slots", f"{st.name} columns hold {n} slots, Full's {size}")
        if any(x.slot >= n for x in nodes):
            r.add("slots", f"{st.name} columns ({n}) are shorter than a live node's slot")
        if not st.null_slot_empty():
            r.add("slots", f"{st.name} holds state in the null slot 0", component=st.name)


def _check_pools(cache: CacheView, nodes: list[Node], r: SanityReport) -> None:
    owned: dict[tuple[type, Tier], array[int]] = {}

    def own(comp: type, tier: Tier, slots: Sequence[int] | None) -> None:
        if slots:
            got = owned.get((comp, tier))
            if got is None:
                got = owned[(comp, tier)] = array("q")
            got.extend(slots.tolist() if isinstance(slots, array) and slots.typecode != "q" else slots)

    for x in nodes:
        if x.parent is None:
            continue
        for store in cache.components.configured:
            own(store.marker, Tier.DEVICE, store.device_slots(x))
            own(store.marker, Tier.HOST, store.host_slots(x))
    for t in cache.live_tickets():
        if t.job is None:
            continue
        for op in t.job.copies:
            own(op.component, op.dst_tier, op.dst)
    for comp in cache.config.components:
        own(comp, Tier.DEVICE, sorted(cache.lent_slots(comp)))
    for comp in cache.config.components:
        for tier in (Tier.DEVICE, Tier.HOST):
            pool = cache.pools.pool(comp, tier)
            a = pool.alloc
            counts = _Owned(owned.get((comp, tier), array("q")), a.capacity)
            dup = counts.twice
            if dup:
                r.add("pool", f"{pool.name}: slots {dup[:16]} owned twice", component=comp.__name__)
            free_owned = sorted(s for s in counts if a.is_free(s))
            if free_owned:
                r.add(
                    "pool",
                    f"{pool.name}: slots {free_owned[:16]} are owned but on the free list",
                    component=comp.__name__,
                )
            deferred = a.deferred()
            both = {s for s in deferred if s in counts}
            if both:
                r.add(
                    "pool",
                    f"{pool.name}: slots {sorted(both)[:16]} are owned and awaiting quarantine",
                    component=comp.__name__,
                )
            expect = len(counts) + len(deferred)
            if a.used_count != expect:
                r.add(
                    "pool",
                    f"{pool.name}: {a.used_count} slots used, but {len(counts)} owned "
                    f"(tree, tickets, requests) + {len(deferred)} quarantined = {expect}",
                    component=comp.__name__,
                )
            if a.used_count + a.free_count != a.capacity:
                r.add("pool", f"{pool.name}: used + free != capacity", component=comp.__name__)
            quarantined = a.quarantined()
            if not set(deferred) <= set(quarantined):
                r.add("pool", f"{pool.name}: deferred slots not quarantined", component=comp.__name__)
    expected_q: dict[tuple[type, Tier], Counter[int]] = {}
    for q in cache.quarantine_records():
        t = q.ticket
        if t.status is TicketStatus.TIMED_OUT and (t.full or t.swa or t.mamba or t.joiners):
            r.add("quarantine", f"ticket {t.id} timed out but still holds leases {t.lease_ids()} or joiners")
        for op in q.copies:
            expected_q.setdefault((op.component, op.src_tier), Counter()).update(op.src)
            expected_q.setdefault((op.component, op.dst_tier), Counter()).update(op.dst)
    for comp in cache.config.components:
        for tier in (Tier.DEVICE, Tier.HOST):
            pool = cache.pools.pool(comp, tier)
            want = dict(expected_q.get((comp, tier), Counter()))
            if pool.alloc.quarantined() != want:
                r.add(
                    "quarantine",
                    f"{pool.name}: quarantine {pool.alloc.quarantined()} != pending stale and late acks {want}",
                    component=comp.__name__,
                )


class _Owned:
    """The distinct slots in ``slots`` and those listed more than once, one byte per pool slot."""

    __slots__ = ("_seen", "_outside", "twice", "_n")

    def __init__(self, slots: array[int], capacity: int) -> None:
        seen = bytearray(capacity)
        outside: dict[int, int] = {}
        twice: set[int] = set()
        for slot in slots:
            if 0 <= slot < capacity:
                if seen[slot]:
                    twice.add(slot)
                seen[slot] = 1
            else:
                if slot in outside:
                    twice.add(slot)
                outside[slot] = 1
        self._seen = seen
        self._outside = outside
        self.twice = sorted(twice)
        self._n = seen.count(1) + len(outside)

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[int]:
        seen = self._seen
        start = seen.find(1)
        while start >= 0:
            yield start
            start = seen.find(1, start + 1)
        yield from self._outside

    def __contains__(self, slot: object) -> bool:
        if isinstance(slot, int) and 0 <= slot < len(self._seen):
            return bool(self._seen[slot])
        return slot in self._outside


def _check_pins(cache: CacheView, nodes: list[Node], r: SanityReport) -> None:
    """Recompute every node's pin sets from the live leases (each lease names its pin sets)."""
    live = cache.ledger.live()
    r.live_leases = len(live)
    epoch = cache.ledger.epoch
    markers = [st.marker for st in cache.components.by_index]
    names = [st.name for st in cache.components.by_index]
    expected: dict[tuple[int, int], set[int]] = {}
    by_id: set[int] = set()
    for lease in live:
        by_id.add(lease.id)
        if lease.generation != epoch:
            r.add("lease", f"live lease of generation {lease.generation} in epoch {epoch}",
                  lease=lease.id)
        comp = lease.component
        name = comp.__name__
        ci = markers.index(comp) if comp in markers else -1
        sets = lease.pin_sets()
        if type(lease.owner) is not LeaseOwner:
            r.add("lease", f"live lease owned by {lease.owner!s}, not by a lock, load-back or backup",
                  component=name, lease=lease.id)
            for foreign in covered(lease):
                r.add("pin", f"pinned by a lease that no cache operation owns ({lease.owner!s})",
                      node=foreign, component=name, lease=lease.id)
        if not sets:
            r.add("lease", f"live lease owned by {lease.owner} pins no node",
                  component=name, lease=lease.id)
        for held_in in sets:
            x = held_in.holder
            if type(x) is not Node:
                r.add("pin", f"lease sits in a pin set whose holder {x!r} is not a node",
                      component=name, lease=lease.id)
                continue
            if not x.alive:
                r.add("pin", "lease pins a dead node", node=x, component=name, lease=lease.id)
                continue
            if ci < 0 or _pinsets(cache, x)[ci] is not held_in:
                r.add("pin", "lease sits in a pin set its node does not hold",
                      node=x, component=name, lease=lease.id)
            expected.setdefault((x.id, ci), set()).add(lease.id)
    node_ids = {x.id for x in nodes}
    for x in nodes:
        total = 0
        for ci, p in enumerate(_pinsets(cache, x)):
            name = names[ci]
            actual: set[int] = set()
            if p is not None:
                if p.component is not markers[ci]:
                    r.add("pin", f"pin set of {p.component.__name__} in the {name} slot", node=x)
                if p.holder is not x:
                    r.add("pin", f"pin set holder {p.holder!r} is not the node", node=x)
                actual = set(p.ids())
            total += len(actual)
            want = expected.get((x.id, ci), set())
            for lid in sorted(actual - want):
                why = "is not live" if lid not in by_id else "does not cover this node"
                r.add("pin", f"pinned by a lease that {why}", node=x, component=name, lease=lid)
            for lid in sorted(want - actual):
                r.add("pin", "lease covers this node but is missing from its pin set",
                      node=x, component=name, lease=lid)
        r.max_pins_on_node = max(r.max_pins_on_node, total)
    for (nid, ci), lids in expected.items():
        if nid not in node_ids:
            for lid in lids:
                r.add("pin", f"lease pins node {nid}, not in the tree",
                      component=names[ci] if ci >= 0 else None, lease=lid)


def _check_tickets(cache: CacheView, nodes: list[Node], r: SanityReport) -> None:
    epoch = cache.ledger.epoch
    ps = cache.config.page_size
    full = cache.components.full
    for t in cache.live_tickets():
        if t.generation != epoch:
            r.add("ticket", f"live ticket {t.id} of generation {t.generation} in epoch {epoch}")
        if not t.node.alive:
            r.add("ticket", f"ticket {t.id} names a dead node", node=t.node)
            continue
        for lease in (t.full, t.swa, t.mamba):
            if lease is not None and not lease.held:
                r.add("ticket", f"ticket {t.id} holds a lease that is not live", lease=lease.id)
        if isinstance(t, BackupTicket):
            x: Node | None = t.node
            while x is not None and x.parent is not None and x.start >= t.full_start:
                if not full.on_device(x):
                    r.add("ticket", f"backup {t.id} reads a node with no device Full", node=x)
                p = full.pins(x)
                if t.full is not None and (p is None or t.full not in p):
                    r.add("ticket", f"backup {t.id} source not pinned by its Full lease",
                          node=x, component="Full", lease=t.full.id)
                x = x.parent
        elif isinstance(t, LoadBack):
            copy = t.copy
            if copy is not None:
                if t.job is not None or t.full_dst:
                    r.add("ticket", f"load-back {t.id} joined load-back {copy.id} but moves data")
                if t not in (copy.joiners or ()):
                    r.add("ticket", f"load-back {t.id} joined load-back {copy.id}, "
                          f"which does not list it")
                continue
            if not t.full_dst:
                continue
            x = t.node
            spanned = 0
            while x is not None and x.parent is not None and x.start >= t.full_start:
                if not full.on_host(x):
                    r.add("ticket", f"load-back {t.id} reads a node with no host Full", node=x,
                          component="Full")
                p = full.pins(x)
                if t.full is None or p is None or t.full not in p:
                    r.add("ticket", f"load-back {t.id} source not pinned by its Full lease",
                          node=x, component="Full", lease=t.full.id if t.full else None)
                spanned += x.end - x.start
                x = x.parent
            if spanned != len(t.full_dst) * ps:
                r.add("ticket", f"load-back {t.id}: chain covers {spanned} tokens, "
                      f"destination holds {len(t.full_dst) * ps}")


def _check_heaps(cache: CacheView, nodes: list[Node], r: SanityReport) -> None:
    dev = [st.lru_device for st in cache.components.by_index]
    host = [st.lru_host for st in cache.components.by_index]
    for heap in (*dev, *host):
        bits = sum(1 for x in nodes if x.lru & heap.bit)
        alive_entries = sum(1 for e in heap.entries() if e[3].alive)
        if bits != alive_entries:
            r.add("lru", f"heap bit {heap.bit}: {bits} nodes flagged, {alive_entries} live entries")
    full = cache.components.full
    dups = full.dups
    aux = cache.components.configured[1:]
    for x in nodes:
        if x.parent is None:
            continue
        if full.is_device_leaf(x) and not x.lru & full.lru_device.bit:
            r.add("lru", "device leaf missing from the Full eviction heap", node=x)
        for st in aux:
            if st.device_slots(x) is not None and not x.lru & st.lru_device.bit:
                r.add("lru", f"device {st.name} missing from the {st.name} eviction heap", node=x)
            if st.host_slots(x) is not None and not x.lru & st.lru_host.bit:
                r.add("lru", f"host {st.name} missing from the host {st.name} heap", node=x)
        if not full.on_device(x) and not x.children and not x.lru & full.lru_host.bit:
            r.add("lru", "host leaf missing from the host eviction heap", node=x)
        if full.on_device(x) and full.on_host(x) and x.id not in dups:
            r.add("dups", "Full on both tiers but not tracked as a host duplicate", node=x)
