"""Metric families read from the counters a cache and its ledgers keep anyway: no prometheus here.

A `Family` is one metric (name, type, help, label names, samples), named by
Prometheus conventions: ``unicache_`` prefix, the unit in the name
(``_seconds``, ``_rows``), counters named without ``_total`` (the exporter
adds it), label values from bounded sets (component, tier, owner kind,
operation, reason, error class). Builders read state only; call them on the
thread that owns the cache (the replay loop, the SGLang scheduler), and hand
the snapshot to the exporter (`unicache.metrics.exporter`), which serves it
from another thread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from leases import LeaseLedger
from leases.errors import raised_counts
from leases.watchdog import LeaseWatchdog, owner_kind

if TYPE_CHECKING:
    from unicache.cache import UniCache

Kind = Literal["counter", "gauge", "histogram"]
Labels = tuple[str, ...]


@dataclass(frozen=True, slots=True)
class HistogramSample:
    """One labelled histogram: cumulative (upper bound, count) pairs ending at inf, and the sum."""

    labels: Labels
    buckets: tuple[tuple[float, int], ...]
    total: float


@dataclass(slots=True)
class Family:
    """One metric and its samples (a counter's name has no ``_total``; the exporter appends it)."""

    name: str
    kind: Kind
    help: str
    labelnames: Labels = ()
    samples: list[tuple[Labels, float]] = field(default_factory=list)
    histograms: list[HistogramSample] = field(default_factory=list)

    def add(self, labels: Labels, value: float) -> None:
        self.samples.append((labels, float(value)))

    def value(self, *labels: str) -> float:
        """The sample with these label values (0.0 when absent), for tests and reports."""
        for got, value in self.samples:
            if got == labels:
                return value
        return 0.0


def merge(*groups: Iterable[Family]) -> list[Family]:
    """Families of one name from several sources (two ledgers) as one family with every sample."""
    out: dict[str, Family] = {}
    for group in groups:
        for fam in group:
            have = out.get(fam.name)
            if have is None:
                out[fam.name] = Family(fam.name, fam.kind, fam.help, fam.labelnames, list(fam.samples),
                                       list(fam.histograms))
            else:
                have.samples.extend(fam.samples)
                have.histograms.extend(fam.histograms)
    return list(out.values())


def ledger_families(ledger: LeaseLedger, *, components: Iterable[str] = (),
                    watchdog: LeaseWatchdog | None = None) -> list[Family]:
    """Lease metrics of one ledger, labelled by ``ledger`` (its name) and component.

    `components` are the names always present (zero when none is live), so a
    dashboard sees every configured component. Ages and hold times need the
    ledger's clock; without one the age gauges are 0 and the histogram empty.
    `watchdog` adds the overdue gauges and the report counter.
    """
    name = ledger.name
    live = Family("unicache_leases_live", "gauge",
                  "Leases held now, by component and the kind of owner (lock, load_back, backup, ...).",
                  ("ledger", "component", "owner_kind"))
    leases = ledger.live()
    counts = Counter((lease.component.__name__.lower(), owner_kind(lease.owner)) for lease in leases)
    for comp in components:
        if not any(c == comp for c, _ in counts):
            counts[(comp, "none")] = 0
    for (comp, kind), n in sorted(counts.items()):
        live.add((name, comp, kind), n)
    fams = [live]
    for metric, value, text in (
        ("unicache_leases_acquired", ledger.acquired, "Leases issued."),
        ("unicache_leases_released", ledger.released, "Leases released by their owner while current."),
        ("unicache_leases_revoked", ledger.revoked, "Leases revoked by an epoch advance (a reset)."),
        ("unicache_leases_stale_settled", ledger.stale, "Revoked leases their owner released afterwards."),
        ("unicache_leases_leaked", ledger.leaked, "Leases whose last reference died while held."),
    ):
        fam = Family(metric, "counter", text, ("ledger",))
        fam.add((name,), value)
        fams.append(fam)
    epoch = Family("unicache_ledger_epoch", "gauge", "The ledger's epoch (advanced by each reset).", ("ledger",))
    epoch.add((name,), ledger.epoch)
    fams.append(epoch)
    hold = Family("unicache_lease_hold_seconds", "histogram",
                  "How long leases were held, observed when released (needs the ledger's clock).",
                  ("ledger", "component"))
    for comp, times in sorted(ledger.hold_times().items()):
        hold.histograms.append(HistogramSample((name, comp.lower()), tuple(times.cumulative()), times.total))
    fams.append(hold)
    fams.extend(_oldest(ledger))
    if watchdog is not None:
        fams.extend(_watchdog(watchdog))
    return fams


def _oldest(ledger: LeaseLedger) -> list[Family]:
    age = Family("unicache_oldest_lease_age_seconds", "gauge",
                 "Age of the longest-held live lease (0 when none), labelled by its component and owner kind.",
                 ("ledger", "component", "owner_kind"))
    ident = Family("unicache_oldest_lease_id", "gauge",
                   "Id of the longest-held live lease (0 when none): `lease ID` in the REPL on a dump.",
                   ("ledger",))
    owner = Family("unicache_oldest_lease_owner_id", "gauge",
                   "Id of the lock receipt or ticket holding the longest-held live lease (0 when none).",
                   ("ledger",))
    lease = ledger.oldest()
    clock = ledger.clock
    if lease is None:
        age.add((ledger.name, "none", "none"), 0.0)
        ident.add((ledger.name,), 0)
        owner.add((ledger.name,), 0)
    else:
        now = clock() if clock is not None else 0.0
        age.add((ledger.name, lease.component.__name__.lower(), owner_kind(lease.owner)),
                now - lease.acquired_at if clock is not None else 0.0)
        ident.add((ledger.name,), lease.id)
        owner_id = getattr(lease.owner, "id", 0)
        owner.add((ledger.name,), owner_id if type(owner_id) is int else 0)
    return [age, ident, owner]


def _watchdog(watchdog: LeaseWatchdog) -> list[Family]:
    name = watchdog.ledger.name
    over = Family("unicache_leases_overdue", "gauge",
                  "Live leases held longer than the watchdog's age limit at its latest check (never released "
                  "by force).", ("ledger", "component"))
    counts = Counter(entry.component.lower() for entry in watchdog.last)
    for comp, n in sorted(counts.items()):
        over.add((name, comp), n)
    if not counts:
        over.add((name, "none"), 0)
    reports = Family("unicache_lease_watchdog_reports", "counter",
                     "Overdue leases the watchdog logged (each lease once).", ("ledger",))
    reports.add((name,), watchdog.reported)
    limit = Family("unicache_lease_age_limit_seconds", "gauge", "The watchdog's age limit.", ("ledger",))
    limit.add((name,), watchdog.max_age)
    return [over, reports, limit]


def error_families() -> list[Family]:
    """Typed misuse errors built in this process, by class (counted on the error path only)."""
    fam = Family("unicache_errors", "counter",
                 "Typed errors raised (misuse of the API, lease errors), by error class.", ("error",))
    for error, n in sorted(raised_counts().items()):
        fam.add((error,), n)
    return [fam]


_ACKS = (("ok", "acks"), ("stale", "stale_acks"), ("duplicate", "duplicate_acks"),
         ("failed", "failed_acks"), ("late", "late_acks"))


def cache_families(cache: UniCache, *, watchdog: LeaseWatchdog | None = None) -> list[Family]:
    """Every metric of one `UniCache`: its ledger's, its counters', its pools', typed errors."""
    c = cache.counters
    comps = [comp.__name__.lower() for comp in cache.config.components]
    fams = ledger_families(cache.ledger, components=comps, watchdog=watchdog)
    acks = Family("unicache_acks", "counter", "Transfer acks by outcome (stale: an older epoch's; duplicate: "
                  "of a settled ticket; late: after its ticket timed out).", ("outcome",))
    for outcome, attr in _ACKS:
        acks.add((outcome,), getattr(c, attr))
    refusals = Family("unicache_refusals", "counter",
                      "Refusals, skips and no-ops by operation, reason and component (the cache's ReasonLog).",
                      ("op", "reason", "component"))
    for key, n in cache.reasons.counts().items():
        op, _, rest = key.partition(":")
        reason, _, comp = rest.partition(":")
        refusals.add((op, reason, comp or "none"), n)
    joins = Family("unicache_joins", "counter", "Copies already in flight that a new request joined.", ("op",))
    joins.add(("load_back",), c.load_back_joins)
    joins.add(("backup",), c.backup_joins)
    ops = Family("unicache_operations", "counter", "Cache operations by kind.", ("op",))
    for op, value in (("match", c.matches), ("insert", c.inserts), ("lock", c.locks), ("load_back", c.load_backs),
                      ("backup", c.backups), ("device_eviction", c.device_evictions),
                      ("host_eviction", c.host_evictions), ("reset", c.resets),
                      ("timed_out_ticket", c.timed_out_tickets)):
        ops.add((op,), value)
    skipped = Family("unicache_mamba_states_skipped", "counter",
                     "Mamba states not cached for want of a device slot (all pinned): skipped, counted, never a "
                     "crash.")
    skipped.add((), c.mamba_skipped)
    used = Family("unicache_pool_used_rows", "gauge", "Pool rows (pages or state slots) in use, by component and "
                  "tier.", ("component", "tier"))
    capacity = Family("unicache_pool_capacity_rows", "gauge", "Pool rows, by component and tier.",
                      ("component", "tier"))
    quarantined = Family("unicache_pool_quarantined_rows", "gauge",
                         "Rows held until an in-flight copy's (stale or late) ack, by component and tier.",
                         ("component", "tier"))
    for pool, stats in cache.pools.stats().items():
        comp, _, tier = pool.partition(".")
        labels = (comp.lower(), tier)
        used.add(labels, stats.used)
        capacity.add(labels, stats.capacity)
        quarantined.add(labels, stats.quarantined)
    in_flight = Family("unicache_transfers_in_flight", "gauge", "Tickets (load-backs, backups) awaiting an ack.")
    in_flight.add((), cache.in_flight())
    fams += [acks, refusals, joins, ops, skipped, used, capacity, quarantined, in_flight]
    fams += error_families()
    return fams
