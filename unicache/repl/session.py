"""Session state: what the REPL is looking at (a live cache, a dump, or a trace replay) and what it holds.

A live session owns the lock receipts and load-back tickets its commands
created, the manual transfer engine (if any) and the data oracle. Inspection
commands read a `CrashDump` view: the loaded dump itself, or a fresh capture
of the live cache (taken once per command), so every read-only command works
the same on both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from leases import takes_from
from unicache.dump.schema import JSON, CrashDump, JSONObject
from unicache.engine.interrupt import StopFlag
from unicache.repl.errors import NeedsLiveCacheError, UnknownNameError
from unicache.repl.refs import parse_node, resolve_node

if TYPE_CHECKING:
    from unicache.cache import UniCache
    from unicache.config import CacheConfig
    from unicache.repl.data import DataOracle
    from unicache.repl.manual_engine import ManualEngine
    from unicache.results import Completion, LoadBackResult
    from unicache.tickets import LoadBackTicket, LockReceipt
    from unicache.tree.node import Node

Transfer = Literal["immediate", "manual"]


@dataclass(frozen=True, slots=True)
class StepReport:
    """What one engine step did (trace mode) or which ack a fresh-mode step delivered."""

    step: int
    detail: JSONObject


class Driver:
    """Something that advances a live cache one step at a time (`step`, `run until`).

    The fresh-mode driver delivers the oldest held ack; the trace driver runs
    one engine step. `step()` returns None when there is nothing left to do.
    """

    name = "driver"
    owns_cache = False

    def step(self) -> StepReport | None:
        raise NotImplementedError

    def data_check(self) -> JSONObject | None:
        """Compare every published slot with the data's reference model; None if there is none."""
        return None

    def close(self) -> None:
        return None


class Session:
    """Everything one REPL run works on.

    `stop` is set by Ctrl-C while a command runs (`unicache.repl.interrupt`);
    `notify`, when set (interactively), is where a long command says it is
    still running.
    """

    def __init__(self) -> None:
        self.source = "no cache"
        self.cache: UniCache | None = None
        self.transfer: Transfer | None = None
        self.manual: ManualEngine | None = None
        self.dump: CrashDump | None = None
        self.dump_path: str | None = None
        self.driver: Driver | None = None
        self.oracle: DataOracle | None = None
        self.receipts: dict[int, LockReceipt] = {}
        self.tickets: dict[int, LoadBackTicket] = {}
        self.results: dict[int, LoadBackResult] = {}
        self.generations: dict[int, int] = {}
        self.aliases: dict[str, int] = {}
        self.seed: int | None = None
        self.reproduce: str | None = None
        self.quit = False
        self.stop = StopFlag()
        self.notify: Callable[[str], None] | None = None
        self.inputs: list[tuple[str, str]] = []
        """(option, path) of the files this REPL run reads (--dump, --trace, --script): never written."""
        self._view: CrashDump | None = None

    @property
    def mode(self) -> Literal["none", "fresh", "dump", "trace"]:
        if self.dump is not None:
            return "dump"
        if self.cache is None:
            return "none"
        return "trace" if self.driver is not None and self.driver.name == "trace" else "fresh"

    def live(self, command: str) -> UniCache:
        """The live cache, or `NeedsLiveCacheError` naming `command`."""
        if self.cache is None:
            raise NeedsLiveCacheError(command, self.source)
        return self.cache

    def view(self) -> CrashDump:
        """The state inspection commands read: the dump, or a capture of the live cache."""
        if self.dump is not None:
            return self.dump
        if self._view is None:
            if self.cache is None:
                raise NeedsLiveCacheError("inspect", self.source)
            from unicache.dump.writer import capture

            self._view = CrashDump.from_json(capture(self.cache, sanity=False, seed=self.seed))
        return self._view

    def invalidate(self) -> None:
        self._view = None

    def node_id(self, text: str) -> int:
        return resolve_node(self.view(), parse_node(text), self.aliases)

    def live_node(self, command: str, text: str) -> Node:
        cache = self.live(command)
        node_id = self.node_id(text)
        return cache.node(node_id)

    def receipt(self, receipt_id: int) -> LockReceipt:
        r = self.receipts.pop(receipt_id, None)
        if r is None:
            held = ", ".join(f"R{i}" for i in self.receipts) or "none"
            raise UnknownNameError("receipt", f"R{receipt_id}", f"not held by this session (held: {held})")
        return r

    def start_fresh(self, config: CacheConfig, transfer: Transfer) -> None:
        """Replace whatever the session had with a new empty cache."""
        from unicache.cache import UniCache
        from unicache.repl.data import DataOracle
        from unicache.repl.manual_engine import ManualEngine

        cache = UniCache(config, ManualEngine() if transfer == "manual" else None, clock=time.monotonic)
        self.close()
        self.cache = cache
        self.transfer = transfer
        self.manual = cache.engine if isinstance(cache.engine, ManualEngine) else None
        self.oracle = DataOracle(config)
        self.driver = FreshDriver(self)
        self.source = f"a fresh cache ({'+'.join(c.__name__ for c in config.components)}, {transfer} transfers)"

    def open_dump(self, path: str) -> CrashDump:
        from unicache.dump.loader import load_dump

        dump = load_dump(path)
        self.close()
        self.dump = dump
        self.dump_path = path
        self.source = f"dump {path}"
        return dump

    def attach(self, cache: UniCache, driver: Driver, source: str) -> None:
        """Adopt a live cache driven by someone else (trace mode)."""
        self.close()
        self.cache = cache
        self.driver = driver
        self.transfer = None
        self.manual = None
        self.source = source

    def settle(self) -> list[Completion]:
        """After a live command: collect acks the engine already has, consume settled tickets."""
        cache = self.cache
        if cache is None:
            return []
        done = cache.poll() if self.driver is None or self.driver.name != "trace" else []
        self.sweep()
        return done

    @takes_from("tickets")
    def sweep(self) -> list[LoadBackResult]:
        """Consume every held load-back ticket that has settled; remember its result."""
        from unicache.results import TicketStatus

        out: list[LoadBackResult] = []
        for tid in [t for t, x in self.tickets.items() if x.status is not TicketStatus.IN_FLIGHT]:
            result = self.tickets.pop(tid).result()
            self.results[tid] = result
            out.append(result)
        return out

    @takes_from("tickets")
    def _abandon_tickets(self) -> None:
        """Give up every ticket still held (in flight); the cache settles each when its copy completes."""
        while self.tickets:
            _, t = self.tickets.popitem()
            t.abandon()

    def close(self) -> None:
        """Give back everything the session holds so no lease outlives it, then drop the cache.

        Receipts are unlocked and tickets still in flight abandoned before a
        trace driver closes the cache it owns, so a lock taken at the prompt
        does not outlive the session.
        """
        cache = self.cache
        driver = self.driver
        self.cache = None
        self.driver = None
        self.dump = None
        self.dump_path = None
        self._view = None
        self.oracle = None
        self.aliases.clear()
        self.generations.clear()
        self.results.clear()
        if cache is None:  # a dump, or nothing: receipts and tickets are made only on a live cache
            assert not self.receipts and not self.tickets, "session holds receipts or tickets without a cache"
            if driver is not None:
                driver.close()
            return
        while self.receipts:
            _, r = self.receipts.popitem()
            cache.unlock(r)
        if driver is not None and driver.owns_cache:
            self.sweep()
            self._abandon_tickets()
            driver.close()
            return
        if driver is not None:
            driver.close()
        cache.reset()
        self.sweep()
        self._abandon_tickets()
        manual = self.manual
        if manual is not None:
            for job in list(manual.jobs.values()):
                cache.deliver(manual.take(job.ticket, ok=False, detail="session closed"))
        else:
            cache.engine.flush()
            cache.poll()
        cache.engine.close()
        self.manual = None


