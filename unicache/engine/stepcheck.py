"""Incremental per-step checks: what a step touched, between the full checks every K steps.

`StepCheck.run()` walks the tree once and fingerprints every node (positions,
slots per component and tier, lease ids per pin set). Only nodes whose
fingerprint changed since the last run (new, moved, loaded, backed up,
evicted, re-pinned) are checked in depth:

- structure: alive, in this cache, listed by its parent, positions and page counts;
- slots: none on a free list, none awaiting quarantine;
- pins: each pin set is the node's, of its component, and holds only live
  current-epoch leases that list that set; a lease that left a changed set
  while still live and still listing it is a dropped pin;
- bytes: the data oracle over those of them whose slots or positions changed, both tiers.

Bytes can also change under an untouched node (a stray write into a slot
the tree holds): every run also scrubs the nodes whose id is the step
number modulo ``scrub_every``, so each node's bytes are read at least once
every ``scrub_every`` steps.

Every run also checks, in O(pools + leases acquired since): every pool's
``used + free == capacity`` and ``used == slots the tree holds + in-flight
destinations + request-owned + awaiting quarantine`` (a slot owned twice or
freed under the tree breaks it), every live lease sits in each pin set it
lists, and every lease acquired since the last run sits only in pin sets of
live nodes that hold them.

The full sanity check and whole-tree oracle still run every K steps and at
the end of a run; tests/engine/test_stepcheck.py shows the step check alone
catches every injected fault the full checks catch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from leases import PinSet

from unicache.cache import UniCache
from unicache.components.catalog import ComponentSet
from unicache.engine.errors import InvariantError
from unicache.engine.oracle import DataOracle
from unicache.markers import SWA, Full, Mamba
from unicache.transfer.base import Tier
from unicache.tree.node import Node

_MARKERS: tuple[type, ...] = (Full, SWA, Mamba)
Fingerprint = tuple[object, ...]


def _slots(v: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if v is None else tuple(v)


def _pin_sets(comps: ComponentSet, x: Node) -> list[PinSet[Any, Node] | None]:
    """The node's pin set of each component, by index (None for an unconfigured one)."""
    return [st.pins(x) if st in comps.configured else None for st in comps.by_index]


def _fingerprint(comps: ComponentSet, x: Node) -> Fingerprint:
    full, swa, mamba = comps.full, comps.swa, comps.mamba
    sw = comps.has_swa
    mb = comps.has_mamba
    pf, pw, pm = _pin_sets(comps, x)
    return (
        x.start, x.end, _slots(full.device_slots(x)), _slots(full.host_slots(x)),
        _slots(swa.device_slots(x)) if sw else None, _slots(swa.host_slots(x)) if sw else None,
        mamba.device_state(x) if mb else None, mamba.host_state(x) if mb else None,
        tuple(pf.ids()) if pf else (), tuple(pw.ids()) if pw else (), tuple(pm.ids()) if pm else (),
    )


