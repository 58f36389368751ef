"""Atomic failures: every refused public operation raises a typed error and changes nothing.

Hypothesis drives a cache (Full, Full+SWA, Full+Mamba; write-back and
write-through; page sizes 1 and 4; a simulated engine with acks pending)
into a random state through the public API, then calls each public
operation with bad arguments and from a foreign thread. Each call must
raise a typed error (`unicache.errors` or `leases` errors) naming the ids
involved, and leave the cache byte-for-byte and lease-for-lease as it was
(`CacheSnapshot`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from leases import Borrowed, DoubleReleaseError, LeaseError, WrongThreadError
from tests.unicache.snapshot import CacheSnapshot
from tests.unicache.support import Driver, residency
from unicache import SWA, CacheConfig, Full, LockReceipt, Mamba, Node, UniCache
from unicache.errors import (
    CacheError,
    ForeignObjectError,
    InvalidArgumentError,
    InvalidSlotError,
    TokenIdRangeError,
    UnknownNodeError,
    UnknownTicketError,
)
from unicache.tickets import LoadBackTicket
from unicache.transfer.base import Ack, Tier
from unicache.transfer.simulated import FaultSpec, SimulatedEngine

CONFIGS: dict[str, dict[str, object]] = {
    "full-wb-ps1": {"page_size": 1},
    "full-wt-ps4": {"page_size": 4, "write_policy": "write_through", "token_bytes": 8},
    "full-wb-async-ps4": {"page_size": 4, "sync_write_back": False},
    "swa-wb-ps4": {"page_size": 4, "swa_window": 8},
    "swa-wt-ps1": {"page_size": 1, "swa_window": 4, "write_policy": "write_through"},
    "mamba-wb-async-ps1": {"page_size": 1, "mamba": True, "mamba_device_slots": 6,
                           "sync_write_back": False},
    "mamba-wt-ps4": {"page_size": 4, "mamba": True, "mamba_device_slots": 6,
                     "write_policy": "write_through", "token_bytes": 8},
}

ACTIONS = ("serve", "serve", "lock", "unlock", "load_back", "settle", "tick", "tick", "evict",
           "evict_host", "alloc", "free", "backup", "reset")

TYPED = (CacheError, LeaseError)


def _build(name: str, seed: int, ledger: str = "unicache", *, simulated: bool = True) -> UniCache:
    params: dict[str, object] = {
        "device_tokens": 64, "host_tokens": 96, "dtype": "int32", "device": "cpu",
        "kv_width": 4, "mamba_width": 4, "debug": True, "ledger_name": ledger,
    }
    params.update(CONFIGS[name])
    engine = SimulatedEngine(FaultSpec(delay=True, reorder=True), seed=seed) if simulated else None
    return UniCache(CacheConfig(**params), engine)  # type: ignore[arg-type]


def _tokens(family: int, pages: int, ps: int) -> list[int]:
    return [1000 * family + i for i in range(pages * ps)]


@dataclass
class World:
    """The cache under test and what the random drive left held: receipts, tickets, request slots."""

    cache: UniCache
    driver: Driver
    receipts: list[LockReceipt] = field(default_factory=list)
    tickets: list[LoadBackTicket] = field(default_factory=list)
    lent: list[int] = field(default_factory=list)
    dead: list[Node] = field(default_factory=list)
    served: list[list[int]] = field(default_factory=list)

    def live_nodes(self) -> list[Node]:
        return [x for x in self.cache.nodes() if x.parent is not None]

    def step(self, action: str, a: int, b: int) -> None:
        cache = self.cache
        ps = cache.config.page_size
        tokens = _tokens(a % 4, 1 + b % 6, ps)
        engine = cache.engine
        assert isinstance(engine, SimulatedEngine)
        if action == "serve":
            if self.driver.serve(tokens) is not None:
                self.served.append(tokens)
        elif action == "lock":
            self.receipts.append(cache.lock(cache.match_prefix(tokens).device_node))
        elif action == "unlock" and self.receipts:
            cache.unlock(self.receipts.pop(b % len(self.receipts)))
        elif action == "load_back":
            m = cache.match_prefix(tokens)
            if m.needs_load_back:
                t = cache.load_back(m.anchor)
                if t is not None:
                    self.tickets.append(t)
        elif action == "settle" and self.tickets:
            t = self.tickets.pop(b % len(self.tickets))
            if t.status.value == "in_flight":
                t.abandon()
            else:
                t.result()
        elif action == "tick":
            engine.tick()
            cache.poll()
        elif action == "evict":
            comp = cache.config.components[b % len(cache.config.components)]
            cache.evict_device(comp, 1 + a % 8)
        elif action == "evict_host":
            comp = cache.config.components[b % len(cache.config.components)]
            cache.evict_host(comp, 1 + a % 8)
        elif action == "alloc":
            got = cache.alloc_device(Full, 1 + a % 3)
            if got is not None:
                self.lent += got
        elif action == "free" and self.lent:
            cache.free_device(Full, self.lent)
            self.lent = []
        elif action == "backup":
            nodes = self.live_nodes()
            if nodes:
                cache.backup(nodes[b % len(nodes)])
        elif action == "reset" and a % 3 == 0:
            self.dead += self.live_nodes()
            cache.reset()

    def close(self) -> None:
        """Hand everything back and settle every copy; the cache must be sane and leak nothing."""
        cache = self.cache
        for r in self.receipts:
            cache.unlock(r)
        self.receipts = []
        if self.lent:
            cache.free_device(Full, self.lent)
            self.lent = []
        engine = cache.engine
        assert isinstance(engine, SimulatedEngine)
        engine.flush()
        cache.poll()
        for t in self.tickets:
            t.result()
        self.tickets = []
        report = cache.sanity_check()
        assert report.ok, report.describe()
        errors = self.driver.oracle.check(cache)
        assert not errors, errors


def refused(cache: UniCache, label: str, call: Callable[[], object],
            errors: type[BaseException] | tuple[type[BaseException], ...] = TYPED,
            names: tuple[object, ...] = ()) -> BaseException:
    """Call `call` on this thread: it must raise one of `errors` naming `names`, changing nothing."""
    before = CacheSnapshot.of(cache)
    try:
        call()
    except errors as exc:
        err: BaseException = exc
    else:
        pytest.fail(f"{label}: no error raised")
    after = CacheSnapshot.of(cache)
    changed = before.diff(after)
    assert not changed, f"{label} raised {err!r} but changed the cache: {changed}"
    for name in names:
        assert str(name) in str(err), f"{label}: {err!r} does not name {name!r}"
    return err


def foreign(cache: UniCache, label: str, call: Callable[[], object], *, reader: bool = False) -> None:
    """Call `call` on another thread: `WrongThreadError` (a reader may also succeed), nothing changed."""
    before = CacheSnapshot.of(cache)
    box: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the owner thread to assert on
            box.append(exc)

    thread = threading.Thread(target=run, name=f"foreign-{label}")
    thread.start()
    thread.join()
    changed = before.diff(CacheSnapshot.of(cache))
    if box:
        assert isinstance(box[0], WrongThreadError), f"{label} on a foreign thread: {box[0]!r}"
        assert str(cache.ledger.owner_thread) in str(box[0])
    else:
        assert reader, f"{label} on a foreign thread raised nothing"
    assert not changed, f"{label} on a foreign thread changed the cache: {changed}"


def _bad_arguments(w: World, other: UniCache, other_receipt: Borrowed[LockReceipt]) -> None:
    cache = w.cache
    ps = cache.config.page_size
    cap = cache.pools.device_pool(Full).alloc.capacity
    comps = cache.config.components
    unknown = next(c for c in (SWA, Mamba, int) if c not in comps)
    refused(cache, "alloc_device(-1)", lambda: cache.alloc_device(Full, -1), InvalidArgumentError, (-1,))
    before = CacheSnapshot.of(cache)
    assert cache.alloc_device(Full, cap + 1) is None
    changed = [d for d in before.diff(CacheSnapshot.of(cache)) if not d.startswith(("counters", "reasons"))]
    assert not changed, f"alloc_device(Full, {cap + 1}) beyond the tier ({cap}) changed the cache: {changed}"
    refused(cache, "alloc_device(True)", lambda: cache.alloc_device(Full, True), InvalidArgumentError)
    refused(cache, "alloc_device(2.0)", lambda: cache.alloc_device(Full, 2.0),  # type: ignore[arg-type]
            InvalidArgumentError)
    refused(cache, "alloc_device(unknown)", lambda: cache.alloc_device(unknown, 1), InvalidArgumentError,
            (unknown.__name__,))
    for comp in comps:
        refused(cache, f"evict_device({comp.__name__}, -3)", partial(cache.evict_device, comp, -3),
                InvalidArgumentError, (-3,))
        refused(cache, f"evict_host({comp.__name__}, -1)", partial(cache.evict_host, comp, -1),
                InvalidArgumentError, (-1,))
    refused(cache, "evict_device(unknown)", lambda: cache.evict_device(unknown, 1), InvalidArgumentError)
    refused(cache, "reclaim_host_duplicates(-2)", lambda: cache.reclaim_host_duplicates(-2),
            InvalidArgumentError, (-2,))
    refused(cache, "free_device(out of range)", lambda: cache.free_device(Full, [cap + 3]),
            InvalidSlotError, (cap + 3,))
    owned = next((p[0] for p in (residency(x).full_device for x in w.live_nodes()) if p), None)
    if owned is not None:
        refused(cache, "free_device(tree-owned)", lambda: cache.free_device(Full, [owned]),
                InvalidSlotError, (owned,))
    if w.lent:
        twice = [w.lent[0], w.lent[0]]
        refused(cache, "free_device(twice)", lambda: cache.free_device(Full, twice), InvalidSlotError)
    for dead in w.dead[-2:]:
        ops: tuple[tuple[str, Callable[[Node], object]], ...] = (
            ("lock", cache.lock), ("load_back", cache.load_back), ("backup", cache.backup),
            ("path_pages", cache.path_pages))
        for op, fn in ops:
            refused(cache, f"{op}(dead node)", partial(fn, dead), UnknownNodeError, (dead.id,))
    alien = other_receipt.node
    node_ops: tuple[tuple[str, Callable[[Node], object]], ...] = (
        ("lock", cache.lock), ("load_back", cache.load_back), ("backup", cache.backup))
    for op, fn in node_ops:
        refused(cache, f"{op}(foreign node)", partial(fn, alien), ForeignObjectError, (alien.id,))
    refused(cache, "unlock(foreign receipt)",
            lambda: cache.unlock(other_receipt),  # lease: ignore[lease-escape]  (refused: stays the caller's)
            ForeignObjectError, (other_receipt.id,))
    done = cache.lock(cache.root)
    cache.unlock(done)
    refused(cache, "unlock(released receipt)",
            lambda: cache.unlock(done),  # lease: ignore[lease-escape]  (already released: refused)
            DoubleReleaseError)
    last = cache.ticket_table.last_issued
    refused(cache, "deliver(never issued)", lambda: cache.deliver(Ack(last + 100, cache.epoch)),
            UnknownTicketError, (last + 100,))
    if last:
        refused(cache, "deliver(future generation)", lambda: cache.deliver(Ack(last, cache.epoch + 3)),
                UnknownTicketError, (last, cache.epoch + 3))
    _bad_inserts(w, ps)


def _bad_inserts(w: World, ps: int) -> None:
    cache = w.cache
    cap = cache.pools.device_pool(Full).alloc.capacity
    tokens = _tokens(7, 1, ps)
    free_slot = next(s for s in range(cap) if not cache.pools.device_pool(Full).alloc.is_lent(s))
    one = [0] if cache.config.swa_window is not None else None
    refused(cache, "insert(foreign slot)", lambda: cache.insert(tokens, [free_slot], swa_slots=one),
            InvalidSlotError, (free_slot,))
    refused(cache, "insert(wrong page count)", lambda: cache.insert(tokens, [], swa_slots=one),
            InvalidArgumentError)
    refused(cache, "insert(start past end)", lambda: cache.insert(tokens, [], start=2 * ps, swa_slots=one),
            InvalidArgumentError, (2 * ps,))
    if ps > 1:
        refused(cache, "insert(partial page)", lambda: cache.insert(tokens[:-1], [], swa_slots=one),
                InvalidArgumentError)
    _bad_token_ids(w, ps)
    got = cache.alloc_device(Full, 2)
    if got is None:
        return
    two = _tokens(7, 2, ps)
    both = [0, 1] if cache.config.swa_window is not None else None
    refused(cache, "insert(slot listed twice)", lambda: cache.insert(two, [got[0], got[0]], swa_slots=both),
            InvalidSlotError)
    if cache.config.swa_window is not None:
        refused(cache, "insert(no swa_slots)", lambda: cache.insert(two, got), InvalidArgumentError)
    else:
        refused(cache, "insert(swa_slots without SWA)", lambda: cache.insert(two, got, swa_slots=[0, 1]),
                InvalidArgumentError)
    if cache.config.mamba and cache.config.swa_window is None:
        refused(cache, "insert(foreign mamba slot)", lambda: cache.insert(two, got, mamba_slot=10**6),
                InvalidSlotError, (10**6,))
    cache.free_device(Full, got)


def _bad_token_ids(w: World, ps: int) -> None:
    """An id the key width cannot hold (or a negative one) is refused by match and insert, naming it."""
    cache = w.cache
    tw = cache.config.token_bytes
    too_big = 1 << (8 * tw - 1)
    seqs = [s for s in w.served if len(s) >= 2 * ps][:1] + [_tokens(6, 2, ps)]
    for seq in seqs:
        for bad in (too_big, -1):
            pos = len(seq) - 1
            tokens = seq[:pos] + [bad]
            err = refused(cache, f"match_prefix(id {bad})", lambda: cache.match_prefix(tokens),
                          TokenIdRangeError, (bad, f"position {pos}", f"{tw}-byte"))
            assert isinstance(err, TokenIdRangeError) and (err.token_id, err.position) == (bad, pos)
            got = cache.alloc_device(Full, len(tokens) // ps)
            if got is None:
                continue
            swa = cache.alloc_device(SWA, len(got)) if cache.config.swa_window is not None else None
            if cache.config.swa_window is None or swa is not None:
                refused(cache, f"insert(id {bad})", partial(cache.insert, tokens, got, swa_slots=swa),
                        TokenIdRangeError, (bad, f"position {pos}"))
            if swa is not None:
                cache.free_device(SWA, swa)
            cache.free_device(Full, got)


def _foreign_thread(w: World) -> None:
    cache = w.cache
    ps = cache.config.page_size
    nodes = w.live_nodes()
    node = nodes[-1] if nodes else cache.root
    tokens = _tokens(1, 3, ps)
    foreign(cache, "match_prefix", lambda: cache.match_prefix(tokens))
    foreign(cache, "alloc_device", lambda: cache.alloc_device(Full, 1))
    foreign(cache, "lock", lambda: cache.lock(node))
    foreign(cache, "load_back", lambda: cache.load_back(node))
    foreign(cache, "backup", lambda: cache.backup(node))
    foreign(cache, "poll", cache.poll)
    live = cache.live_tickets()
    ack = Ack(live[0].id, live[0].generation) if live else Ack(max(1, cache.ticket_table.last_issued), 0)
    foreign(cache, "deliver", lambda: cache.deliver(ack))
    for comp in cache.config.components:
        foreign(cache, f"evict_device({comp.__name__})", partial(cache.evict_device, comp, 64))
        foreign(cache, f"evict_host({comp.__name__})", partial(cache.evict_host, comp, 64))
    foreign(cache, "reclaim_host_duplicates", lambda: cache.reclaim_host_duplicates(64))
    foreign(cache, "reset", cache.reset)
    if w.receipts:
        receipt = w.receipts[0]
        foreign(cache, "unlock", lambda: cache.unlock(receipt))  # lease: ignore[lease-escape]  (refused)
    for reader, fn in (("sanity_check", cache.sanity_check), ("dump_state", cache.dump_state),
                       ("live_tickets", cache.live_tickets), ("in_flight", cache.in_flight),
                       ("lease_coverage", cache.lease_coverage), ("node_info", lambda: cache.node_info(node))):
        foreign(cache, reader, fn, reader=True)
    got = cache.alloc_device(Full, 2)
    if got is None:
        return
    rows = torch.zeros((2 * ps, cache.config.kv_width), dtype=torch.int32)
    foreign(cache, "write_slots", lambda: cache.write_slots(Full, got, rows, Tier.DEVICE))
    foreign(cache, "free_device", lambda: cache.free_device(Full, got))
    extra = cache.alloc_device(SWA, 2) if cache.config.swa_window is not None else None
    if cache.config.swa_window is None or extra is not None:
        for seq in ([_tokens(5, 2, ps)] + [s[:-ps] + [10**6] * ps for s in w.served if len(s) >= 2 * ps][:1]):
            start = len(seq) - 2 * ps
            m = cache.match_prefix(seq)
            if start and m.device_len < start:
                continue
            foreign(cache, f"insert({len(seq)} tokens from {start})",
                    partial(cache.insert, seq, got, start=start, swa_slots=extra))
    if extra is not None:
        cache.free_device(SWA, extra)
    cache.free_device(Full, got)


@pytest.mark.parametrize("config", sorted(CONFIGS))
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**16),
    actions=st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 99), st.integers(0, 99)),
                     max_size=30),
)
def test_refused_operations_change_nothing(config: str, seed: int,
                                           actions: list[tuple[str, int, int]]) -> None:
    cache = _build(config, seed)
    w = World(cache, Driver(cache))
    other = _build(config, seed, ledger="other", simulated=False)
    Driver(other).serve(_tokens(9, 2, other.config.page_size))
    other.poll()
    other_receipt = other.lock(other.match_prefix(_tokens(9, 2, other.config.page_size)).device_node)
    for action, a, b in actions:
        w.step(action, a, b)
    _bad_arguments(w, other, other_receipt)
    _foreign_thread(w)
    other.unlock(other_receipt)
    w.close()
