"""`AckRouter`: the acks the engine returns (or that were posted to `inbox`), each to its ticket's owner."""

from __future__ import annotations

from leases import LeaseLedger, Mailbox

from unicache.ops.ack_log import AckLog
from unicache.ops.backup import BackupScheduler
from unicache.ops.load_back import LoadBacks
from unicache.pools.pools import PoolSet
from unicache.results import Completion, TicketStatus
from unicache.ticket_table import TicketTable
from unicache.tickets import BackupTicket
from unicache.transfer.base import Ack, JobKind, TransferEngine


class AckRouter:
    """Settles what each ack names: a load-back (with its joiners), a backup, a quarantined ticket
    (its quarantine released: a reset's stale ack, or the late ack of a ticket that timed out), or
    counts it as stale or duplicate (`AckLog`)."""

    __slots__ = ("_engine", "_inbox", "_tickets", "_load_backs", "_backups", "_pools", "_ledger", "_acks")

    def __init__(
        self,
        engine: TransferEngine,
        inbox: Mailbox[Ack],
        tickets: TicketTable,
        load_backs: LoadBacks,
        backups: BackupScheduler,
        pools: PoolSet,
        ledger: LeaseLedger,
        acks: AckLog,
    ) -> None:
        self._engine = engine
        self._inbox = inbox
        self._tickets = tickets
        self._load_backs = load_backs
        self._backups = backups
        self._pools = pools
        self._ledger = ledger
        self._acks = acks

    def poll(self) -> list[Completion]:
        """Collect the engine's acks (and any posted to `inbox`) and settle their tickets."""
        out: list[Completion] = []
        for ack in self._engine.poll():
            self.on_ack(ack, out)
        inbox = self._inbox
        if len(inbox):
            for ack in inbox.drain():
                self.on_ack(ack, out)
        return out

    def deliver(self, ack: Ack) -> Completion | None:
        """Process one ack now; the completion of the ticket it names (its joiners settle with it)."""
        out: list[Completion] = []
        self.on_ack(ack, out)
        return out[0] if out else None

    def on_ack(self, ack: Ack, out: list[Completion]) -> None:
        """Settle what `ack` names (appending its completions to `out`), or count it as stale."""
        if self._load_backs.on_ack(ack, out):
            return
        if self._backups.on_ack(ack, out):
            return
        tid = ack.ticket
        gen = ack.generation
        qt = self._tickets.take_quarantined(tid, gen)
        if qt is None:
            self._acks.unmatched(ack)
            return
        job = qt.job
        assert job is not None, tid
        pools = self._pools
        for op in job.copies:
            pools.pool(op.component, op.src_tier).alloc.release_quarantine(op.src)
            pools.pool(op.component, op.dst_tier).alloc.release_quarantine(op.dst)
        kind = JobKind.BACKUP if type(qt) is BackupTicket else JobKind.LOAD_BACK
        if qt.status is TicketStatus.TIMED_OUT:
            self._acks.late(ack, qt.node.id)
            qt.close()
            out.append(Completion(tid, gen, kind, TicketStatus.TIMED_OUT, None))
            return
        self._acks.stale(
            ack, (qt.node.id,), f"generation {gen} < epoch {self._ledger.epoch}: quarantine released"
        )
        riders = [(j.id, j.generation) for j in qt.joiners or ()]
        qt.close()
        out.append(Completion(tid, gen, kind, TicketStatus.STALE, None))
        for rid, rgen in riders:
            out.append(Completion(rid, rgen, kind, TicketStatus.STALE, None))
