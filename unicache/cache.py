"""`UniCache`: the unified hierarchical radix prefix cache whose every pin is a lease.

The facade composes the owners of the cache's state and operations (see
docs/architecture.md): the tree, the component stores, the ticket table,
the evictor, the backup scheduler, device room, load-backs, inserts,
locks and acks. Each public method checks the calling thread and its
arguments (and, where it applies, capacity) before it delegates, so a
refused call changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import count
from typing import TYPE_CHECKING

from leases import Borrowed, LeaseLedger, Mailbox

from unicache.components.catalog import ComponentSet
from unicache.components.store import ComponentStore
from unicache.config import CacheConfig
from unicache.counters import CacheCounters
from unicache.errors import (
    ForeignObjectError,
    InvalidArgumentError,
    TicketNotLiveError,
    UnknownNodeError,
    UnknownTicketError,
)
from unicache.introspect import (
    NodeInfo,
    QuarantineInfo,
    TicketInfo,
    dump_state,
    node_info,
    quarantine_info,
    ticket_info,
)
from unicache.markers import FULL, MAMBA, SWA_IDX, Component, ComponentIndex, Full
from unicache.ops.ack_log import AckLog
from unicache.ops.acks import AckRouter
from unicache.ops.backup import BackupScheduler
from unicache.ops.blocked import BlockLog
from unicache.ops.eviction import Evictor
from unicache.ops.host_eviction import HostEvictor
from unicache.ops.insert import Inserter
from unicache.ops.load_back import LoadBacks
from unicache.ops.locks import Locks
from unicache.ops.match import Matcher
from unicache.ops.reclaim import DuplicateReclaimer
from unicache.ops.removal import NodeRemoval
from unicache.ops.reset import Resetter
from unicache.ops.room import DeviceRoom
from unicache.ops.slots import free_lent, path_pages
from unicache.ops.splits import SplitCarrier
from unicache.ops.timeouts import TimeOuts
from unicache.pools.pools import PoolSet
from unicache.reasons import ReasonLog
from unicache.results import Completion, InsertResult, MatchResult, TicketStatus, TimedOut
from unicache.sanity import SanityError, SanityReport, sanity_check
from unicache.ticket_table import QuarantineRecord, TicketTable
from unicache.tickets import LoadBackTicket, LockReceipt, Ticket
from unicache.transfer.base import Ack, Tier, TransferEngine
from unicache.transfer.immediate import ImmediateEngine
from unicache.tree.keys import encode_tokens
from unicache.tree.node import Node
from unicache.tree.pins import covered
from unicache.tree.radix import RadixTree

if TYPE_CHECKING:
    import torch

__all__ = ["QuarantineRecord", "UniCache"]


class UniCache:
    """Full / SWA / Mamba KV on device and host tiers, in one paged radix tree.

    Every pin is a lease of the cache's `LeaseLedger`: lock receipts, load-back
    tickets and backup tickets each own one lease per component they cover,
    and every covered node holds that lease in its component's `PinSet`.
    Eviction and reclaim consult the pin sets; nothing else pins. The cache
    runs on one thread (the ledger's): every public operation called from
    another raises `WrongThreadError` before it changes anything; acks from
    other threads go through `inbox`.

    `clock` (seconds, e.g. `time.monotonic`; tests pass a fake one) is the
    ledger's: it stamps every lease's acquisition and times its hold, for
    metrics and the lease watchdog (`unicache.metrics`, `leases.LeaseWatchdog`).
    """

    def __init__(
        self,
        config: CacheConfig,
        engine: TransferEngine | None = None,
        *,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        ledger = self.ledger = LeaseLedger(
            config.ledger_name, strict=config.strict, debug=config.debug, history=config.history,
            clock=clock,
        )
        self.pools = PoolSet(config)
        self.engine: TransferEngine = engine if engine is not None else ImmediateEngine()
        self.engine.attach(self.pools)
        counters = self.counters = CacheCounters()
        reasons = self.reasons = ReasonLog()
        """Why the newest refusal or no-op happened, and counts of every reason."""
        self.inbox: Mailbox[Ack] = Mailbox(ledger)
        name = config.ledger_name
        ps = config.page_size
        window = config.swa_window or 0
        write_back = config.write_policy == "write_back"
        comps = self.components = ComponentSet(config, self.pools)
        """Every component's store (`by_index`, `configured`, and the typed `full`/`swa`/`mamba`)."""
        self.stores: tuple[ComponentStore, ...] = comps.configured
        """The configured components, highest eviction priority first."""
        tickets = self.ticket_table = TicketTable()
        splits = SplitCarrier(ledger, counters, comps)
        tree = self._tree = RadixTree(
            ps, count(1), owner=self, on_split=splits.on_split, token_bytes=config.token_bytes
        )
        comps.attach(tree)
        removal = NodeRemoval(tree, comps)
        blocks = BlockLog(comps, counters, reasons, ledger)
        reclaimer = self._reclaimer = DuplicateReclaimer(comps, counters, reasons, ledger)
        host = HostEvictor(comps, counters, removal, reclaimer, blocks, write_back)
        evictor = self.evictor = Evictor(comps, counters, removal, blocks, host, write_back)
        acks = AckLog(ledger, counters, reasons, tickets, name)
        backups = self.backups = BackupScheduler(
            comps, tickets, ledger, self.engine, self.inbox, counters, acks, evictor, ps, write_back
        )
        room = self.room = DeviceRoom(
            comps, evictor, backups, tickets, counters, reasons, config.sync_write_back
        )
        load_backs = self._load_backs = LoadBacks(
            tree, comps, room, tickets, ledger, self.engine, counters, reasons, acks, ps, window
        )
        self._acks = AckRouter(self.engine, self.inbox, tickets, load_backs, backups, self.pools, ledger, acks)
        self._inserter = Inserter(
            tree, comps, room, backups, self.pools, counters, reasons, ps, write_back,
            config.write_through_threshold,
        )
        self._matcher = Matcher(tree, comps, counters, ps, max(1, config.load_back_threshold))
        self._locks = Locks(tree, comps, ledger, counters, reasons, name)
        self._resetter = Resetter(ledger, tickets, self.pools, tree, comps, removal, counters)
        self._timeouts = TimeOuts(tickets, self.pools, ledger, counters)

    def __repr__(self) -> str:
        comps = "+".join(c.__name__ for c in self.config.components)
        return (
            f"<UniCache {self.config.ledger_name!r} {comps} ps={self.config.page_size} "
            f"epoch={self.epoch} nodes={self._tree.size} in_flight={len(self.ticket_table)}>"
        )

    @property
    def epoch(self) -> int:
        return self.ledger.epoch

    @property
    def root(self) -> Node:
        """The root of the current epoch's tree (a reset starts a new one)."""
        return self._tree.root

    def _check_node(self, node: Node) -> None:
        if type(node) is not Node:
            raise InvalidArgumentError(f"expected a Node of this cache, got {type(node).__name__}")
        if node.tree.owner is not self:
            owner = node.tree.owner
            name = owner.config.ledger_name if isinstance(owner, UniCache) else str(owner)
            raise ForeignObjectError("node", node.id, self.config.ledger_name, name)
        if not node.slot:
            raise UnknownNodeError(node.id, "is not a live node of this cache (removed or reset)")

    def _check_count(self, op: str, component: type, n: int) -> ComponentIndex:
        """The index of enabled `component`; `n` must be an int >= 0."""
        i = self.components.index(component)
        if type(n) is not int or n < 0:
            raise InvalidArgumentError(
                f"{op}({component.__name__}, {n!r}): n must be an int >= 0, not {type(n).__name__}"
            )
        return i

    def match_prefix(self, tokens: Sequence[int]) -> MatchResult:
        """Longest cached prefix of `tokens` (whole pages), on device and after a load-back."""
        self.ledger.check_thread("match_prefix")
        return self._matcher.match_prefix(tokens)

    def alloc_device(self, component: type, n: int) -> list[int] | None:
        """`n` device pages (Full/SWA) or Mamba slots for a request, evicting on shortfall.

        None when even eviction cannot make room (what is left is pinned,
        quarantined or under in-flight copies; a request larger than the pool
        less its quarantine evicts nothing): counted per component
        (`alloc_refused_*`; a Mamba slot also as `mamba_skipped`) and noted as
        a `NO_DEVICE_ROOM` reason. The slots belong to the caller until it
        donates them to `insert` or hands them back with `free_device`.
        """
        self.ledger.check_thread("alloc_device")
        i = self._check_count("alloc_device", component, n)
        return self.room.alloc_lent(i, n)

    def free_device(self, component: type, slots: Sequence[int]) -> None:
        """Hand request-owned device slots back (from `alloc_device`, not donated)."""
        self.ledger.check_thread("free_device")
        i = self.components.index(component)
        free_lent(self.components.by_index[i].device, slots)

    def write_slots(
        self, component: type, slots: Sequence[int], data: torch.Tensor, tier: Tier = Tier.DEVICE
    ) -> None:
        """Store rows into a pool (tests and the engine's reference model)."""
        self.ledger.check_thread("write_slots")
        self.components.index(component)
        self.pools.write(component, tier, slots, data)

    def read_slots(self, component: type, slots: Sequence[int], tier: Tier = Tier.DEVICE) -> torch.Tensor:
        """A CPU copy of rows of a pool."""
        self.components.index(component)
        return self.pools.read(component, tier, slots)

    def lent_slots(self, component: Component) -> set[int]:
        """Device slots currently owned by requests (allocated, not yet donated or freed)."""
        return set(self.components.by_index[self.components.index(component)].device.lent())

    def path_pages(self, node: Node, component: type = Full, tier: Tier = Tier.DEVICE) -> list[int]:
        """The pages (Full/SWA) of the whole path ending at `node`, root first, on one tier.

        Raises `InvalidArgumentError` if a node of the path lacks them (e.g. a
        host-only node asked for device pages, or an SWA tombstone).
        """
        self._check_node(node)
        i = self.components.index(component)
        if i == MAMBA:
            raise InvalidArgumentError("path_pages: Mamba has one state per node, not pages")
        return path_pages(node, self.components.by_index[i], tier)

    def lock(self, node: Node) -> LockReceipt:
        """Lock the path ending at `node` (its device-resident part) for a running request.

        A path with nothing on device gives a 0-token receipt and notes a
        `HOST_ONLY` (or `ROOT`) reason on `reasons`.
        """
        self.ledger.check_thread("lock")
        self._check_node(node)
        return self._locks.lock(node)

    def unlock(self, receipt: LockReceipt) -> None:
        """Release exactly what `lock` took; a second unlock raises `DoubleReleaseError`."""
        self.ledger.check_thread("unlock")
        self._locks.unlock(receipt)

    def insert(
        self,
        tokens: Sequence[int],
        full_slots: Sequence[int],
        *,
        start: int = 0,
        swa_slots: Sequence[int] | None = None,
        mamba_slot: int | None = None,
        mamba_donate: bool = True,
    ) -> InsertResult:
        """Cache a computed sequence; every slot passed moves to the cache.

        `tokens[:start]` must already be on device along the tree path (the
        request's locked prefix); `full_slots`/`swa_slots` are the request's
        pages for `tokens[start:]`. See docs/cache.md for the Mamba modes.
        Bad arguments, or pages the request does not own, raise before
        anything changes.
        """
        self.ledger.check_thread("insert")
        tw = self._tree.token_bytes
        tb = encode_tokens(tokens, tw)
        comps = self.components
        pages: list[list[int] | None] = [None] * comps.span
        pages[FULL] = list(full_slots)
        if comps.has_swa:
            if swa_slots is None:
                raise InvalidArgumentError("insert: SWA is enabled; swa_slots must give its pages")
            pages[SWA_IDX] = list(swa_slots)
        elif swa_slots is not None:
            raise InvalidArgumentError("insert: swa_slots given but SWA is not enabled")
        ins = self._inserter
        ins.take_request_slots(len(tb) // tw, start, pages, comps.mamba, mamba_slot)
        return ins.insert(tb, start, pages, comps.mamba, mamba_slot, mamba_donate)

    def load_back(self, anchor: Node) -> LoadBackTicket | None:
        """Start moving what `anchor` needs from host to device; None if nothing can/need move.

        One lease per component that moves data is taken *before* device
        pages are allocated, so the eviction that allocation may run never
        touches what this load-back reads nor the anchor's path. A load-back
        of an anchor whose copy is in flight joins it. Every None notes its
        `Reason` (root, nothing to move, missing state, no device room) on
        `reasons`.
        """
        self.ledger.check_thread("load_back")
        self._check_node(anchor)
        return self._load_backs.load_back(anchor)

    def backup(self, node: Node) -> int | None:
        """Start a backup of `node` to host (write_through: with its unbacked ancestors).

        Returns the backup ticket id, or None when there is nothing to back up
        (already backed, already in flight) or no host room.
        """
        self.ledger.check_thread("backup")
        self._check_node(node)
        return self.backups.backup(node)

    def poll(self) -> list[Completion]:
        """Collect the engine's acks (and any posted to `inbox`) and settle their tickets."""
        self.ledger.check_thread("poll")
        return self._acks.poll()

    def deliver(self, ack: Ack) -> Completion | None:
        """Process one ack now (REPL, tests, engines that hand acks over directly).

        Returns the completion of the ticket the ack names (the load-backs that
        joined its copy settle with it; `poll` lists those too).
        """
        self.ledger.check_thread("deliver")
        if not isinstance(ack, Ack):
            raise InvalidArgumentError(f"deliver: expected an Ack, got {type(ack).__name__}")
        return self._acks.deliver(ack)

    def time_out(self, ticket: int) -> TimedOut:
        """Give up on live ticket `ticket`, whose ack is overdue (it may be lost, or come much later).

        Its leases, and those of every load-back or backup that joined its
        copy, are released now, and they all settle as `TIMED_OUT` (a
        load-back's caller then recomputes; a backed-up node stays unbacked).
        Every row the copy may still read or write stays quarantined until
        the late ack, which is counted (`late_acks`) and settles nothing
        else; if it never comes the rows stay quarantined (counted in
        `timed_out_slots`, listed by `quarantine()`). A ticket a reset
        quarantined can be timed out too: its revoked leases are released
        now instead of at its stale ack. Raises (changing nothing)
        `WrongThreadError`, `InvalidArgumentError` for a non-int,
        `UnknownTicketError` for an id never issued, and `TicketNotLiveError`
        for a ticket that is not waiting for its ack: settled, already timed
        out, or a joiner (time out the ticket whose copy it joined).
        """
        self.ledger.check_thread("time_out")
        if type(ticket) is not int:
            raise InvalidArgumentError(f"time_out({ticket!r}): the ticket must be an int id")
        table = self.ticket_table
        if not table.was_issued(ticket):
            raise UnknownTicketError(
                ticket, self.ledger.epoch,
                f"was never issued by cache {self.config.ledger_name!r} (last ticket {table.last_issued})",
            )
        q = table.quarantined_ticket(ticket)
        if table.get(ticket) is None and (q is None or q.status is TicketStatus.TIMED_OUT):
            host = table.joined(ticket)
            if host is not None:
                why = f"joined the copy of ticket {host.id}; time out ticket {host.id} (it settles both)"
            elif q is not None:
                why = "already timed out; its slots wait for its late ack"
            else:
                why = "already settled by its ack (or a joiner that settled with its copy)"
            raise TicketNotLiveError(ticket, why)
        return self._timeouts.time_out(ticket)

    def in_flight(self) -> int:
        """Tickets of the current epoch waiting for their ack."""
        return len(self.ticket_table)

    def evict_device(self, component: type, n: int) -> int:
        """Free at least `n` device pages (Full/SWA) or slots (Mamba) if unpinned data allows."""
        self.ledger.check_thread("evict_device")
        i = self._check_count("evict_device", component, n)
        return self.room.evict(i, n)

    def evict_host(self, component: type, n: int) -> int:
        """Free at least `n` host pages/slots of `component` if unpinned data allows."""
        self.ledger.check_thread("evict_host")
        i = self._check_count("evict_host", component, n)
        return self.evictor.evict_host(i, n)

    def reclaim_host_duplicates(self, n: int) -> int:
        """Free up to `n`+ Full host pages whose data is also on device (see `DuplicateReclaimer`)."""
        self.ledger.check_thread("reclaim_host_duplicates")
        if type(n) is not int or n < 0:
            raise InvalidArgumentError(f"reclaim_host_duplicates({n!r}): n must be an int >= 0")
        return self._reclaimer.reclaim(n)

    def reset(self) -> int:
        """Drop every cached prefix and start a new epoch; returns the new epoch.

        Every lease is revoked (they leave all pin sets). Slots an unfinished
        copy may read or write are quarantined until that copy's (now stale)
        ack; every other slot the tree or a ticket held is freed. Request-owned
        slots are left to their requests.
        """
        self.ledger.check_thread("reset")
        return self._resetter.reset()

    def sanity_check(self) -> SanityReport:
        """Recompute every derived count and pin set from the live leases; list violations."""
        return sanity_check(self)

    def check(self) -> None:
        """`sanity_check()`, raising `SanityError` when anything is off."""
        report = self.sanity_check()
        if not report.ok:
            raise SanityError(report)

    def nodes(self) -> Iterator[Node]:
        """Every live node, pre-order, root first."""
        return iter(self._tree)

    def node(self, node_id: int) -> Node:
        for x in self._tree:
            if x.id == node_id:
                return x
        raise UnknownNodeError(node_id, f"is not a live node of cache {self.config.ledger_name!r}")

    @property
    def node_count(self) -> int:
        return self._tree.size

    @property
    def clock(self) -> int:
        """The access clock the eviction order is kept by (it goes on across resets)."""
        return self._tree.clock

    def live_tickets(self) -> list[Borrowed[Ticket]]:
        """Tickets of the current epoch waiting for their ack, oldest first.

        A load-back that joined another's copy follows the one it joined.
        """
        return self.ticket_table.live()

    def quarantine_records(self) -> list[QuarantineRecord]:
        return self.ticket_table.quarantined()

    def lease_scope(self, lease_id: int) -> list[Node] | None:
        """The nodes a live lease of this cache pins (the holders of its pin sets); None if not live."""
        lease = self.ledger.get(lease_id)
        return covered(lease) if lease is not None else None

    def node_info(self, node: Node) -> NodeInfo:
        """Residency and pins of one node, per component."""
        return node_info(self, node)

    def tickets(self) -> list[TicketInfo]:
        """Snapshots of the live tickets."""
        return [ticket_info(t) for t in self.live_tickets()]

    def quarantine(self) -> list[QuarantineInfo]:
        """Snapshots of the tickets whose slots wait for a stale ack."""
        return [quarantine_info(q) for q in self.ticket_table.quarantined()]

    def lease_coverage(self) -> dict[int, tuple[str, str, list[int]]]:
        """Live lease id -> (component, owner, ids of the nodes it pins)."""
        out: dict[int, tuple[str, str, list[int]]] = {}
        for lease in self.ledger.live():
            nodes = [x.id for x in covered(lease)]
            out[lease.id] = (lease.component.__name__, str(lease.owner), nodes)
        return out

    def dump_state(self) -> dict[str, object]:
        """A JSON-friendly snapshot: config, tree with pins, tickets, pools, counters, events."""
        return dump_state(self)
