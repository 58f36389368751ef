"""`canonical_form`: a state up to ids, so that states which behave identically merge.

Two states behave identically when they differ only in names the cache picks
(node, lease, ticket and receipt ids, raw slot numbers, the epoch number and
the access clock). The form keeps what decides behaviour:

- the tree: every node by its token path, its rank in the LRU order, whether
  its hits reach the write-through threshold, and per component and tier
  which canonical slots it holds;
- every live lease as (component, owner kind, the paths it pins), grouped by
  the ticket or receipt that owns it, so pin sets are multisets of
  (component, owner kind) per node;
- every live ticket (kind, anchor path, status, generation relative to the
  epoch, abandoned, whether the session holds it, whether its copy is held or
  withheld) with its copies' canonical source and destination slots; the
  copies still held from before a reset; the reset quarantine;
- the session's lock receipts (relative generation, length, end node while
  it lives, the leases still live), the kind and relative generation of the
  newest settled ticket (what a duplicate ack names);
- per pool the free / used / quarantined counts and the refusals still armed.

Slots are renamed per pool in order of first appearance, walking nodes by
path, then tickets, then held copies, then the quarantine: the same
occupancy and aliasing pattern gets the same names whatever the raw numbers.
Bytes are not part of the form: the byte oracle checks them at every state.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from unicache.explore.replay import Replayed
from unicache.transfer.base import TransferJob

Form = tuple[Hashable, ...]


class _SlotNames:
    """Per pool, raw slot -> its index in order of first appearance."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[str, dict[int, int]] = {}

    def name(self, pool: str, slots: Sequence[int] | int | None) -> tuple[int, ...] | None:
        if slots is None:
            return None
        names = self._names.setdefault(pool, {})
        rows = (slots,) if isinstance(slots, int) else tuple(slots)
        return tuple(names.setdefault(x, len(names)) for x in rows)


def _owner_kind(owner: str) -> str:
    """`load_back#4@2` -> `load_back`; `lock#1` -> `lock`."""
    return owner.split("#", 1)[0]


def canonical_form(r: Replayed, write_through_threshold: int = 1) -> Form:
    """The state of `r` up to ids (see the module docstring)."""
    cache = r.cache
    session = r.session
    epoch = cache.epoch
    names = _SlotNames()
    paths: dict[int, tuple[int, ...]] = {}
    infos = []
    for node in cache.nodes():
        if node.parent is None:
            continue
        paths[node.id] = node.tokens()
        infos.append((paths[node.id], cache.node_info(node)))
    infos.sort(key=lambda x: x[0])
    clocks = sorted({info.last_access for _, info in infos})
    tree = []
    for path, info in infos:
        comps = tuple(
            (name, names.name(f"{name}.device", st.device), names.name(f"{name}.host", st.host))
            for name, st in sorted(info.components.items())
        )
        tree.append((path, clocks.index(info.last_access), info.hits >= write_through_threshold, comps))

    coverage = cache.lease_coverage()

    def lease(lid: int) -> Hashable:
        got = coverage.get(lid)
        if got is None:
            return None
        component, owner, nodes = got
        return (component, _owner_kind(owner), tuple(sorted(paths.get(n, ()) for n in nodes)))

    jobs = r.manual.jobs
    held_by_session = set(session.tickets)
    described = []
    for t in cache.tickets():
        job = jobs.get(t.id)
        desc = (t.kind, paths.get(t.node_id), t.status, epoch - t.generation, t.abandoned,
                t.id in held_by_session, job is not None, job is not None and r.manual.is_withheld(t.id),
                tuple(sorted((c, lease(lid)) for c, lid in t.leases.items())))
        described.append((desc, t.id))
    described.sort(key=lambda x: (repr(x[0]), x[1]))
    tickets = tuple((desc, _copies(names, jobs.get(tid))) for desc, tid in described)
    live_ids = {tid for _, tid in described}
    stale = sorted(((job.kind.value, epoch - job.generation, r.manual.is_withheld(t)), t)
                   for t, job in jobs.items() if t not in live_ids)
    stale_jobs = tuple((desc, _copies(names, jobs[t])) for desc, t in stale)
    quarantine = tuple(
        (q.kind, epoch - q.generation, q.timed_out,
         tuple((pool, names.name(pool, rows)) for pool, rows in sorted(q.slots.items())))
        for q in sorted(cache.quarantine(), key=lambda q: (q.kind, epoch - q.generation, q.ticket_id))
    )
    owned = {lid for t in cache.tickets() for lid in t.leases.values()}
    receipts = []
    for rid in sorted(session.receipts):
        rc = session.receipts[rid]
        mine = [x for x in (rc.full, rc.swa, rc.mamba) if x is not None]
        live = tuple(sorted(repr(lease(x.id)) for x in mine if x.id in coverage))
        owned.update(x.id for x in mine)
        end = paths.get(rc.node.id) if rc.generation == epoch else None
        receipts.append((epoch - rc.generation, rc.length, end, live))
    others = tuple(sorted(repr(lease(lid)) for lid in coverage if lid not in owned))
    settled = r.newest_settled()
    newest = None if settled is None else (r.seen[settled][1], epoch - r.seen[settled][0])
    pools = tuple(
        (name, s.free, s.used, s.quarantined) for name, s in sorted(cache.pools.stats().items())
    )
    armed = tuple(p.alloc.refuse for p in cache.pools.pools())
    return (tuple(tree), tickets, stale_jobs, quarantine, tuple(sorted(receipts, key=repr)), others, newest,
            pools, armed)


def _copies(names: _SlotNames, job: TransferJob | None) -> Hashable:
    if job is None:
        return None
    out = []
    for op in job.copies:
        comp = op.component.__name__.lower()
        out.append((comp, op.src_tier.value, op.dst_tier.value,
                    names.name(f"{comp}.{op.src_tier.value}", op.src),
                    names.name(f"{comp}.{op.dst_tier.value}", op.dst)))
    return tuple(out)
