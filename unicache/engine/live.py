"""Watching a running replay: metrics snapshots, the lease watchdog and a dump on SIGUSR1.

`LiveHooks` runs between two engine steps (where the cache is consistent):
it checks the lease watchdog, publishes a metrics snapshot at most every
`interval` seconds, and writes a live dump when `SIGUSR1` has arrived
(`unicache.dump.signal.dump_on_signal`), then lets the run carry on. Ages and intervals use one
clock, `time.monotonic` by default; tests inject a fake one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from leases import LeaseWatchdog, OverdueLease

from unicache.dump.signal import DumpRequest, dump_on_signal
from unicache.engine.crashdump import write_live_dump
from unicache.engine.scheduler import Scheduler
from unicache.metrics.exporter import MetricsPublisher, SnapshotCollector
from unicache.metrics.families import Family, cache_families
from unicache.outputs import OutputPathError, OutputWriteError

__all__ = ["DumpRequest", "LiveHooks", "dump_on_signal", "engine_families"]


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class LiveHooks:
    """What a replay does between steps when it is watched (see the module docstring).

    `collector` is the metrics endpoint's (None: no metrics); `lease_age_limit`
    turns the watchdog on (seconds); `dumps` is the signal's request (None: no
    live dumps), written into `dump_dir`. `say` prints one line (stderr).
    """

    def __init__(self, *, collector: SnapshotCollector | None = None, lease_age_limit: float | None = None,
                 dumps: DumpRequest | None = None, dump_dir: Path = Path("unicache-crash"),
                 seed: int | None = None, reproduce: str | None = None,
                 clock: Callable[[], float] = time.monotonic, interval: float = 1.0,
                 say: Callable[[str], None] = _say, command: str = "replay") -> None:
        self.collector = collector
        self.lease_age_limit = lease_age_limit
        self.dumps = dumps
        self.dump_dir = dump_dir
        self.seed = seed
        self.reproduce = reproduce
        self.clock = clock
        self.interval = interval
        self.say = say
        self.command = command
        self.watchdog: LeaseWatchdog | None = None
        self.publisher: MetricsPublisher | None = None
        self.extra_families: Callable[[Scheduler], list[Family]] | None = None

    @property
    def timed(self) -> bool:
        """Whether the cache's ledger needs the clock (metrics ages and hold times, the watchdog)."""
        return self.collector is not None or self.lease_age_limit is not None

    def attach(self, sched: Scheduler) -> None:
        """Start watching `sched` (built with `clock` on its ledger when `timed`)."""
        if self.lease_age_limit is not None:
            self.watchdog = LeaseWatchdog(sched.cache.ledger, self.lease_age_limit,
                                          log=lambda line: self.say(f"unicache {self.command}: {line}"))
        if self.collector is not None:
            self.publisher = MetricsPublisher(lambda: self.families(sched), self.collector, clock=self.clock,
                                              interval=self.interval)
            self.publisher.publish()

    def families(self, sched: Scheduler) -> list[Family]:
        """The metrics of `sched`'s cache, the watchdog's and the engine's progress."""
        fams = cache_families(sched.cache, watchdog=self.watchdog)
        fams += engine_families(sched)
        return fams

    def after_step(self, sched: Scheduler) -> None:
        if self.watchdog is not None:
            self.watchdog.check()
        if self.publisher is not None:
            self.publisher.maybe_publish()
        if self.dumps is not None and self.dumps.take():
            self.dump(sched)

    def finish(self, sched: Scheduler) -> None:
        """The run ended: a last watchdog check and snapshot (what a scrape after the run sees)."""
        if self.watchdog is not None:
            self.watchdog.check()
        if self.publisher is not None:
            self.publisher.publish()

    def overdue(self) -> list[OverdueLease]:
        return self.watchdog.last if self.watchdog is not None else []

    def dump(self, sched: Scheduler) -> Path | None:
        """Write a live dump now; a dump that cannot be written is one line, and the run goes on."""
        more: dict[str, object] = {}
        if self.watchdog is not None:
            more["lease_age_limit"] = self.watchdog.max_age
            more["overdue_leases"] = [entry.to_json() for entry in self.watchdog.check()]
        try:
            path = write_live_dump(sched, self.dump_dir, seed=self.seed, reproduce=self.reproduce, more=more)
        except (OutputPathError, OutputWriteError) as exc:
            self.say(f"unicache {self.command}: live dump not written: {exc}")
            return None
        if self.dumps is not None:
            self.dumps.written.append(path)
        self.say(f"unicache {self.command}: live dump written to {path} (step {sched.step_no}; "
                 f"open it with unicache repl --dump)")
        return path


def engine_families(sched: Scheduler) -> list[Family]:
    """The engine's progress: requests finished and steps taken."""
    finished = Family("unicache_engine_requests_finished", "counter", "Requests the engine finished.")
    finished.add((), sched.stats.finished)
    steps = Family("unicache_engine_steps", "counter", "Engine steps taken.")
    steps.add((), sched.step_no)
    return [finished, steps]
