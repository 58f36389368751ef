"""`BackupScheduler`: backups (device to host) as cache-owned tickets, settled at their ack.

Each backup takes a lease per moving component over the nodes it reads and
publishes the host copies only at its ack. `wait` completes chosen backups
at once (synchronous write-back eviction) and settles only their acks.
"""

from __future__ import annotations

from collections.abc import Collection

from leases import Borrowed, LeaseLedger, Mailbox

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.markers import FULL, MAMBA, SWA, SWA_IDX, Full, Mamba
from unicache.ops.ack_log import AckLog
from unicache.ops.eviction import BackupNeed, Evictor
from unicache.owners import LeaseOwner, OwnerKind
from unicache.results import Completion, TicketStatus
from unicache.ticket_table import TicketTable
from unicache.tickets import BackupTicket, HostSegment, segment_parts
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import backup_in_flight, owned_by


class BackupScheduler:
    """Starts backups of Full chains and of SWA/Mamba states, waits for chosen ones, settles their acks."""

    __slots__ = (
        "_components", "_tickets", "_ledger", "_engine", "_inbox", "_counters", "_acks",
        "_evictor", "_ps", "_write_back",
    )

    def __init__(
        self,
        components: ComponentSet,
        tickets: TicketTable,
        ledger: LeaseLedger,
        engine: TransferEngine,
        inbox: Mailbox[Ack],
        counters: CacheCounters,
        acks: AckLog,
        evictor: Evictor,
        page_size: int,
        write_back: bool,
    ) -> None:
        self._components = components
        self._tickets = tickets
        self._ledger = ledger
        self._engine = engine
        self._inbox = inbox
        self._counters = counters
        self._acks = acks
        self._evictor = evictor
        self._ps = page_size
        self._write_back = write_back

    def backup(self, node: Node) -> int | None:
        """Start a backup of `node` to host (write_through: with its unbacked ancestors).

        A node whose Full KV is already being backed up joins that copy (its
        own lease, no job; settled by the same ack). Returns the backup
        ticket id, or None when there is nothing to back up (already on
        host) or no host room.
        """
        full = self._components.full
        if node.parent is None or not full.on_device(node) or full.on_host(node):
            return None
        if self._write_back:
            chain = [] if backup_in_flight(full.pins(node)) else [node]
        else:
            chain = self.unbacked_chain(node)
        if not chain:
            copy = self._copy_in_flight(node)
            return self._join(node, copy) if copy is not None else None
        return self.back_up_chain(chain)

    def _copy_in_flight(self, node: Node) -> Borrowed[BackupTicket] | None:
        """The live backup whose copy moves `node`'s Full KV (its lease pins the node), if any."""
        for owner in owned_by(self._components.full.pins(node), OwnerKind.BACKUP):
            t = self._tickets.backup(owner.id)
            if t is not None and t.full is not None:
                return t
        return None

    def _join(self, node: Node, copy: Borrowed[BackupTicket]) -> int:
        """Ride on `copy`: a lease of its own over `node`, no slots, no job; settled by `copy`'s ack.

        `copy` owns the joiner from now on (closing it at the ack).
        """
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.BACKUP, tid, node.id)
        ledger = self._ledger
        t = BackupTicket(tid, ledger.epoch, node, owner)
        t.full = ledger.acquire(Full, owner=owner, pins=(self._components.full.pin_set(node),))
        t.full_start = node.start
        t.copy = copy
        c = self._counters
        c.backups += 1
        c.backup_joins += 1
        if copy.joiners is None:
            copy.joiners = []
        copy.joiners.append(t)
        return tid

    def back_up_victim(self, need: BackupNeed) -> int | None:
        """Start the backup an eviction victim needs; its ticket id, or None when nothing moves."""
        if need.full:
            return self.back_up_chain([need.node])
        return self.back_up_aux(need.node, need.swa, need.mamba)

    def unbacked_chain(self, node: Node) -> list[Node]:
        """`node` and its ancestors up to the first one backed up (or being backed up), root first."""
        full = self._components.full
        dev = full.dev
        host = full.host_col
        pins = full.pin_sets
        chain: list[Node] = []
        x = node
        while (
            x.parent is not None
            and host[x.slot] is None
            and dev[x.slot] is not None
            and not backup_in_flight(pins.get(x.slot))
        ):
            chain.append(x)
            x = x.parent
        chain.reverse()
        return chain

    def back_up_chain(self, chain: list[Node]) -> int | None:
        """Back up a contiguous root-first chain (every node device-resident, none backed)."""
        if not chain:
            return None
        c = self._counters
        comps = self._components
        evictor = self._evictor
        full = comps.full
        swa = comps.swa
        mamba = comps.mamba
        src = full.gather_device(chain)
        host = evictor.alloc_host(FULL, len(src))
        if host is None:
            c.backups_refused += 1
            return None
        copies = [CopyOp(Full, Tier.DEVICE, Tier.HOST, src, host)]
        swa_nodes: list[Node] = []
        segs: list[HostSegment] = []
        if comps.has_swa:
            sdev = swa.dev
            shost = swa.host_col
            swa_nodes = [x for x in chain if sdev[x.slot] is not None and shost[x.slot] is None]
            if swa_nodes:
                ssrc = swa.gather_device(swa_nodes)
                sdst = evictor.alloc_host(SWA_IDX, len(ssrc))
                if sdst is None:
                    swa_nodes = []
                else:
                    copies.append(CopyOp(SWA, Tier.DEVICE, Tier.HOST, ssrc, sdst))
                    k = 0
                    for x in swa_nodes:
                        w = (x.end - x.start) // self._ps
                        segs.append((x.start, sdst[k : k + w]))
                        k += w
        mamba_nodes: list[tuple[Node, int]] = []
        if comps.has_mamba:
            mdev = mamba.dev
            mhost = mamba.host_col
            want = [x for x in chain if mdev[x.slot] >= 0 and mhost[x.slot] < 0]
            if want:
                mdst = evictor.alloc_host(MAMBA, len(want))
                if mdst is not None:
                    msrc = [mdev[x.slot] for x in want]
                    mamba_nodes = list(zip(want, mdst))
                    copies.append(CopyOp(Mamba, Tier.DEVICE, Tier.HOST, msrc, mdst))
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.BACKUP, tid, chain[-1].id)
        ledger = self._ledger
        t = BackupTicket(tid, ledger.epoch, chain[-1], owner)
        t.full = ledger.acquire(Full, owner=owner, pins=tuple(full.pin_set(x) for x in chain))
        if swa_nodes:
            t.swa = ledger.acquire(SWA, owner=owner, pins=tuple(swa.pin_set(x) for x in swa_nodes))
        if mamba_nodes:
            t.mamba = ledger.acquire(
                Mamba, owner=owner, pins=tuple(mamba.pin_set(x) for x, _ in mamba_nodes)
            )
        t.full_start = chain[0].start
        t.full_dst = host
        t.swa_segments = segs
        t.mamba_slots = mamba_nodes
        job = TransferJob(tid, t.generation, JobKind.BACKUP, tuple(copies))
        t.job = job
        self._tickets.add(t)
        c.backups += 1
        c.backup_pages += len(src)
        self._engine.submit(job)
        return tid

    def back_up_aux(self, node: Node, swa: bool, mamba: bool) -> int | None:
        """Back up `node`'s device-only SWA pages and/or Mamba state.

        Only the named components whose host copy is missing move; Full stays
        as it is. None when nothing moves (no host room could be made).
        """
        evictor = self._evictor
        comps = self._components
        copies: list[CopyOp] = []
        segs: list[HostSegment] = []
        mamba_slots: list[tuple[Node, int]] = []
        ds = comps.swa.device_slots(node) if swa and comps.has_swa else None
        if ds is not None and comps.swa.host_slots(node) is None:
            sdst = evictor.alloc_host(SWA_IDX, len(ds))
            if sdst is not None:
                copies.append(CopyOp(SWA, Tier.DEVICE, Tier.HOST, list(ds), sdst))
                segs.append((node.start, sdst))
        dm = comps.mamba.device_state(node) if mamba and comps.has_mamba else None
        if dm is not None and comps.mamba.host_state(node) is None:
            mdst = evictor.alloc_host(MAMBA, 1)
            if mdst is not None:
                copies.append(CopyOp(Mamba, Tier.DEVICE, Tier.HOST, [dm], mdst))
                mamba_slots.append((node, mdst[0]))
        c = self._counters
        if not copies:
            c.backups_refused += 1
            return None
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.BACKUP, tid, node.id)
        ledger = self._ledger
        t = BackupTicket(tid, ledger.epoch, node, owner)
        if segs:
            t.swa = ledger.acquire(SWA, owner=owner, pins=(comps.swa.pin_set(node),))
        if mamba_slots:
            t.mamba = ledger.acquire(Mamba, owner=owner, pins=(comps.mamba.pin_set(node),))
        t.swa_segments = segs
        t.mamba_slots = mamba_slots
        job = TransferJob(tid, t.generation, JobKind.BACKUP, tuple(copies))
        t.job = job
        self._tickets.add(t)
        c.backups += 1
        c.aux_backups += 1
        self._engine.submit(job)
        return tid

    def back_up_new_aux(self, x: Node) -> None:
        """Write-through of a node whose Full is on host: back up the SWA/Mamba added since."""
        comps = self._components
        sw = comps.swa
        mb = comps.mamba
        swa = (
            comps.has_swa
            and sw.device_slots(x) is not None
            and sw.host_slots(x) is None
            and not backup_in_flight(sw.pins(x))
        )
        mamba = (
            comps.has_mamba
            and mb.device_state(x) is not None
            and mb.host_state(x) is None
            and not backup_in_flight(mb.pins(x))
        )
        if swa or mamba:
            self.back_up_aux(x, swa, mamba)

    def wait(self, tickets: Collection[int]) -> None:
        """Complete the backups `tickets` now and settle only their acks.

        Acks of other jobs that the engine returns meanwhile are posted to
        `inbox` untouched: the next `poll` settles them, so an allocation never
        settles an unrelated ticket.
        """
        engine = self._engine
        engine.flush(tickets)
        sink: list[Completion] = []
        for ack in engine.poll():
            if ack.ticket in tickets:
                if not self.on_ack(ack, sink):
                    self._acks.unmatched(ack)
            else:
                self._inbox.post(ack)

    def on_ack(self, ack: Ack, out: list[Completion]) -> bool:
        """Settle the live backup `ack` names (appending its completion); False if it names none."""
        t = self._tickets.acked_backup(ack.ticket, ack.generation)
        if t is None:
            return False
        node_id = t.node.id
        riders = [(j.id, j.generation, j.node.id) for j in t.joiners or ()]
        self._acks.settling(ack, node_id)
        status = self.settle(t, ack.ok)
        out.append(Completion(ack.ticket, ack.generation, JobKind.BACKUP, status, node_id))
        for rid, rgen, rnode in riders:
            out.append(Completion(rid, rgen, JobKind.BACKUP, status, rnode))
        if ack.ok:
            self._acks.settled_ok(ack, JobKind.BACKUP, node_id, [rid for rid, _, _ in riders])
        return True

    def settle(self, t: BackupTicket, ok: bool) -> TicketStatus:
        """Publish (or, failed, free) what the backup copied; settle its joiners with the same status;
        release every lease; its final status."""
        ps = self._ps
        comps = self._components
        full = comps.full
        fh = full.host
        fs = t.full_start
        dst = t.full_dst
        fdev = full.dev
        fhost = full.host_col
        x: Node | None = t.node
        while x is not None and x.parent is not None and x.start >= fs:
            if ok:
                pages = dst[(x.start - fs) // ps : (x.end - fs) // ps]
                slot = x.slot
                if fhost[slot] is None:
                    fhost[slot] = pages
                    if fdev[slot] is not None:
                        full.note_duplicate(x)
                    elif not x.children:
                        full.lru_host.push(x)
                else:
                    fh.free(pages)
                    self._counters.backup_duplicate_pages += len(pages)
            x = x.parent
        if ok:
            if t.swa_segments:
                self._publish_swa_host(t.node, t.swa_segments)
            if t.mamba_slots:
                mamba = comps.mamba
                mh = mamba.host
                lru = mamba.lru_host
                for node, slot in t.mamba_slots:
                    if mamba.host_state(node) is None:
                        mamba.set_host_state(node, slot)
                        lru.push(node)
                    else:
                        mh.free([slot])
                        self._counters.backup_duplicate_mamba += 1
                        self._counters.mamba_duplicates += 1
            t.status = status = TicketStatus.DONE
        else:
            fh.free(dst)
            if t.swa_segments:
                sh = comps.swa.host
                for _, pages in t.swa_segments:
                    sh.free(pages)
            if t.mamba_slots:
                comps.mamba.host.free([s for _, s in t.mamba_slots])
            t.status = status = TicketStatus.FAILED
            self._counters.backups_failed += 1
        if t.joiners:
            for j in t.joiners:
                j.status = status
                if not ok:
                    self._counters.backups_failed += 1
        t.close()
        return status

    def _publish_swa_host(self, bottom: Node, segments: list[HostSegment]) -> None:
        """Give each node inside a segment its host SWA pages (or free them if it has some)."""
        swa = self._components.swa
        sh = swa.host
        lru = swa.lru_host
        shost = swa.host_col
        for x, part in segment_parts(bottom, segments, self._ps):
            if shost[x.slot] is None:
                shost[x.slot] = part
                lru.push(x)
            else:
                sh.free(part)
                self._counters.backup_duplicate_swa_pages += len(part)
