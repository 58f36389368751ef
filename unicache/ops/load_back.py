"""`LoadBacks`: load-backs (host to device): leases first, then device pages, published only at the ack.

A load-back whose data is already being copied by a live load-back of the
same anchor joins that copy (its own leases, no pages, no job) and is
settled by the same ack.
"""

from __future__ import annotations


from leases import Borrowed, LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.components.swa import window_nodes
from unicache.counters import CacheCounters
from unicache.markers import FULL, MAMBA, SWA, SWA_IDX, Full, Mamba
from unicache.ops.ack_log import AckLog
from unicache.ops.room import DeviceRoom
from unicache.owners import LeaseOwner, OwnerKind
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.results import Completion, TicketStatus
from unicache.ticket_table import TicketTable
from unicache.tickets import LoadBack, LoadBackTicket, Segment, TicketRecord, segment_parts
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import owned_by
from unicache.tree.radix import RadixTree


def _segments_cover(segments: list[Segment], nodes: list[Node], ps: int) -> bool:
    for x in nodes:
        if not any(s <= x.start and x.end <= s + len(pages) * ps for s, pages in segments):
            return False
    return True


class LoadBacks:
    """Starts load-backs (or joins one in flight), and settles them and their joiners at the ack."""

    __slots__ = (
        "_tree", "_components", "_room", "_tickets", "_ledger", "_engine", "_counters", "_reasons",
        "_acks", "_ps", "_window",
    )

    def __init__(
        self,
        tree: RadixTree,
        components: ComponentSet,
        room: DeviceRoom,
        tickets: TicketTable,
        ledger: LeaseLedger,
        engine: TransferEngine,
        counters: CacheCounters,
        reasons: ReasonLog,
        acks: AckLog,
        page_size: int,
        window: int,
    ) -> None:
        self._tree = tree
        self._components = components
        self._room = room
        self._tickets = tickets
        self._ledger = ledger
        self._engine = engine
        self._counters = counters
        self._reasons = reasons
        self._acks = acks
        self._ps = page_size
        self._window = window

    def load_back(self, anchor: Node) -> LoadBackTicket | None:
        """Start moving what `anchor` needs from host to device; None if nothing can/need move.

        One lease per component that moves data is taken *before* device
        pages are allocated, so the eviction that allocation may run never
        touches what this load-back reads nor the anchor's path. Every None
        notes its `Reason` (root, nothing to move, missing state, no device
        room) on the cache's `reasons`.
        """
        c = self._counters
        if anchor.parent is None:
            c.load_backs_noop += 1
            self._reasons.note(Reason("load_back", ReasonKind.ROOT, nodes=(anchor.id,)))
            return None
        comps = self._components
        full = comps.full
        swa = comps.swa
        mamba = comps.mamba
        chain, top = full.evicted_chain(anchor)
        win: list[Node] = []
        swa_move: list[Node] = []
        if comps.has_swa:
            win = window_nodes(anchor, self._window)
            sdev = swa.dev
            shost = swa.host_col
            lost = [x.id for x in win if sdev[x.slot] is None and shost[x.slot] is None]
            if lost:
                c.load_backs_refused += 1
                self._reasons.note(Reason("load_back", ReasonKind.MISSING_STATE, "swa", tuple(lost)))
                return None
            swa_move = [x for x in win if sdev[x.slot] is None]
            swa_move.reverse()
        mamba_move = False
        if comps.has_mamba and mamba.device_state(anchor) is None:
            if mamba.host_state(anchor) is None:
                c.load_backs_refused += 1
                self._reasons.note(Reason("load_back", ReasonKind.MISSING_STATE, "mamba", (anchor.id,)))
                return None
            mamba_move = True
        if not chain and not swa_move and not mamba_move:
            c.load_backs_noop += 1
            self._reasons.note(Reason("load_back", ReasonKind.NOTHING_TO_MOVE, nodes=(anchor.id,)))
            return None
        copy = None
        if comps.pinned(anchor):
            copy = self._copy_in_flight(anchor, chain, swa_move, mamba_move)
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.LOAD_BACK, tid, anchor.id)
        ticket = LoadBack(tid, self._ledger.epoch, anchor, owner)
        ledger = self._ledger
        if chain:
            scope = chain + [top] if top.parent is not None else chain
            ticket.full = ledger.acquire(Full, owner=owner, pins=tuple(full.pin_set(x) for x in scope))
        if swa_move:
            ticket.swa = ledger.acquire(SWA, owner=owner, pins=tuple(swa.pin_set(x) for x in win))
        if mamba_move:
            ticket.mamba = ledger.acquire(Mamba, owner=owner, pins=(mamba.pin_set(anchor),))
        if copy is not None:
            return self._join(ticket, copy)
        copies: list[CopyOp] = []
        full_dst: list[int] | None = []
        swa_dst: list[int] | None = []
        mamba_dst: list[int] | None = []
        full_n = swa_n = 0
        if chain:
            src = full.gather_host(chain)
            full_n = len(src)
            full_dst = self._room.alloc(FULL, full_n)
            if full_dst is not None:
                copies.append(CopyOp(Full, Tier.HOST, Tier.DEVICE, src, full_dst))
                ticket.full_start = chain[0].start
                ticket.full_dst = full_dst
                ticket.full_tokens = anchor.end - chain[0].start
        if swa_move and full_dst is not None:
            ssrc = swa.gather_host(swa_move)
            swa_n = len(ssrc)
            swa_dst = self._room.alloc(SWA_IDX, swa_n)
            if swa_dst is not None:
                copies.append(CopyOp(SWA, Tier.HOST, Tier.DEVICE, ssrc, swa_dst))
                segs: list[Segment] = []
                k = 0
                for x in swa_move:
                    w = (x.end - x.start) // self._ps
                    segs.append((x.start, swa_dst[k : k + w]))
                    k += w
                ticket.swa_segments = segs
                ticket.swa_tokens = len(ssrc) * self._ps
        if mamba_move and full_dst is not None and swa_dst is not None:
            mamba_dst = self._room.alloc(MAMBA, 1)
            if mamba_dst is not None:
                hm = mamba.host_state(anchor)
                assert hm is not None
                copies.append(CopyOp(Mamba, Tier.HOST, Tier.DEVICE, [hm], mamba_dst))
                ticket.mamba_dst = mamba_dst[0]
                ticket.mamba_moved = True
        if full_dst is None or swa_dst is None or mamba_dst is None:
            i = FULL if full_dst is None else SWA_IDX if swa_dst is None else MAMBA
            needed = full_n if full_dst is None else swa_n if swa_dst is None else 1
            self._reasons.note(self._room.no_room_reason("load_back", i, needed, (anchor.id,)))
            if full_dst:
                self._components.full.device.free(full_dst)
            if swa_dst:
                sd = self._components.swa.device
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
        self._tickets.add(ticket)
        self._engine.submit(job)
        return claim


    def settle(self, t: LoadBack, ok: bool) -> list[Borrowed[TicketRecord]]:
        """Publish (or, failed, free) what `t`'s copy moved; settle `t` and every joiner of it.

        Returns the joiners, settled with the same outcome.
        """
        ps = self._ps
        fd = self._components.full.device
        anchor = t.node
        if ok:
            clk = self._tree.clock
            if t.full_dst:
                fs = t.full_start
                dst = t.full_dst
                lru = self._components.full.lru_device
                full = self._components.full
                fdev = full.dev
                fhost = full.host_col
                x: Node | None = anchor
                while x is not None and x.start >= fs and x.parent is not None:
                    pages = dst[(x.start - fs) // ps : (x.end - fs) // ps]
                    slot = x.slot
                    if fdev[slot] is None:
                        fdev[slot] = pages
                        x.parent.dev_children += 1
                        x.last_access = clk
                        lru.push(x)
                        if fhost[slot] is not None:
                            full.note_duplicate(x)
                    else:
                        fd.free(pages)
                        self._counters.load_back_duplicate_pages += len(pages)
                    x = x.parent
            if t.swa_segments:
                self._publish_swa_device(anchor, t.swa_segments)
            if t.mamba_dst is not None:
                mamba = self._components.mamba
                md = mamba.device
                if mamba.device_state(anchor) is None:
                    mamba.set_device_state(anchor, t.mamba_dst)
                    mamba.lru_device.push(anchor)
                else:
                    md.free([t.mamba_dst])
                    self._counters.load_back_duplicate_mamba += 1
                    self._counters.mamba_duplicates += 1
            t.status = TicketStatus.DONE
        else:
            if t.full_dst:
                fd.free(t.full_dst)
            if t.swa_segments:
                sd = self._components.swa.device
                for _, pages in t.swa_segments:
                    sd.free(pages)
            if t.mamba_dst is not None:
                md = self._components.mamba.device
                md.free([t.mamba_dst])
            t.status = TicketStatus.FAILED
            self._counters.load_backs_failed += 1
        joiners = list(t.joiners or ())
        for j in joiners:
            j.status = t.status
            if not ok:
                self._counters.load_backs_failed += 1
        t.close()
        return joiners


    def _copy_in_flight(
        self, anchor: Node, chain: list[Node], swa_move: list[Node], mamba_move: bool
    ) -> Borrowed[LoadBack] | None:
        """A live load-back of `anchor` whose copy moves everything this one needs, if any.

        Found through `anchor`'s own pin sets: every load-back pins its anchor
        with each lease it takes, and its lease owner names its ticket.
        """
        tickets = self._tickets
        kind = OwnerKind.LOAD_BACK
        owners: list[LeaseOwner] = []
        for store in self._components.configured:
            owners += owned_by(store.pins(anchor), kind)
        for owner in owners:
            if owner.node != anchor.id:
                continue
            t = tickets.load_back(owner.id)
            if t is None or t.node is not anchor:
                continue
            if chain and (not t.full_dst or t.full_start > chain[0].start):
                continue
            if swa_move and not _segments_cover(t.swa_segments, swa_move, self._ps):
                continue
            if mamba_move and t.mamba_dst is None:
                continue
            return t
        return None


    def _join(self, ticket: LoadBack, copy: Borrowed[LoadBack]) -> LoadBackTicket:
        """Ride on `copy`: no pages, no bytes; settled by `copy`'s ack (its leases are its own).

        `copy` owns the joiner from now on (closing it at the ack); the caller's
        ticket borrows it.
        """
        ticket.copy = copy
        ticket.full_tokens = copy.full_tokens
        ticket.swa_tokens = copy.swa_tokens
        ticket.mamba_moved = copy.mamba_moved
        c = self._counters
        c.load_backs += 1
        c.load_back_joins += 1
        claim = LoadBackTicket(ticket)
        if copy.joiners is None:
            copy.joiners = []
        copy.joiners.append(ticket)
        return claim


    def _publish_swa_device(self, bottom: Node, segments: list[Segment]) -> None:
        """Give each node inside a segment its device SWA pages (or free them if it has some)."""
        swa = self._components.swa
        sd = swa.device
        lru = swa.lru_device
        sdev = swa.dev
        for x, part in segment_parts(bottom, segments, self._ps):
            if sdev[x.slot] is None:
                sdev[x.slot] = part
                lru.push(x)
            else:
                sd.free(part)
                self._counters.load_back_duplicate_swa_pages += len(part)

    def on_ack(self, ack: Ack, out: list[Completion]) -> bool:
        """Settle the live load-back `ack` names and its joiners (appending their completions);
        False if it names none."""
        lb = self._tickets.acked_load_back(ack.ticket, ack.generation)
        if lb is None:
            return False
        node_id = lb.node.id
        self._acks.settling(ack, node_id)
        joiners = self.settle(lb, ack.ok)
        status = TicketStatus.DONE if ack.ok else TicketStatus.FAILED
        out.append(Completion(ack.ticket, ack.generation, JobKind.LOAD_BACK, status, node_id))
        for j in joiners:
            out.append(Completion(j.id, j.generation, JobKind.LOAD_BACK, j.status, j.node.id))
        if ack.ok:
            self._acks.settled_ok(ack, JobKind.LOAD_BACK, node_id, [j.id for j in joiners])
        return True
