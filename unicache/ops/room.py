"""`DeviceRoom`: device allocation that makes room, running eviction and the backups it reports.

How allocation, the eviction pass and backups hand over to each other:

1. `alloc` / `alloc_lent` try the component's allocator; on a shortfall
   `evict(i, n)` opens a `DevicePass` (`ops/eviction.py`) for component
   `i` and drives it.
2. `DevicePass.next_victim()` pops the LRU heap and evicts victims until
   `n` slots are free (returning None) or until, under write_back, a
   victim holds data on device only. It then stops *before* touching that
   victim and returns a `BackupNeed` naming it and what it needs copied.
3. This owner hands the need to `BackupScheduler.back_up_victim`
   (`ops/backup.py`), which takes its leases and submits the copy; under
   `sync_write_back` it `wait`s for that one ticket's ack alone.
4. `DevicePass.resume(need, started, waited)` evicts the victim (its data
   is safe on host now, or its backup could not start and it is dropped),
   or holds it back while its copy is still in flight; then back to 2.
   `finish()` files held-back victims in the heap again.

Why a pass is a resumable object driven from here rather than a loop that
calls the scheduler itself: eviction runs inside allocation, and a backup
itself allocates host slots (running host eviction) and may settle acks.
Keeping the pass ignorant of backups means the eviction module imports
neither the scheduler nor the ticket table (no cycle: the scheduler
imports `BackupNeed` from eviction), a pass never re-enters itself, and
whoever owns allocation alone decides whether to wait (`sync_write_back`)
or let the victim stay until its ack and a later eviction takes it.
"""

from __future__ import annotations

from collections.abc import Callable

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.markers import ComponentIndex
from unicache.ops.backup import BackupScheduler
from unicache.ops.eviction import Evictor
from unicache.reasons import Reason, ReasonLog, no_room
from unicache.ticket_table import TicketTable


class DeviceRoom:
    """Allocates device slots (for the tree, and lent to requests), evicting on shortfall."""

    __slots__ = ("_components", "_evictor", "_backups", "_tickets", "_counters", "_reasons", "_sync",
                 "clock", "evict_ns", "evict_calls")

    def __init__(
        self,
        components: ComponentSet,
        evictor: Evictor,
        backups: BackupScheduler,
        tickets: TicketTable,
        counters: CacheCounters,
        reasons: ReasonLog,
        sync_write_back: bool,
    ) -> None:
        self._components = components
        self._evictor = evictor
        self._backups = backups
        self._tickets = tickets
        self._counters = counters
        self._reasons = reasons
        self._sync = sync_write_back
        self.clock: Callable[[], int] | None = None
        """An optional ns clock (e.g. `time.perf_counter_ns`); when set, every `evict` call adds its
        time to `evict_ns` and counts in `evict_calls` (benchmarks take eviction out of the enclosing op)."""
        self.evict_ns = 0
        self.evict_calls = 0

    def evict(self, i: ComponentIndex, n: int) -> int:
        """Free at least `n` device slots of component index `i` if unpinned data allows.

        Under write_back a victim whose data is on device only is backed up
        first; with `sync_write_back` its backup completes at once and the
        victim goes, so victims go in exact LRU order (a parent that becomes
        a leaf can be next). A victim whose backup fails is dropped; without
        `sync_write_back` it stays until its backup's ack, and a later
        eviction takes it.
        """
        clock = self.clock
        if clock is None:
            return self._evict(i, n)
        t0 = clock()
        freed = self._evict(i, n)
        self.evict_ns += clock() - t0
        self.evict_calls += 1
        return freed

    def _evict(self, i: ComponentIndex, n: int) -> int:
        if n <= 0:
            return 0
        sync = self._sync
        backups = self._backups
        p = self._evictor.device_pass(i, n)
        need = p.next_victim()
        while need is not None:
            tid = backups.back_up_victim(need)
            if tid is not None and sync:
                backups.wait((tid,))
            p.resume(need, tid is not None, sync)
            need = p.next_victim()
        return p.finish()

    def alloc(self, i: ComponentIndex, n: int) -> list[int] | None:
        """`n` device slots of component index `i` for the tree (a load-back, an insert's state copy); None
        if no room."""
        alloc = self._components.by_index[i].device
        got = alloc.alloc(n)
        if got is None:
            self.evict(i, n - alloc.free_count)
            got = alloc.alloc(n)
        return got

    def fits(self, i: ComponentIndex, n: int) -> bool:
        """Whether `n` device slots of component index `i` could ever be free at once now: at most
        the pool's capacity less its quarantined rows (eviction frees neither)."""
        alloc = self._components.by_index[i].device
        return n <= alloc.capacity - alloc.quarantined_count

    def alloc_lent(self, i: ComponentIndex, n: int) -> list[int] | None:
        """`n` device slots lent to a request, evicting on shortfall; None (counted, with its reason)
        when even eviction cannot make room. A request larger than `fits` allows evicts nothing."""
        alloc = self._components.by_index[i].device
        got = alloc.alloc_lent(n)
        if got is None:
            if self.fits(i, n):
                self.evict(i, n - alloc.free_count)
                got = alloc.alloc_lent(n)
            if got is None:
                self._refused(i, n)
        return got

    def _refused(self, i: ComponentIndex, n: int) -> None:
        self._counters.count_refused(i)
        self._reasons.note(self.no_room_reason("alloc_device", i, n, ()))

    def no_room_reason(self, op: str, i: ComponentIndex, needed: int, nodes: tuple[int, ...]) -> Reason:
        """A `NO_DEVICE_ROOM` reason for component index `i` (see `unicache.reasons.no_room`)."""
        store = self._components.by_index[i]
        return no_room(op, store.component_marker, store.device, self._tickets.live(), needed, nodes)
