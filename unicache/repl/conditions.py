"""Conditions for `run until` and `assert`, evaluated on a live cache or on a dump.

Event conditions (stale-ack, failed-transfer, evict-blocked, leak) compare a
counter with a baseline: the value when `run until` started, or zero for
`assert` (so `assert stale-ack` means "one happened at some point").
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from leases import PinSet

from unicache.dump.schema import CrashDump
from unicache.repl.errors import CommandSyntaxError, ConditionError, UnknownNameError
from unicache.repl.refs import parse_node, resolve_node

if TYPE_CHECKING:
    from unicache.repl.session import Session

C = TypeVar("C")

_OPS: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, ">=": operator.ge, "<=": operator.le, ">": operator.gt, "<": operator.lt,
}

HELP = """\
conditions (for 'run until' and 'assert'):
  two-components [NODE]   a node (or NODE) is pinned by leases of two or more components
  multi-pin [NODE]        a node (or NODE) is pinned by two or more leases
  shared [NODE]           a node (or NODE) is pinned by leases of two or more owners (e.g. two load-backs)
  pinned NODE [COMP...]   NODE is pinned (by each named component: full, swa, mamba)
  unpinned [NODE]         no node (or not NODE) is pinned by anything
  stale-ack               a stale or duplicate ack arrived
  failed-transfer         a copy failed (an ack with ok=false)
  evict-blocked           an eviction or reclaim candidate was skipped because it was pinned
  leak                    a lease died while held
  violation | clean       the sanity check (and, for a fresh cache, the data oracle) fails | passes
  idle                    no ticket is in flight and no transfer job is held
  step N                  the engine step reached N
  counter NAME OP N       a cache or ledger counter, tickets, jobs, nodes, live, step, or a pool's
                          POOL.used/.free/.quarantined (e.g. full.device.used), compared: == != >= <= > <"""

EVENT_COUNTERS: dict[str, tuple[str, ...]] = {
    "stale-ack": ("stale_acks", "duplicate_acks"),
    "failed-transfer": ("failed_acks",),
    "evict-blocked": ("evict_blocked", "reclaim_blocked"),
    "leak": ("leaked",),
}
NAMES = (
    "two-components", "multi-pin", "shared", "pinned", "unpinned", *EVENT_COUNTERS, "violation", "clean", "idle",
    "step", "counter",
)


def _owners(pins: PinSet[C] | None) -> list[str]:
    return [] if pins is None else [str(lease.owner) for lease in pins]


class Probe:
    """The facts conditions read, from a live session or a dump."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pins(self) -> Iterator[tuple[int, dict[str, int], set[str]]]:
        """(node id, {component: number of pinning leases}, owners) for every pinned node."""
        cache = self.session.cache
        if cache is None or self.session.dump is not None:
            view = self.session.view()
            for node in view.nodes.values():
                found = {name: len(r.pins) for name, r in node.components.items() if r.pins}
                if found:
                    yield node.id, found, {view.leases[i].owner for r in node.components.values() for i in r.pins}
            return
        for n in cache.nodes():
            counts: dict[str, int] = {}
            owners: set[str] = set()
            for store in cache.components.configured:
                name = store.name.lower()
                held = _owners(store.pins(n))
                if held:
                    counts[name] = len(held)
                    owners.update(held)
            if counts:
                yield n.id, counts, owners

    def counters(self) -> dict[str, int]:
        s = self.session
        cache = s.cache
        if cache is None or s.dump is not None:
            view = s.view()
            out = dict(view.counters)
            out.update(view.ledger.counters)
            out["tickets"] = len(view.tickets)
            out["nodes"] = len(view.nodes)
            out["jobs"] = len(view.transfer.jobs) if view.transfer is not None else 0
            out["step"] = view.ledger.step
            for name, pool in view.pools.items():
                out.update({f"{name}.used": pool.used, f"{name}.free": pool.free,
                            f"{name}.quarantined": pool.quarantined})
            return out
        out = cache.counters.as_dict()
        out.update(cache.ledger.counters())
        out["tickets"] = cache.in_flight()
        out["nodes"] = cache.node_count
        out["jobs"] = cache.engine.pending
        out["step"] = cache.ledger.step
        for name, stats in cache.pools.stats().items():
            out.update({f"{name}.used": stats.used, f"{name}.free": stats.free,
                        f"{name}.quarantined": stats.quarantined})
        return out

    def sanity_ok(self) -> bool:
        s = self.session
        cache = s.cache
        if cache is None or s.dump is not None:
            view = s.view()
            if view.revalidate():
                return False
            if view.sanity is None:
                raise ConditionError("violation/clean", "this dump recorded no sanity check, so neither can be decided")
            return view.sanity.ok
        if not cache.sanity_check().ok:
            return False
        data = s.driver.data_check() if s.driver is not None else None
        return data is None or not data.get("mismatches")

    def sanity_text(self) -> str:
        """The sanity check's and the data oracle's findings, in one line."""
        s = self.session
        cache = s.cache
        if cache is None or s.dump is not None:
            view = s.view()
            rechecked = [v.kind for v in view.revalidate()]
            n = len(rechecked)
            again = f"; re-checking the dump: {n} inconsistenc{'y' if n == 1 else 'ies'} " \
                    f"({', '.join(rechecked[:5])})" if rechecked else ""
            sanity = view.sanity
            if sanity is None:
                return "the dump recorded no sanity check" + again
            kinds = [f"{v.kind} on #{v.node}" for v in sanity.violations]
            return f"recorded check: {len(kinds)} violation(s)" + (f" ({', '.join(kinds[:5])})" if kinds else "") \
                + again
        report = cache.sanity_check()
        kinds = [f"{v.kind} on #{v.node_id}" for v in report.violations]
        data = s.driver.data_check() if s.driver is not None else None
        bad = data.get("mismatches") if data is not None else None
        mismatches = len(bad) if isinstance(bad, list) else 0
        found = f"{len(kinds)} violation(s)" + (f" ({', '.join(kinds[:5])})" if kinds else "")
        return f"{found}, {mismatches} data mismatch(es)"

    def in_flight_text(self) -> str:
        """Live tickets (with whether their job is held or withheld) and held jobs, in one line."""
        view = self.view()
        jobs = {j.ticket: j for j in view.transfer.jobs} if view.transfer is not None else {}
        parts: list[str] = []
        for t in view.tickets:
            job = jobs.get(t.id)
            state = ("job withheld: 'ack T{0}' or 'withhold T{0} --release'".format(t.id) if job is not None
                     and job.withheld else "job held" if job is not None else "no job held")
            parts.append(f"T{t.id} ({t.kind} at #{t.node}, {state})")
        orphans = [f"T{i}" for i in jobs if i not in {t.id for t in view.tickets}]
        if orphans:
            parts.append(f"jobs held for settled tickets {' '.join(orphans)}")
        return "in flight: " + "; ".join(parts) if parts else "no ticket in flight, no job held"

    def resolve(self, text: str) -> int | None:
        """The node `text` names now, or None if it names none (yet)."""
        try:
            return resolve_node(self.view(), parse_node(text), self.session.aliases)
        except UnknownNameError:
            return None

    def view(self) -> CrashDump:
        self.session.invalidate()
        return self.session.view()