class FreshDriver(Driver):
    """Fresh-mode stepping: each step delivers the oldest held, not withheld, transfer ack."""

    name = "fresh"

    def __init__(self, session: Session) -> None:
        self.session = session

    def data_check(self) -> JSONObject | None:
        s = self.session
        if s.cache is None or s.oracle is None:
            return None
        checked, bad = s.oracle.verify(s.cache)
        mismatches: list[JSON] = [
            {"node": m.node, "component": m.component, "tier": m.tier, "detail": m.detail} for m in bad
        ]
        return {"checked": checked, "mismatches": mismatches}

    def step(self) -> StepReport | None:
        s = self.session
        cache = s.cache
        manual = s.manual
        if cache is None:
            return None
        if manual is None:
            done = cache.poll()
            if not done:
                return None
            cache.ledger.step += 1
            return StepReport(cache.ledger.step, {"acks": [completion_json(c) for c in done]})
        ticket = manual.next_ready()
        if ticket is None:
            return None
        cache.ledger.step += 1
        ack = manual.take(ticket)
        return StepReport(cache.ledger.step, {"acks": [deliver_json(cache, ack.ticket, ack.generation, ack.ok,
                                                                    lambda: cache.deliver(ack))]})


def completion_json(c: Completion) -> JSONObject:
    return {
        "ticket": c.ticket,
        "generation": c.generation,
        "ok": c.status.value == "done",
        "kind": c.kind.value,
        "status": c.status.value,
        "node": c.anchor_id,
    }


def deliver_json(
    cache: UniCache, ticket: int, generation: int, ok: bool, deliver: Callable[[], Completion | None]
) -> JSONObject:
    """Deliver one ack and describe what the cache made of it (settled, stale or duplicate)."""
    before_stale = cache.counters.stale_acks
    done = deliver()
    out: JSONObject = {"ticket": ticket, "generation": generation, "ok": ok}
    if done is not None:
        out.update(completion_json(done))
        out["ok"] = ok
    else:
        out["status"] = "stale" if cache.counters.stale_acks > before_stale else "duplicate"
        out["kind"] = None
        out["node"] = None
    return out