class StepCheck:
    """Checks what each step changed (see the module docstring); raises `InvariantError`."""

    def __init__(self, cache: UniCache, oracle: DataOracle | None, scrub_every: int = 8) -> None:
        self.cache = cache
        self.oracle = oracle
        self.scrub_every = max(1, scrub_every)
        self._seen: dict[int, tuple[Node, Fingerprint]] = {}
        self._lease_mark = 0
        self.nodes_checked = 0
        self.runs = 0

    def run(self, step: int) -> None:
        cache = self.cache
        self.runs += 1
        seen = self._seen
        now: dict[int, tuple[Node, Fingerprint]] = {}
        touched: list[tuple[Node, Fingerprint | None]] = []
        moved: list[Node] = []
        k = self.scrub_every
        phase = step % k
        used = [[0, 0], [0, 0], [0, 0]]
        for x in cache.nodes():
            if x.parent is None:
                continue
            fp = _fingerprint(self.cache.components, x)
            now[x.id] = (x, fp)
            old = seen.get(x.id)
            if old is None or old[0] is not x:
                touched.append((x, None))
                moved.append(x)
            elif old[1] != fp:
                touched.append((x, old[1]))
                if old[1][:8] != fp[:8]:
                    moved.append(x)
                elif x.id % k == phase:
                    moved.append(x)
            elif x.id % k == phase:
                moved.append(x)
            for ci, dev, host in ((0, 2, 3), (1, 4, 5)):
                d, h = fp[dev], fp[host]
                if d is not None:
                    used[ci][0] += len(d)  # type: ignore[arg-type]
                if h is not None:
                    used[ci][1] += len(h)  # type: ignore[arg-type]
            if fp[6] is not None:
                used[2][0] += 1
            if fp[7] is not None:
                used[2][1] += 1
        self._seen = now
        self._check_counts(step, used)
        for x, before in touched:
            self._check_node(step, x, before)
        self._check_new_leases(step)
        if self.oracle is not None and moved:
            self.oracle.verify_tree(moved)
        self.nodes_checked += len(touched)

    def _check_counts(self, step: int, used: list[list[int]]) -> None:
        cache = self.cache
        in_flight: dict[tuple[type, Tier], int] = {}
        for t in cache.live_tickets():
            if t.job is not None:
                for op in t.job.copies:
                    key = (op.component, op.dst_tier)
                    in_flight[key] = in_flight.get(key, 0) + len(op.dst)
        for ci, comp in enumerate(_MARKERS):
            if comp not in cache.config.components:
                continue
            lent = len(cache.lent_slots(comp))
            for ti, tier in enumerate((Tier.DEVICE, Tier.HOST)):
                pool = cache.pools.pool(comp, tier)
                a = pool.alloc
                if a.used_count + a.free_count != a.capacity:
                    raise InvariantError(step, f"{pool.name}: {a.used_count} used + {a.free_count} free "
                                               f"!= capacity {a.capacity}")
                owned = used[ci][ti] + in_flight.get((comp, tier), 0) + (lent if ti == 0 else 0)
                deferred = len(a.deferred())
                if a.used_count != owned + deferred:
                    raise InvariantError(step, f"{pool.name}: {a.used_count} slots used, but the tree, "
                                               f"in-flight copies and requests own {owned} and {deferred} "
                                               f"await quarantine")

    def _check_node(self, step: int, x: Node, old: Fingerprint | None) -> None:
        cache = self.cache
        ps = cache.config.page_size
        parent = x.parent
        assert parent is not None
        if not x.alive or x.tree.owner is not cache:
            raise InvariantError(step, f"node {x.id} is reachable but dead or of another cache")
        tw = cache.config.token_bytes
        klen, rest = divmod(len(x.kb), tw)
        if rest or not klen or klen % ps or x.end != x.start + klen or x.start != parent.end:
            raise InvariantError(step, f"node {x.id}: key of {len(x.kb)} bytes at [{x.start}, {x.end}) "
                                       f"after parent end {parent.end}")
        if parent.children.get(x.kb[: ps * tw]) is not x:
            raise InvariantError(step, f"node {x.id}: parent {parent.id} does not list it under its key")
        pages = klen // ps
        for store in cache.components.configured:
            for tier, slots in ((Tier.DEVICE, store.device_slots(x)), (Tier.HOST, store.host_slots(x))):
                if not slots:
                    continue
                if store.marker is not Mamba and len(slots) != pages:
                    raise InvariantError(step, f"node {x.id}: {len(slots)} {store.marker.__name__} "
                                               f"{tier.value} pages for {pages}")
                a = cache.pools.pool(store.marker, tier).alloc
                deferred = a.deferred()
                bad = [s for s in slots if a.is_free(s) or s in deferred]
                if bad:
                    raise InvariantError(step, f"node {x.id}: {store.marker.__name__} {tier.value} slots "
                                               f"{bad[:8]} are free or await quarantine but the node holds them")
        epoch = cache.ledger.epoch
        for ci, p in enumerate(_pin_sets(cache.components, x)):
            comp = _MARKERS[ci]
            ids: list[int] = []
            if p is not None:
                if p.component is not comp or p.holder is not x:
                    raise InvariantError(step, f"node {x.id}: {comp.__name__} pin set of "
                                               f"{p.component.__name__} held by {p.holder!r}")
                for lease in p:
                    ids.append(lease.id)
                    if lease.generation != epoch:
                        raise InvariantError(step, f"node {x.id}: lease {lease.id} of generation "
                                                   f"{lease.generation} pins it in epoch {epoch}")
                    if not any(s is p for s in lease.pin_sets()):
                        raise InvariantError(step, f"node {x.id}: lease {lease.id} sits in its {comp.__name__} "
                                                   f"pin set but does not list that set")
            if old is None:
                continue
            before = old[8 + ci]
            assert isinstance(before, tuple)
            for lid in set(before) - set(ids):
                gone = cache.ledger.get(lid)
                if gone is not None and any(s.holder is x and s.component is comp for s in gone.pin_sets()):
                    raise InvariantError(step, f"node {x.id}: live lease {lid} covers it but is missing "
                                               f"from its {comp.__name__} pin set")

    def _check_new_leases(self, step: int) -> None:
        """Every live lease sits in each pin set it lists; those acquired since the last run only on live nodes.

        The membership half covers every live lease (there are few: the
        requests' locks and tickets): a lease dropped from the pin set of a
        node created this step has no earlier fingerprint to be missed from.
        """
        ledger = self.cache.ledger
        mark = self._lease_mark
        top = mark
        for lease in ledger.live():
            lid = lease.id
            fresh = lid > mark
            if fresh:
                top = max(top, lid)
            for s in lease.pin_sets():
                if lease not in s:
                    x = s.holder
                    where = f"node {x.id}" if type(x) is Node else repr(x)
                    raise InvariantError(step, f"{where}: live lease {lid} lists its "
                                               f"{s.component.__name__} pin set but is missing from it")
                if not fresh:
                    continue
                x = s.holder
                if type(x) is not Node or not x.alive:
                    raise InvariantError(step, f"lease {lid} pins {x!r}, not a live node")
                ci = _MARKERS.index(lease.component)
                if _pin_sets(self.cache.components, x)[ci] is not s:
                    raise InvariantError(step, f"lease {lid} sits in a pin set node {x.id} does not hold")
        self._lease_mark = top