@dataclass(frozen=True, slots=True)
class Condition:
    """A parsed condition; `holds(probe, baseline)` decides it."""

    text: str
    name: str
    node: str | None = None
    components: tuple[str, ...] = ()
    counter: str | None = None
    op: str | None = None
    value: int = 0

    def holds(self, probe: Probe, baseline: dict[str, int]) -> bool:
        name = self.name
        if name in ("two-components", "multi-pin", "shared", "pinned", "unpinned"):
            target = probe.resolve(self.node) if self.node is not None else None
            if self.node is not None and target is None:
                return name == "unpinned"
            for node_id, counts, owners in probe.pins():
                if target is not None and node_id != target:
                    continue
                if name == "two-components" and len(counts) >= 2:
                    return True
                if name == "multi-pin" and sum(counts.values()) >= 2:
                    return True
                if name == "shared" and len(owners) >= 2:
                    return True
                if name == "pinned" and all(c in counts for c in self.components):
                    return True
                if name == "unpinned":
                    return False
            return name == "unpinned"
        if name in EVENT_COUNTERS:
            counters = probe.counters()
            keys = EVENT_COUNTERS[name]
            return sum(counters.get(k, 0) for k in keys) > sum(baseline.get(k, 0) for k in keys)
        if name == "violation":
            return not probe.sanity_ok()
        if name == "clean":
            return probe.sanity_ok()
        counters = probe.counters()
        if name == "idle":
            return counters["tickets"] == 0 and counters["jobs"] == 0
        if name == "step":
            return counters["step"] >= self.value
        assert name == "counter" and self.counter is not None and self.op is not None
        if self.counter not in counters:
            raise CommandSyntaxError("", f"unknown counter {self.counter!r} (known: {', '.join(sorted(counters))})")
        return _OPS[self.op](counters[self.counter], self.value)


    def actual(self, probe: Probe, baseline: dict[str, int]) -> str:
        """What was found, in one line: the facts the condition read (for a failing assert or run)."""
        name = self.name
        if name in ("two-components", "multi-pin", "shared", "pinned", "unpinned"):
            target = probe.resolve(self.node) if self.node is not None else None
            if self.node is not None and target is None:
                return f"{self.node} names no node now"
            found = [_pin_text(nid, counts, owners) for nid, counts, owners in probe.pins()
                     if target is None or nid == target]
            if not found:
                return f"#{target} is not pinned" if target is not None else "no node is pinned"
            more = f" (+{len(found) - 8} more)" if len(found) > 8 else ""
            return "; ".join(found[:8]) + more
        if name in EVENT_COUNTERS:
            counters = probe.counters()
            return ", ".join(f"{k} {baseline.get(k, 0)} -> {counters.get(k, 0)}" for k in EVENT_COUNTERS[name])
        if name in ("violation", "clean"):
            return probe.sanity_text()
        if name == "idle":
            return probe.in_flight_text()
        counters = probe.counters()
        if name == "step":
            return f"step is {counters['step']}"
        assert self.counter is not None
        return f"{self.counter} is {counters.get(self.counter, 'unknown')}"


