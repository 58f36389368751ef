"""`BackupScheduler`: backups (device to host) as cache-owned tickets, settled at their ack.

Each backup takes a lease per moving component over the nodes it reads and
publishes the host copies only at its ack; what moves and how it is
published is each component store's share (`backup_nodes`, `publish_host`). `wait` completes chosen backups
at once (synchronous write-back eviction) and settles only their acks.
"""

from __future__ import annotations

from collections.abc import Collection

from leases import Borrowed, LeaseLedger, Mailbox

from unicache.components.catalog import ComponentSet
from unicache.components.store import ComponentStore
from unicache.counters import CacheCounters
from unicache.ops.ack_log import AckLog
from unicache.ops.eviction import BackupNeed, Evictor
from unicache.owners import LeaseOwner, OwnerKind
from unicache.results import Completion, TicketStatus
from unicache.ticket_table import TicketTable
from unicache.tickets import BackupTicket, HostSegment
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.tree.node import Node
from unicache.tree.pins import backup_in_flight, owned_by


class BackupScheduler:
    """Starts backups of base chains and of other components' device-only data, waits for chosen
    ones, settles their acks."""

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

        A node whose base data is already being backed up joins that copy
        (its own lease, no job; settled by the same ack). Returns the backup
        ticket id, or None when there is nothing to back up (already on
        host) or no host room.
        """
        base = self._components.base
        if node.parent is None or not base.on_device(node) or base.on_host(node):
            return None
        if self._write_back:
            chain = [] if backup_in_flight(base.pins(node)) else [node]
        else:
            chain = self.unbacked_chain(node)
        if not chain:
            copy = self._copy_in_flight(node)
            return self._join(node, copy) if copy is not None else None
        return self.back_up_chain(chain)

    def _copy_in_flight(self, node: Node) -> Borrowed[BackupTicket] | None:
        """The live backup whose copy moves `node`'s base data (its lease pins the node), if any."""
        base = self._components.base
        for owner in owned_by(base.pins(node), OwnerKind.BACKUP):
            t = self._tickets.backup(owner.id)
            if t is not None and t.leases[base.component_index] is not None:
                return t
        return None

    def _join(self, node: Node, copy: Borrowed[BackupTicket]) -> int:
        """Ride on `copy`: a lease of its own over `node`, no slots, no job; settled by `copy`'s ack.

        `copy` owns the joiner from now on (closing it at the ack).
        """
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.BACKUP, tid, node.id)
        ledger = self._ledger
        comps = self._components
        base = comps.base
        t = BackupTicket(tid, ledger.epoch, node, owner, comps.span)
        t.leases[base.component_index] = ledger.acquire(base.component_marker, owner=owner, pins=(base.pin_set(node),))
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
        if need.chain:
            return self.back_up_chain([need.node])
        return self.back_up_aux(need.node, need.mask)

    def unbacked_chain(self, node: Node) -> list[Node]:
        """`node` and its ancestors up to the first one backed up (or being backed up), root first."""
        base = self._components.base
        dev = base.dev
        host = base.host_col
        pins = base.pin_sets
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
        """Back up a contiguous root-first chain (every node device-resident, none backed), with every
        other component's device-only data on it that host room allows."""
        if not chain:
            return None
        c = self._counters
        comps = self._components
        evictor = self._evictor
        base = comps.base
        src = base.gather_device(chain)
        host = evictor.alloc_host(base.component_index, len(src))
        if host is None:
            c.backups_refused += 1
            return None
        copies = [CopyOp(base.component_marker, Tier.DEVICE, Tier.HOST, src, host)]
        parts: list[tuple[ComponentStore, list[Node], list[HostSegment]]] = [
            (base, chain, base.host_segments(chain, host))
        ]
        for store in comps.aux:
            nodes = store.backup_nodes(chain)
            if nodes:
                slots = store.gather_device(nodes)
                dst = evictor.alloc_host(store.component_index, len(slots))
                if dst is not None:
                    copies.append(CopyOp(store.component_marker, Tier.DEVICE, Tier.HOST, slots, dst))
                    parts.append((store, nodes, store.host_segments(nodes, dst)))
        tid = self._submit(chain[-1], parts, copies)
        c.backup_pages += len(src)
        return tid

    def _submit(
        self, bottom: Node, parts: list[tuple[ComponentStore, list[Node], list[HostSegment]]],
        copies: list[CopyOp],
    ) -> int:
        """Issue the backup ticket of `parts` (each store's nodes and host segments), one lease per
        store, and submit its job."""
        tid = self._tickets.issue()
        owner = LeaseOwner(OwnerKind.BACKUP, tid, bottom.id)
        ledger = self._ledger
        t = BackupTicket(tid, ledger.epoch, bottom, owner, self._components.span)
        segments = t.segments
        for store, nodes, segs in parts:
            i = store.component_index
            t.leases[i] = ledger.acquire(store.component_marker, owner=owner, pins=store.pin_sets_of(nodes))
            segments[i] = segs
        job = TransferJob(tid, t.generation, JobKind.BACKUP, tuple(copies))
        t.job = job
        self._tickets.add(t)
        self._counters.backups += 1
        self._engine.submit(job)
        return tid

    def back_up_aux(self, node: Node, mask: int) -> int | None:
        """Back up `node`'s device-only data of the components whose index bit is set in `mask`.

        Only those whose host copy is missing move; the base stays as it is.
        None when nothing moves (no host room could be made).
        """
        evictor = self._evictor
        copies: list[CopyOp] = []
        parts: list[tuple[ComponentStore, list[Node], list[HostSegment]]] = []
        for store in self._components.aux:
            if mask >> store.component_index & 1 and store.device_only(node):
                nodes = [node]
                slots = store.gather_device(nodes)
                dst = evictor.alloc_host(store.component_index, len(slots))
                if dst is not None:
                    copies.append(CopyOp(store.component_marker, Tier.DEVICE, Tier.HOST, slots, dst))
                    parts.append((store, nodes, store.host_segments(nodes, dst)))
        if not copies:
            self._counters.backups_refused += 1
            return None
        tid = self._submit(node, parts, copies)
        self._counters.aux_backups += 1
        return tid

    def back_up_new_aux(self, x: Node) -> None:
        """Write-through of a node whose base data is on host: back up the other components' data added
        since (each not already being backed up)."""
        mask = 0
        for store in self._components.aux:
            if store.device_only(x) and not backup_in_flight(store.pins(x)):
                mask |= 1 << store.component_index
        if mask:
            self.back_up_aux(x, mask)

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
        c = self._counters
        bottom = t.node
        by_index = self._components.by_index
        for i, segs in enumerate(t.segments):
            if segs is None:
                continue
            store = by_index[i]
            if ok:
                dups = store.publish_host(bottom, segs)
                if dups:
                    c.count_backup_duplicates(store.component_index, dups)
            else:
                host = store.host
                for _, pages in segs:
                    host.free(pages)
        if ok:
            t.status = status = TicketStatus.DONE
        else:
            t.status = status = TicketStatus.FAILED
            c.backups_failed += 1
        if t.joiners:
            for j in t.joiners:
                j.status = status
                if not ok:
                    c.backups_failed += 1
        t.close()
        return status
