"""Backup (device to host): cache-owned tickets, a lease per moving component, published at ack."""

from __future__ import annotations

from typing import TYPE_CHECKING

from unicache.markers import FULL, MAMBA, SWA, SWA_IDX, Full, Mamba
from unicache import guards
from unicache.owners import LeaseOwner, OwnerKind
from unicache.results import TicketStatus
from unicache.tickets import BackupTicket, HostSegment, segment_parts
from unicache.transfer.base import CopyOp, JobKind, Tier, TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import backup_in_flight, pins_full, pins_mamba, pins_swa

if TYPE_CHECKING:
    from unicache.cache import UniCache


def backup(cache: UniCache, node: Node) -> int | None:
    """Start a backup of `node` to host (write_through: with its unbacked ancestors).

    Returns the backup ticket id, or None when there is nothing to back up
    (already backed, already in flight) or no host room.
    """
    guards.owner_thread(cache, "backup")
    cache._check_node(node)
    if node.parent is None or node.dev_full is None:
        return None
    if cache._wb:
        chain = [node] if node.host_pages is None and not backup_in_flight(node) else []
    else:
        chain = cache._unbacked_chain(node)
    return cache._backup_nodes(chain)


def unbacked_chain(cache: UniCache, node: Node) -> list[Node]:
    chain: list[Node] = []
    x = node
    while (
        x.parent is not None
        and x.host_pages is None
        and x.dev_full is not None
        and not backup_in_flight(x)
    ):
        chain.append(x)
        x = x.parent
    chain.reverse()
    return chain


def backup_nodes(cache: UniCache, chain: list[Node]) -> int | None:
    """Back up a contiguous root-first chain (every node device-resident, none backed)."""
    if not chain:
        return None
    c = cache.counters
    src: list[int] = []
    for x in chain:
        df = x.dev_full
        assert df is not None
        src += df
    host = cache._alloc_host(FULL, len(src))
    if host is None:
        c.backups_refused += 1
        return None
    copies = [CopyOp(Full, Tier.DEVICE, Tier.HOST, src, host)]
    swa_nodes: list[Node] = []
    segs: list[HostSegment] = []
    if cache._swa:
        swa_nodes = [x for x in chain if x.dev_swa is not None and x.host_swa_pages is None]
        if swa_nodes:
            ssrc: list[int] = []
            for x in swa_nodes:
                ds = x.dev_swa
                assert ds is not None
                ssrc += ds
            sdst = cache._alloc_host(SWA_IDX, len(ssrc))
            if sdst is None:
                swa_nodes = []
            else:
                copies.append(CopyOp(SWA, Tier.DEVICE, Tier.HOST, ssrc, sdst))
                k = 0
                for x in swa_nodes:
                    w = (x.end - x.start) // cache._ps
                    segs.append((x.start, sdst[k : k + w]))
                    k += w
    mamba_nodes: list[tuple[Node, int]] = []
    if cache._mamba:
        want = [x for x in chain if x.dev_mamba is not None and x.host_mamba is None]
        if want:
            mdst = cache._alloc_host(MAMBA, len(want))
            if mdst is not None:
                msrc: list[int] = []
                for x, slot in zip(want, mdst):
                    dm = x.dev_mamba
                    assert dm is not None
                    msrc.append(dm)
                    mamba_nodes.append((x, slot))
                copies.append(CopyOp(Mamba, Tier.DEVICE, Tier.HOST, msrc, mdst))
    tid = cache.ticket_table.issue()
    owner = LeaseOwner(OwnerKind.BACKUP, tid, chain[-1].id)
    t = BackupTicket(tid, cache.ledger.epoch, chain[-1], owner)
    ledger = cache.ledger
    t.full = ledger.acquire(Full, owner=owner, pins=tuple(pins_full(x) for x in chain))
    if swa_nodes:
        t.swa = ledger.acquire(SWA, owner=owner, pins=tuple(pins_swa(x) for x in swa_nodes))
    if mamba_nodes:
        t.mamba = ledger.acquire(
            Mamba, owner=owner, pins=tuple(pins_mamba(x) for x, _ in mamba_nodes)
        )
    t.full_start = chain[0].start
    t.full_dst = host
    t.swa_segments = segs
    t.mamba_slots = mamba_nodes
    job = TransferJob(tid, t.generation, JobKind.BACKUP, tuple(copies))
    t.job = job
    cache.ticket_table.add(t)
    c.backups += 1
    c.backup_pages += len(src)
    cache.engine.submit(job)
    return tid