def _pin_text(node_id: int, counts: dict[str, int], owners: set[str]) -> str:
    comps = " ".join(f"{c}x{n}" for c, n in counts.items())
    return f"#{node_id} pinned by {comps} (owners {', '.join(sorted(owners))})"


def parse_condition(words: list[str]) -> Condition:
    if not words:
        raise CommandSyntaxError("", f"missing condition\n{HELP}")
    name, rest = words[0], words[1:]
    text = " ".join(words)

    def arity(lo: int, hi: int) -> None:
        if not lo <= len(rest) <= hi:
            raise CommandSyntaxError("", f"condition {name!r} takes {lo}..{hi} arguments, got {len(rest)}\n{HELP}")

    def number(word: str) -> int:
        try:
            return int(word)
        except ValueError:
            raise CommandSyntaxError("", f"condition {text!r}: {word!r} is not an integer") from None

    if name in ("two-components", "multi-pin", "shared", "unpinned"):
        arity(0, 1)
        if rest:
            parse_node(rest[0])
        return Condition(text, name, node=rest[0] if rest else None)
    if name == "pinned":
        if not rest:
            raise CommandSyntaxError("", "condition 'pinned' needs a NODE")
        parse_node(rest[0])
        comps = tuple(c.lower() for c in rest[1:])
        for c in comps:
            if c not in ("full", "swa", "mamba"):
                raise CommandSyntaxError("", f"condition 'pinned': unknown component {c!r}")
        return Condition(text, name, node=rest[0], components=comps)
    if name in EVENT_COUNTERS or name in ("violation", "clean", "idle"):
        arity(0, 0)
        return Condition(text, name)
    if name == "step":
        arity(1, 1)
        return Condition(text, name, value=number(rest[0]))
    if name == "counter":
        arity(3, 3)
        if rest[1] not in _OPS:
            raise CommandSyntaxError("", f"condition 'counter': operator {rest[1]!r} is not one of {' '.join(_OPS)}")
        return Condition(text, name, counter=rest[0], op=rest[1], value=number(rest[2]))
    raise CommandSyntaxError("", f"unknown condition {name!r}\n{HELP}")
