"""Load-back (host to device): leases first, then device pages, published only at the ack."""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from unicache.components.full import evicted_chain
from unicache.components.markers import FULL, MAMBA, SWA, SWA_IDX, Full, Mamba
from unicache.components.swa import window_nodes
from unicache.ops.pins import pins_full, pins_mamba, pins_swa
from unicache.results import TicketStatus
from unicache.tickets import LoadBack, LoadBackTicket, Segment, segment_parts
from unicache.transfer.base import CopyOp, JobKind, Tier, TransferJob
from unicache.tree.node import Node

if TYPE_CHECKING:
    from unicache.cache import UniCache


def load_back(cache: UniCache, anchor: Node) -> LoadBackTicket | None:
    """Start moving what `anchor` needs from host to device; None if nothing can/need move.

    One lease per component that moves data is taken *before* device
    pages are allocated, so the eviction that allocation may run never
    touches what this load-back reads nor the anchor's path.
    """
    cache._check_node(anchor)
    c = cache.counters
    if anchor.parent is None:
        c.load_backs_noop += 1
        return None
    chain, top = evicted_chain(anchor)
    win: list[Node] = []
    swa_move: list[Node] = []
    if cache._swa:
        win = window_nodes(anchor, cache._window)
        for x in win:
            if x.dev_swa is None:
                if x.host_swa_pages is None:
                    c.load_backs_refused += 1
                    return None
                swa_move.append(x)
        swa_move.reverse()
    mamba_move = False
    if cache._mamba and anchor.dev_mamba is None:
        if anchor.host_mamba is None:
            c.load_backs_refused += 1
            return None
        mamba_move = True
    if not chain and not swa_move and not mamba_move:
        c.load_backs_noop += 1
        return None
    tid = next(cache._ticket_ids)
    cache._last_ticket = tid
    owner = f"load_back#{tid}@{anchor.id}"
    ticket = LoadBack(tid, cache.ledger.epoch, anchor, owner)
    ledger = cache.ledger
    scopes = cache._scopes
    if chain:
        scope = chain + [top] if top.parent is not None else list(chain)
        full = ledger.acquire(Full, owner=owner, pins=tuple(pins_full(x) for x in scope))
        scopes[full.id] = scope
        ticket.full = full
    if swa_move:
        swa = ledger.acquire(SWA, owner=owner, pins=tuple(pins_swa(x) for x in win))
        scopes[swa.id] = win
        ticket.swa = swa
    if mamba_move:
        mamba = ledger.acquire(Mamba, owner=owner, pins=(pins_mamba(anchor),))
        scopes[mamba.id] = [anchor]
        ticket.mamba = mamba
    copies: list[CopyOp] = []
    full_dst: list[int] | None = []
    swa_dst: list[int] | None = []
    mamba_dst: list[int] | None = []
    if chain:
        src = array("i")
        for x in chain:
            hf = x.host_pages
            assert hf is not None, x.id
            src += hf
        full_dst = cache._alloc_dev(FULL, len(src))
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
        swa_dst = cache._alloc_dev(SWA_IDX, len(ssrc))
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
        if full_dst:
            cache._fd.free(full_dst)
        if swa_dst:
            sd = cache._dev[SWA_IDX]
            assert sd is not None
            sd.free(swa_dst)
        ticket.release_leases(scopes)
        ticket.status = TicketStatus.FAILED
        c.load_backs_refused += 1
        return None
    job = TransferJob(tid, ticket.generation, JobKind.LOAD_BACK, tuple(copies))
    ticket.job = job
    cache._tickets[tid] = ticket
    c.load_backs += 1
    c.load_back_full_tokens += ticket.full_tokens
    c.load_back_swa_tokens += ticket.swa_tokens
    c.load_back_mamba += mamba_move
    cache.engine.submit(job)
    return LoadBackTicket(ticket)


def settle_load_back(cache: UniCache, t: LoadBack, ok: bool) -> None:
    ps = cache._ps
    fd = cache._fd
    anchor = t.node
    if ok:
        clk = cache._clock
        if t.full_dst:
            fs = t.full_start
            dst = t.full_dst
            lru = cache._lru_dev[FULL]
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
            if anchor.dev_mamba is None:
                anchor.dev_mamba = t.mamba_dst
                cache._lru_dev[MAMBA].push(anchor)
            else:
                md = cache._dev[MAMBA]
                assert md is not None
                md.free([t.mamba_dst])
        t.status = TicketStatus.DONE
    else:
        if t.full_dst:
            fd.free(t.full_dst)
        if t.swa_segments:
            sd = cache._dev[SWA_IDX]
            assert sd is not None
            for _, pages in t.swa_segments:
                sd.free(pages)
        if t.mamba_dst is not None:
            md = cache._dev[MAMBA]
            assert md is not None
            md.free([t.mamba_dst])
        t.status = TicketStatus.FAILED
        cache.counters.load_backs_failed += 1
    t.release_leases(cache._scopes)


def publish_swa_device(cache: UniCache, bottom: Node, segments: list[Segment]) -> None:
    """Give each node inside a segment its device SWA pages (or free them if it has some)."""
    sd = cache._dev[SWA_IDX]
    assert sd is not None
    lru = cache._lru_dev[SWA_IDX]
    for x, part in segment_parts(bottom, segments, cache._ps):
        if x.dev_swa is None:
            x.dev_swa = part
            lru.push(x)
        else:
            sd.free(part)
