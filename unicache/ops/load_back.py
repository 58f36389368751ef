"""Load-back (host to device): leases first, then device pages, published only at the ack."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from leases import Borrowed

from unicache.components.full import evicted_chain
from unicache import guards
from unicache.markers import FULL, MAMBA, SWA, SWA_IDX, Full, Mamba
from unicache.components.swa import window_nodes
from unicache.owners import LeaseOwner, OwnerKind
from unicache.reasons import Reason, ReasonKind
from unicache.results import TicketStatus
from unicache.tickets import LoadBack, LoadBackTicket, Segment, segment_parts
from unicache.transfer.base import CopyOp, JobKind, Tier, TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import owned_by, pins_full, pins_mamba, pins_swa

if TYPE_CHECKING:
    from unicache.cache import UniCache


def load_back(cache: UniCache, anchor: Node) -> LoadBackTicket | None:
    """Start moving what `anchor` needs from host to device; None if nothing can/need move.

    One lease per component that moves data is taken *before* device
    pages are allocated, so the eviction that allocation may run never
    touches what this load-back reads nor the anchor's path. Every None
    notes its `Reason` (root, nothing to move, missing state, no device
    room) on `cache.reasons`.
    """
    guards.owner_thread(cache, "load_back")
    cache._check_node(anchor)
    c = cache.counters
    if anchor.parent is None:
        c.load_backs_noop += 1
        cache.reasons.note(Reason("load_back", ReasonKind.ROOT, nodes=(anchor.id,)))
        return None
    chain, top = evicted_chain(anchor)
    win: list[Node] = []
    swa_move: list[Node] = []
    if cache._swa:
        win = window_nodes(anchor, cache._window)
        lost = [x.id for x in win if x.dev_swa is None and x.host_swa_pages is None]
        if lost:
            c.load_backs_refused += 1
            cache.reasons.note(Reason("load_back", ReasonKind.MISSING_STATE, "swa", tuple(lost)))
            return None
        swa_move = [x for x in win if x.dev_swa is None]
        swa_move.reverse()
    mamba_move = False
    if cache._mamba and anchor.dev_mamba is None:
        if anchor.host_mamba is None:
            c.load_backs_refused += 1
            cache.reasons.note(Reason("load_back", ReasonKind.MISSING_STATE, "mamba", (anchor.id,)))
            return None
        mamba_move = True
    if not chain and not swa_move and not mamba_move:
        c.load_backs_noop += 1
        cache.reasons.note(Reason("load_back", ReasonKind.NOTHING_TO_MOVE, nodes=(anchor.id,)))
        return None
    copy = None
    if anchor.pins_full is not None or anchor.pins_swa is not None or anchor.pins_mamba is not None:
        copy = _copy_in_flight(cache, anchor, chain, swa_move, mamba_move)
    tid = cache.ticket_table.issue()
    owner = LeaseOwner(OwnerKind.LOAD_BACK, tid, anchor.id)
    ticket = LoadBack(tid, cache.ledger.epoch, anchor, owner)
    ledger = cache.ledger
    if chain:
        scope = chain + [top] if top.parent is not None else chain
        ticket.full = ledger.acquire(Full, owner=owner, pins=tuple(pins_full(x) for x in scope))
    if swa_move:
        ticket.swa = ledger.acquire(SWA, owner=owner, pins=tuple(pins_swa(x) for x in win))
    if mamba_move:
        ticket.mamba = ledger.acquire(Mamba, owner=owner, pins=(pins_mamba(anchor),))
    if copy is not None:
        return _join(cache, ticket, copy)
    copies: list[CopyOp] = []
    full_dst: list[int] | None = []
    swa_dst: list[int] | None = []
    mamba_dst: list[int] | None = []
    full_n = swa_n = 0
    if chain:
        src = array("i")
        for x in chain:
            hf = x.host_pages
            assert hf is not None, x.id
            src += hf
        full_n = len(src)
        full_dst = cache._alloc_dev(FULL, full_n)
        if full_dst is not None:
            copies.append(CopyOp(Full, Tier.HOST, Tier.DEVICE, src, full_dst))
            ticket.full_start = chain[0].start
            ticket.full_dst = full_dst
            ticket.full_tokens = anchor.end - chain[0].start
    if swa_move and full_dst is not None:
        ssrc = array("i")
        for x in swa_move:
            hs = x.host_swa_pages
            assert hs is not None, x.id
            ssrc += hs
        swa_n = len(ssrc)
        swa_dst = cache._alloc_dev(SWA_IDX, swa_n)
        if swa_dst is not None:
            copies.append(CopyOp(SWA, Tier.HOST, Tier.DEVICE, ssrc, swa_dst))
            segs: list[Segment] = []
            k = 0
            for x in swa_move:
                w = (x.end - x.start) // cache._ps
                segs.append((x.start, swa_dst[k : k + w]))
                k += w
            ticket.swa_segments = segs
            ticket.swa_tokens = len(ssrc) * cache._ps
    if mamba_move and full_dst is not None and swa_dst is not None:
        mamba_dst = cache._alloc_dev(MAMBA, 1)
        if mamba_dst is not None:
            hm = anchor.host_mamba
            assert hm is not None
            copies.append(CopyOp(Mamba, Tier.HOST, Tier.DEVICE, [hm], mamba_dst))
            ticket.mamba_dst = mamba_dst[0]
            ticket.mamba_moved = True
    if full_dst is None or swa_dst is None or mamba_dst is None:
        i = FULL if full_dst is None else SWA_IDX if swa_dst is None else MAMBA
        needed = full_n if full_dst is None else swa_n if swa_dst is None else 1
        cache.reasons.note(cache._no_room_reason("load_back", i, needed, (anchor.id,)))
        if full_dst:
            cache._fd.free(full_dst)
        if swa_dst:
            sd = cache._stores[SWA_IDX].device
            sd.free(swa_dst)
        ticket.status = TicketStatus.FAILED
        ticket.close()
        c.load_backs_refused += 1
        return None
    job = TransferJob(tid, ticket.generation, JobKind.LOAD_BACK, tuple(copies))
    ticket.job = job
    c.load_backs += 1
    c.load_back_full_tokens += ticket.full_tokens
    c.load_back_swa_tokens += ticket.swa_tokens
    c.load_back_mamba += mamba_move
    claim = LoadBackTicket(ticket)
    cache.ticket_table.add(ticket)
    cache.engine.submit(job)
    return claim


def settle_load_back(cache: UniCache, t: LoadBack, ok: bool) -> list[LoadBack]:
    """Publish (or, failed, free) what `t`'s copy moved; settle `t` and every joiner of it.

    Returns the joiners, settled with the same outcome.
    """
    ps = cache._ps
    fd = cache._fd
    anchor = t.node
    if ok:
        clk = cache._clock
        if t.full_dst:
            fs = t.full_start
            dst = t.full_dst
            lru = cache._stores[FULL].lru_device
            dups = cache._dups
            x: Node | None = anchor
            while x is not None and x.start >= fs and x.parent is not None:
                pages = dst[(x.start - fs) // ps : (x.end - fs) // ps]
                if x.dev_full is None:
                    x.dev_full = pages
                    x.parent.dev_children += 1
                    x.last_access = clk
                    lru.push(x)
                    if x.host_pages is not None:
                        dups[x.id] = x
                else:
                    fd.free(pages)
                    cache.counters.load_back_duplicate_pages += len(pages)
                x = x.parent
        if t.swa_segments:
            cache._publish_swa_device(anchor, t.swa_segments)
        if t.mamba_dst is not None:
            md = cache._stores[MAMBA].device
            if anchor.dev_mamba is None:
                anchor.dev_mamba = t.mamba_dst
                cache._stores[MAMBA].lru_device.push(anchor)
            else:
                md.free([t.mamba_dst])
                cache.counters.load_back_duplicate_mamba += 1
                cache.counters.mamba_duplicates += 1
        t.status = TicketStatus.DONE
    else:
        if t.full_dst:
            fd.free(t.full_dst)
        if t.swa_segments:
            sd = cache._stores[SWA_IDX].device
            for _, pages in t.swa_segments:
                sd.free(pages)
        if t.mamba_dst is not None:
            md = cache._stores[MAMBA].device
            md.free([t.mamba_dst])
        t.status = TicketStatus.FAILED
        cache.counters.load_backs_failed += 1
    joiners = list(t.joiners or ())
    for j in joiners:
        j.status = t.status
        if not ok:
            cache.counters.load_backs_failed += 1
    t.close()
    return joiners


def _copy_in_flight(
    cache: UniCache, anchor: Node, chain: list[Node], swa_move: list[Node], mamba_move: bool
) -> Borrowed[LoadBack] | None:
    """A live load-back of `anchor` whose copy moves everything this one needs, if any.

    Found through `anchor`'s own pin sets: every load-back pins its anchor
    with each lease it takes, and its lease owner names its ticket.
    """
    tickets = cache.ticket_table
    kind = OwnerKind.LOAD_BACK
    owners = owned_by(anchor.pins_full, kind) + owned_by(anchor.pins_swa, kind)
    owners += owned_by(anchor.pins_mamba, kind)
    for owner in owners:
        if owner.node != anchor.id:
            continue
        t = tickets.load_back(owner.id)
        if t is None or t.node is not anchor:
            continue
        if chain and (not t.full_dst or t.full_start > chain[0].start):
            continue
        if swa_move and not _segments_cover(t.swa_segments, swa_move, cache._ps):
            continue
        if mamba_move and t.mamba_dst is None:
            continue
        return t
    return None


def _segments_cover(segments: list[Segment], nodes: list[Node], ps: int) -> bool:
    for x in nodes:
        if not any(s <= x.start and x.end <= s + len(pages) * ps for s, pages in segments):
            return False
    return True


def _join(cache: UniCache, ticket: LoadBack, copy: Borrowed[LoadBack]) -> LoadBackTicket:
    """Ride on `copy`: no pages, no bytes; settled by `copy`'s ack (its leases are its own).

    `copy` owns the joiner from now on (closing it at the ack); the caller's
    ticket borrows it.
    """
    ticket.copy = copy
    ticket.full_tokens = copy.full_tokens
    ticket.swa_tokens = copy.swa_tokens
    ticket.mamba_moved = copy.mamba_moved
    c = cache.counters
    c.load_backs += 1
    c.load_back_joins += 1
    claim = LoadBackTicket(ticket)
    if copy.joiners is None:
        copy.joiners = []
    copy.joiners.append(ticket)
    return claim


def publish_swa_device(cache: UniCache, bottom: Node, segments: list[Segment]) -> None:
    """Give each node inside a segment its device SWA pages (or free them if it has some)."""
    sd = cache._stores[SWA_IDX].device
    lru = cache._stores[SWA_IDX].lru_device
    for x, part in segment_parts(bottom, segments, cache._ps):
        if x.dev_swa is None:
            x.dev_swa = part
            lru.push(x)
        else:
            sd.free(part)
            cache.counters.load_back_duplicate_swa_pages += len(part)
