"""`LoadBacks`: load-backs (host to device): leases first, then device pages, published only at the ack.

What moves of each component, and how it is published at the ack, is that
component store's share (`load_back_plan`, `segments`, `publish_device`).
A load-back whose data is already being copied by a live load-back of the
same anchor joins that copy (its own leases, no pages, no job) and is
settled by the same ack.
"""

from __future__ import annotations


from leases import Borrowed, LeaseLedger

from unicache.components.catalog import ComponentSet
from unicache.components.store import ComponentStore, LoadPlan
from unicache.counters import CacheCounters
from unicache.markers import component_name
from unicache.ops.ack_log import AckLog
from unicache.ops.room import DeviceRoom
from unicache.owners import LeaseOwner, OwnerKind
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.results import Completion, TicketStatus
from unicache.ticket_table import TicketTable
from unicache.tickets import LoadBack, LoadBackTicket, TicketRecord
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import owned_by
from unicache.tree.radix import RadixTree


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
        base = comps.base
        plan = base.load_back_plan(anchor, ())
        chain = plan[0]
        moving: list[tuple[ComponentStore, LoadPlan]] = [(base, plan)] if chain else []
        for store in comps.aux:
            p = store.load_back_plan(anchor, chain)
            missing = p[2]
            if missing:
                c.load_backs_refused += 1
                self._reasons.note(
                    Reason("load_back", ReasonKind.MISSING_STATE, component_name(store.component_marker), missing)
                )
                return None
            if p[0]:
                moving.append((store, p))
        if not moving:
            c.load_backs_noop += 1
            self._reasons.note(Reason("load_back", ReasonKind.NOTHING_TO_MOVE, nodes=(anchor.id,)))
            return None
        copy = None
        if comps.pinned(anchor):
            copy = self._copy_in_flight(anchor, moving)
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.LOAD_BACK, tid, anchor.id)
        ledger = self._ledger
        ticket = LoadBack(tid, ledger.epoch, anchor, owner, comps.span)
        for store, p in moving:
            ticket.leases[store.component_index] = ledger.acquire(
                store.component_marker, owner=owner, pins=store.pin_sets_of(p[1])
            )
        if copy is not None:
            return self._join(ticket, copy)
        copies: list[CopyOp] = []
        room = self._room
        segments = ticket.segments
        moved = ticket.moved
        for store, p in moving:
            move = p[0]
            src = store.gather_host(move)
            dst = room.alloc(store.component_index, len(src))
            if dst is None:
                self._reasons.note(room.no_room_reason("load_back", store.component_index, len(src), (anchor.id,)))
                for st, _ in moving:
                    done = segments[st.component_index]
                    if done is not None:
                        for _, pages in done:
                            st.device.free(pages)
                ticket.status = TicketStatus.FAILED
                ticket.close()
                c.load_backs_refused += 1
                return None
            copies.append(CopyOp(store.component_marker, Tier.HOST, Tier.DEVICE, src, dst))
            segments[store.component_index] = store.segments(move, dst)
            moved[store.component_index] = store.moved(len(src))
        job = TransferJob(tid, ticket.generation, JobKind.LOAD_BACK, tuple(copies))
        ticket.job = job
        c.load_backs += 1
        for store, _ in moving:
            c.count_load_back(store.component_index, moved[store.component_index])
        claim = LoadBackTicket(ticket)
        self._tickets.add(ticket)
        self._engine.submit(job)
        return claim

    def settle(self, t: LoadBack, ok: bool) -> list[Borrowed[TicketRecord]]:
        """Publish (or, failed, free) what `t`'s copy moved; settle `t` and every joiner of it.

        Each store publishes its own segments (`publish_device`). Returns the
        joiners, settled with the same outcome.
        """
        c = self._counters
        anchor = t.node
        clock = self._tree.clock
        by_index = self._components.by_index
        for i, segs in enumerate(t.segments):
            if segs is None:
                continue
            store = by_index[i]
            if ok:
                dups = store.publish_device(anchor, segs, clock)
                if dups:
                    c.count_load_back_duplicates(store.component_index, dups)
            else:
                device = store.device
                for _, pages in segs:
                    device.free(pages)
        if ok:
            t.status = TicketStatus.DONE
        else:
            t.status = TicketStatus.FAILED
            c.load_backs_failed += 1
        joiners = list(t.joiners or ())
        for j in joiners:
            j.status = t.status
            if not ok:
                c.load_backs_failed += 1
        t.close()
        return joiners

    def _copy_in_flight(
        self, anchor: Node, moving: list[tuple[ComponentStore, LoadPlan]]
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
            segments = t.segments
            covered = True
            for store, p in moving:
                segs = segments[store.component_index] if store.component_index < len(segments) else None
                if segs is None or not store.covers(segs, p[0]):
                    covered = False
                    break
            if covered:
                return t
        return None

    def _join(self, ticket: LoadBack, copy: Borrowed[LoadBack]) -> LoadBackTicket:
        """Ride on `copy`: no pages, no bytes; settled by `copy`'s ack (its leases are its own).

        `copy` owns the joiner from now on (closing it at the ack); the caller's
        ticket borrows it.
        """
        ticket.copy = copy
        ticket.moved = list(copy.moved)
        c = self._counters
        c.load_backs += 1
        c.load_back_joins += 1
        claim = LoadBackTicket(ticket)
        if copy.joiners is None:
            copy.joiners = []
        copy.joiners.append(ticket)
        return claim

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