def backup_aux(cache: UniCache, node: Node, swa: bool, mamba: bool) -> int | None:
    """Back up `node`'s device-only SWA pages and/or Mamba state (write_back eviction).

    Only the named components whose host copy is missing move; Full stays
    as it is. None when nothing moves (no host room could be made).
    """
    copies: list[CopyOp] = []
    segs: list[HostSegment] = []
    mamba_slots: list[tuple[Node, int]] = []
    if swa and node.dev_swa is not None and node.host_swa_pages is None:
        sdst = cache._alloc_host(SWA_IDX, len(node.dev_swa))
        if sdst is not None:
            copies.append(CopyOp(SWA, Tier.DEVICE, Tier.HOST, list(node.dev_swa), sdst))
            segs.append((node.start, sdst))
    if mamba and node.dev_mamba is not None and node.host_mamba is None:
        mdst = cache._alloc_host(MAMBA, 1)
        if mdst is not None:
            copies.append(CopyOp(Mamba, Tier.DEVICE, Tier.HOST, [node.dev_mamba], mdst))
            mamba_slots.append((node, mdst[0]))
    c = cache.counters
    if not copies:
        c.backups_refused += 1
        return None
    tid = cache.ticket_table.issue()
    owner = LeaseOwner(OwnerKind.BACKUP, tid, node.id)
    t = BackupTicket(tid, cache.ledger.epoch, node, owner)
    ledger = cache.ledger
    if segs:
        t.swa = ledger.acquire(SWA, owner=owner, pins=(pins_swa(node),))
    if mamba_slots:
        t.mamba = ledger.acquire(Mamba, owner=owner, pins=(pins_mamba(node),))
    t.swa_segments = segs
    t.mamba_slots = mamba_slots
    job = TransferJob(tid, t.generation, JobKind.BACKUP, tuple(copies))
    t.job = job
    cache.ticket_table.add(t)
    c.backups += 1
    c.aux_backups += 1
    cache.engine.submit(job)
    return tid


def settle_backup(cache: UniCache, t: BackupTicket, ok: bool) -> TicketStatus:
    """Publish (or, failed, free) what the backup copied; release its leases; its final status."""
    ps = cache._ps
    fh = cache._fh
    fs = t.full_start
    dst = t.full_dst
    dups = cache._dups
    x: Node | None = t.node
    while x is not None and x.parent is not None and x.start >= fs:
        if ok:
            pages = dst[(x.start - fs) // ps : (x.end - fs) // ps]
            if x.host_pages is None:
                x.host_pages = pages
                if x.dev_full is not None:
                    dups[x.id] = x
                elif not x.children:
                    cache._stores[FULL].lru_host.push(x)
            else:
                fh.free(pages)
                cache.counters.backup_duplicate_pages += len(pages)
        x = x.parent
    if ok:
        if t.swa_segments:
            cache._publish_swa_host(t.node, t.swa_segments)
        if t.mamba_slots:
            mh = cache._stores[MAMBA].host
            lru = cache._stores[MAMBA].lru_host
            for node, slot in t.mamba_slots:
                if node.host_mamba is None:
                    node.host_mamba = slot
                    lru.push(node)
                else:
                    mh.free([slot])
                    cache.counters.backup_duplicate_mamba += 1
                    cache.counters.mamba_duplicates += 1
        t.status = status = TicketStatus.DONE
    else:
        fh.free(dst)
        if t.swa_segments:
            sh = cache._stores[SWA_IDX].host
            for _, pages in t.swa_segments:
                sh.free(pages)
        if t.mamba_slots:
            mh = cache._stores[MAMBA].host
            mh.free([s for _, s in t.mamba_slots])
        t.status = status = TicketStatus.FAILED
        cache.counters.backups_failed += 1
    t.close()
    return status


def publish_swa_host(cache: UniCache, bottom: Node, segments: list[HostSegment]) -> None:
    """Give each node inside a segment its host SWA pages (or free them if it has some)."""
    sh = cache._stores[SWA_IDX].host
    lru = cache._stores[SWA_IDX].lru_host
    for x, part in segment_parts(bottom, segments, cache._ps):
        if x.host_swa_pages is None:
            x.host_swa_pages = part
            lru.push(x)
        else:
            sh.free(part)
            cache.counters.backup_duplicate_swa_pages += len(part)
