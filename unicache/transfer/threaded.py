"""`ThreadedEngine`: copies run on worker threads, which post their acks to the cache's `inbox`.

The real shape of an asynchronous engine on a machine without a GPU: a job's
copies run on a thread of a small pool, reading the source rows when that
thread gets to them, and the worker posts the job's ack to the cache's
`leases.Mailbox`. Workers touch pool rows only, never a lease, a ticket or
the tree; everything that settles a ticket happens on the cache's thread when
it polls (`poll()` drains the inbox there, so write-back eviction that
flushes its backups finds their acks). A copy that raises acks ``ok=False``.

Bind the engine to the cache's inbox after building the cache::

    engine = ThreadedEngine(workers=2)
    cache = UniCache(config, engine)
    engine.bind(cache.inbox)

`close()` waits for every copy and stops the workers.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from concurrent.futures import Future, ThreadPoolExecutor, wait

from leases import Mailbox

from unicache.errors import EngineStateError, InvalidArgumentError
from unicache.transfer.base import Ack, TransferEngine, TransferJob


class ThreadedEngine(TransferEngine):
    """Copies on a `ThreadPoolExecutor`; acks through the cache's `Mailbox` (see the module docstring)."""

    def __init__(self, workers: int = 2) -> None:
        if workers < 1:
            raise InvalidArgumentError(f"ThreadedEngine: workers must be >= 1, got {workers}")
        self.workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="unicache-transfer")
        self._inbox: Mailbox[Ack] | None = None
        self._lock = threading.Lock()
        self._running = 0
        self._futures: dict[int, list[Future[None]]] = {}
        self.copy_threads: set[int] = set()
        """Idents of the threads that ran copies (tests check none is the cache's)."""
        self.completed = 0
        self.failed = 0
        self._closed = False

    def bind(self, inbox: Mailbox[Ack]) -> None:
        """Post acks to ``inbox`` (the cache's), from the worker threads."""
        self._inbox = inbox

    def submit(self, job: TransferJob) -> None:
        if self._inbox is None or self.pools is None:
            raise EngineStateError("ThreadedEngine.submit() before attach(pools) and bind(cache.inbox)")
        if self._closed:
            raise EngineStateError(f"ThreadedEngine.submit(ticket {job.ticket}) after close()")
        with self._lock:
            self._running += 1
        self._futures.setdefault(job.ticket, []).append(self._pool.submit(self._run, job))

    def _run(self, job: TransferJob) -> None:
        pools = self.pools
        inbox = self._inbox
        assert pools is not None and inbox is not None
        try:
            for op in job.copies:
                pools.copy(op)
            ack = job.ack()
        except Exception as exc:  # a copy that died: the cache sees ok=False and drops what it moved
            ack = job.ack(ok=False, detail=f"copy failed on {threading.current_thread().name}: {exc!r}")
        with self._lock:
            self.copy_threads.add(threading.get_ident())
            if ack.ok:
                self.completed += 1
            else:
                self.failed += 1
        inbox.post(ack)
        with self._lock:
            self._running -= 1

    def poll(self) -> list[Ack]:
        """The acks the workers posted so far (drained from the inbox, on the cache's thread)."""
        self._futures = {t: fs for t, fs in self._futures.items() if not all(f.done() for f in fs)}
        inbox = self._inbox
        if inbox is None or not len(inbox):
            return []
        return inbox.drain()

    def flush(self, tickets: Collection[int] | None = None) -> None:
        """Wait until the named jobs (all when None) have run; their acks come from the next poll."""
        if tickets is None:
            futures = [f for fs in self._futures.values() for f in fs]
        else:
            futures = [f for t in tickets for f in self._futures.get(t, ())]
        if futures:
            wait(futures)

    @property
    def pending(self) -> int:
        """Jobs whose copies have not finished (their acks not yet posted)."""
        with self._lock:
            return self._running

    def close(self) -> None:
        """Wait for every copy, then stop the worker threads (idempotent)."""
        self._closed = True
        self._pool.shutdown(wait=True)
