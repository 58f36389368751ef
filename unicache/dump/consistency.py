"""Cross-record consistency of a loaded crash dump: what a well-formed dump may still contradict.

A dump that loads is navigable (ids unique, links and pins resolve, see
:meth:`unicache.dump.schema.CrashDump.from_json`), but it records the state of
a cache that may have been broken, so its records can disagree. Each finding
is one :class:`DumpViolation` whose ``detail`` names the ids involved; the
REPL's ``check`` lists them and the dump is then not clean. A check that
needs a section the writer could not capture (``capture_errors``) is skipped,
since its record is a placeholder.

Only facts every correct cache keeps are checked: live leases and tickets
are of the current epoch (a reset revokes and quarantines everything
older), a ticket's leases are live and carry its owner, a lease whose owner
names a ticket belongs to that live ticket, a lock receipt holds at most one
lease per component, every held job is for a live or quarantined ticket of
its generation and kind, the ledger's counters add up
(``acquired = released + live + revoked + leaked while held``, ids are never
reused, so no id exceeds ``acquired``), pool counts cover the slots the dump
names and pool sizes are the configuration's, a live copy writes rows no one
else holds, and the flight recorder's sequence numbers increase.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

from unicache.dump.decode import JSONObject
from unicache.dump.records import (
    TIERS,
    CaptureError,
    DumpEvent,
    DumpLease,
    DumpLedger,
    DumpNode,
    DumpPool,
    DumpQuarantine,
    DumpSanity,
    DumpTicket,
    DumpTransfer,
    DumpViolation,
)


class LoadedDump(Protocol):
    """What the checks read of a loaded dump: the fields of `unicache.dump.schema.CrashDump`, declared
    here so that the document module can import this one."""

    @property
    def config(self) -> JSONObject: ...
    @property
    def components(self) -> tuple[str, ...]: ...
    @property
    def epoch(self) -> int: ...
    @property
    def nodes(self) -> dict[int, DumpNode]: ...
    @property
    def pools(self) -> dict[str, DumpPool]: ...
    @property
    def leases(self) -> dict[int, DumpLease]: ...
    @property
    def ledger(self) -> DumpLedger: ...
    @property
    def tickets(self) -> tuple[DumpTicket, ...]: ...
    @property
    def transfer(self) -> DumpTransfer | None: ...
    @property
    def quarantine(self) -> tuple[DumpQuarantine, ...]: ...
    @property
    def events(self) -> tuple[DumpEvent, ...]: ...
    @property
    def sanity(self) -> DumpSanity | None: ...
    @property
    def capture_errors(self) -> tuple[CaptureError, ...]: ...

_OWNER = re.compile(r"(lock|backup|load_back)#(\d+)(?:@\d+)?")
_ENDED = frozenset(("release", "revoke", "stale", "leak"))


def _owner(text: str) -> tuple[str, int] | None:
    """(kind, id) of a lease owner written by the cache (`lock#2`, `backup#5@3`), None for any other text."""
    m = _OWNER.fullmatch(text)
    return None if m is None else (m.group(1), int(m.group(2)))


def _ids(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in sorted(values))


def _leases_named(values: Iterable[int]) -> str:
    """"leases 3, 7" (sorted), or "none"."""
    ids = _ids(values)
    return f"leases {ids}" if ids else "none"


class _Findings:
    """The findings of one check run, in order."""

    __slots__ = ("out",)

    def __init__(self) -> None:
        self.out: list[DumpViolation] = []

    def add(self, kind: str, detail: str, *, node: int | None = None, component: str | None = None,
            lease: int | None = None) -> None:
        self.out.append(DumpViolation(kind, node, component, lease, detail))


def inconsistencies(dump: LoadedDump) -> list[DumpViolation]:
    """Every cross-record inconsistency of a loaded dump (empty for a dump of a correct cache)."""
    failed = {c.section for c in dump.capture_errors}
    f = _Findings()
    _slots(dump, f)
    _leases(dump, f, failed)
    if not failed & {"tickets", "leases"}:
        _tickets(dump, f)
    if not failed & {"tickets", "transfer", "quarantine"}:
        _jobs(dump, f)
    if not failed & {"ledger", "leases", "epoch"}:
        _ledger(dump, f)
    if not failed & {"pools", "quarantine", "tickets", "tree"}:
        _pools(dump, f)
        _copies(dump, f)
    if not failed & {"config", "components", "pools"}:
        _configured(dump, f)
    if "events" not in failed:
        _events(dump, f, failed)
    _tree(dump, f)
    _sanity(dump, f)
    return f.out


def _slots(dump: LoadedDump, f: _Findings) -> None:
    for name in dump.components:
        for tier in TIERS:
            holder: dict[int, int] = {}
            for node in dump.nodes.values():
                res = node.components.get(name)
                for s in () if res is None else res.slots(tier):
                    other = holder.setdefault(s, node.id)
                    if other != node.id:
                        f.add("shared-slot", f"{name}.{tier} slot {s} is held by nodes {other} and {node.id}",
                              node=node.id, component=name)


def _leases(dump: LoadedDump, f: _Findings, failed: set[str]) -> None:
    pinned: dict[int, list[int]] = {lid: [] for lid in dump.leases}
    for node in dump.nodes.values():
        for comp, res in node.components.items():
            for lid in res.pins:
                pinned[lid].append(node.id)
            repeated = sorted({lid for lid in res.pins if res.pins.count(lid) > 1})
            for lid in repeated:
                f.add("pin-repeated", f"node {node.id}: the {comp} pin set lists lease {lid} more than once",
                      node=node.id, component=comp, lease=lid)
    receipts: dict[tuple[str, int], DumpLease] = {}
    for lease in dump.leases.values():
        lid, comp = lease.id, lease.component
        held = sorted(set(pinned[lid]))
        if held != sorted(lease.nodes):
            f.add("lease-nodes", f"lease {lid} lists nodes [{_ids(lease.nodes)}] but is held by the pin sets of "
                                 f"[{_ids(held)}]", component=comp, lease=lid)
        if lease.scope is not None and sorted(lease.scope) != held:
            f.add("lease-scope", f"lease {lid} records scope [{_ids(lease.scope)}] but is held by the pin sets of "
                                 f"[{_ids(held)}]", component=comp, lease=lid)
        if "epoch" not in failed and lease.generation != dump.epoch:
            f.add("lease-generation", f"lease {lid} is of generation {lease.generation}, but live leases are of "
                                      f"the dump's epoch {dump.epoch}", component=comp, lease=lid)
        owner = _owner(lease.owner)
        if owner is not None and owner[0] == "lock":
            other = receipts.setdefault((comp, owner[1]), lease)
            if other is not lease:
                f.add("receipt-leases", f"lock receipt {owner[1]} ({lease.owner}) holds two {comp} leases, "
                                        f"{other.id} and {lid}", component=comp, lease=lid)


def _tickets(dump: LoadedDump, f: _Findings) -> None:
    live = {t.id: t for t in dump.tickets}
    quarantined = {q.ticket for q in dump.quarantine}
    for t in dump.tickets:
        tid = t.id
        if t.node not in dump.nodes:
            f.add("ticket-node", f"ticket {tid} ({t.kind}) is anchored at node {t.node}, which is not in the tree",
                  node=t.node)
        if t.generation != dump.epoch:
            f.add("ticket-generation", f"ticket {tid} is of generation {t.generation}, but live tickets are of the "
                                       f"dump's epoch {dump.epoch}")
        if _owner(t.owner) != (t.kind, tid):
            f.add("ticket-owner", f"ticket {tid} ({t.kind}) has owner {t.owner!r}, which does not name it")
        if tid in quarantined:
            f.add("ticket-quarantined", f"ticket {tid} is both live and in the quarantine")
        for comp, lid in t.leases.items():
            lease = dump.leases.get(lid)
            if lease is None:
                f.add("ticket-lease", f"ticket {tid} holds {comp} lease {lid}, which is not among the live leases",
                      component=comp, lease=lid)
            elif lease.component != comp:
                f.add("ticket-lease", f"ticket {tid} holds lease {lid} as its {comp} lease, but it is a "
                                      f"{lease.component} lease", component=comp, lease=lid)
            elif lease.owner != t.owner:
                f.add("ticket-lease", f"ticket {tid} (owner {t.owner!r}) holds lease {lid}, whose owner is "
                                      f"{lease.owner!r}", component=comp, lease=lid)
    for lease in dump.leases.values():
        owner = _owner(lease.owner)
        if owner is None or owner[0] == "lock":
            continue
        holder = live.get(owner[1])
        if holder is None:
            f.add("lease-ticket", f"lease {lease.id} is owned by {lease.owner!r}, but ticket {owner[1]} is not live",
                  component=lease.component, lease=lease.id)
        elif holder.leases.get(lease.component) != lease.id:
            f.add("lease-ticket", f"lease {lease.id} is owned by ticket {holder.id} ({lease.owner!r}), which does not "
                                  f"hold it", component=lease.component, lease=lease.id)


def _jobs(dump: LoadedDump, f: _Findings) -> None:
    transfer = dump.transfer
    if transfer is None:
        return
    if transfer.pending < len(transfer.jobs):
        f.add("transfer-pending", f"the transfer engine counts {transfer.pending} pending job(s) or ack(s) but "
                                  f"lists {len(transfer.jobs)} held job(s) (tickets "
                                  f"{_ids(j.ticket for j in transfer.jobs)})")
    known: dict[int, tuple[int, str]] = {q.ticket: (q.generation, q.kind) for q in dump.quarantine}
    known.update({t.id: (t.generation, t.kind) for t in dump.tickets})
    for job in transfer.jobs:
        record = known.get(job.ticket)
        if record is None:
            f.add("job-ticket", f"the transfer engine holds a {job.kind} job for ticket {job.ticket}, which is "
                                f"neither live nor quarantined")
        elif record != (job.generation, job.kind):
            f.add("job-ticket", f"the held job for ticket {job.ticket} is a {job.kind} of generation "
                                f"{job.generation}, but the ticket is a {record[1]} of generation {record[0]}")
    for q in dump.quarantine:
        if q.generation > dump.epoch:
            f.add("quarantine-generation", f"quarantined ticket {q.ticket} is of generation {q.generation}, after "
                                           f"the dump's epoch {dump.epoch}")


def _ledger(dump: LoadedDump, f: _Findings) -> None:
    ledger = dump.ledger
    c = ledger.counters
    if ledger.epoch != dump.epoch:
        f.add("ledger-epoch", f"the ledger is at epoch {ledger.epoch} but the dump records epoch {dump.epoch}")
    if c.get("epoch", ledger.epoch) != ledger.epoch:
        f.add("ledger-epoch", f"the ledger's epoch counter is {c['epoch']} but its epoch is {ledger.epoch}")
    name = dump.config.get("ledger_name")
    if isinstance(name, str) and name != ledger.name:
        f.add("ledger-name", f"the ledger is named {ledger.name!r} but the configuration names {name!r}")
    live = c.get("live")
    if live is not None and live != len(dump.leases):
        f.add("ledger-live", f"the ledger counts {live} live lease(s) but the dump lists {len(dump.leases)} "
                             f"({_leases_named(dump.leases)})")
    leaked = c.get("leaked")
    if leaked is not None and leaked != len(ledger.leaks):
        f.add("ledger-leaks", f"the ledger counts {leaked} leak(s) but lists {len(ledger.leaks)} "
                              f"({_leases_named(x.id for x in ledger.leaks)})")
    acquired, released, revoked = c.get("acquired"), c.get("released"), c.get("revoked")
    if None not in (acquired, released, revoked, live, leaked):
        assert acquired is not None and released is not None and revoked is not None
        assert live is not None and leaked is not None
        held_leaks = acquired - released - revoked - live
        if not 0 <= held_leaks <= leaked:
            f.add("ledger-counts", f"acquired {acquired} is not released {released} + live {live} + revoked "
                                   f"{revoked} + at most leaked {leaked}")
    stale = c.get("stale")
    if stale is not None and revoked is not None and stale > revoked:
        f.add("ledger-counts", f"{stale} stale release(s) but only {revoked} lease(s) were ever revoked")
    if acquired is not None:
        for lid in sorted(dump.leases):
            if lid > acquired:
                f.add("lease-id", f"lease {lid} has an id above the {acquired} leases the ledger issued",
                      component=dump.leases[lid].component, lease=lid)
        for leak in ledger.leaks:
            if leak.id > acquired:
                f.add("lease-id", f"leaked lease {leak.id} has an id above the {acquired} leases the ledger issued",
                      lease=leak.id)
    for leak in ledger.leaks:
        if leak.id in dump.leases:
            f.add("leak-live", f"lease {leak.id} is listed both as leaked and as live", lease=leak.id)
        if leak.generation > dump.epoch:
            f.add("leak-generation", f"leaked lease {leak.id} is of generation {leak.generation}, after the dump's "
                                     f"epoch {dump.epoch}", lease=leak.id)


def _pools(dump: LoadedDump, f: _Findings) -> None:
    named: dict[str, set[int]] = {name: set() for name in dump.pools}
    quarantined: dict[str, set[int]] = {name: set() for name in dump.pools}
    for node in dump.nodes.values():
        for comp, res in node.components.items():
            for tier in TIERS:
                named.get(f"{comp}.{tier}", set()).update(res.slots(tier))
    for t in dump.tickets:
        for c in t.copies:
            named.get(f"{c.component}.{c.src_tier}", set()).update(c.src)
            named.get(f"{c.component}.{c.dst_tier}", set()).update(c.dst)
    for q in dump.quarantine:
        for name, slots in q.slots.items():
            named.get(name, set()).update(slots)
            quarantined.get(name, set()).update(slots)
    for name, pool in dump.pools.items():
        if len(quarantined[name]) != pool.quarantined:
            f.add("pool-quarantined", f"pool {name} counts {pool.quarantined} quarantined row(s) but the quarantine "
                                      f"lists {len(quarantined[name])}")
        if len(named[name]) > pool.used:
            f.add("pool-used", f"pool {name} counts {pool.used} used row(s) but nodes, copies and the quarantine "
                               f"hold {len(named[name])}")


def _copies(dump: LoadedDump, f: _Findings) -> None:
    """A live copy's destination rows were allocated for it alone: no node, quarantine or other copy holds them."""
    holders: dict[tuple[str, int], str] = {}
    for node in dump.nodes.values():
        for comp, res in node.components.items():
            for tier in TIERS:
                for s in res.slots(tier):
                    holders.setdefault((f"{comp}.{tier}", s), f"node {node.id}")
    for q in dump.quarantine:
        for name, slots in q.slots.items():
            for s in slots:
                holders.setdefault((name, s), f"the quarantine of ticket {q.ticket}")
    for t in dump.tickets:
        for c in t.copies:
            pool = f"{c.component}.{c.dst_tier}"
            for s in c.dst:
                other = holders.setdefault((pool, s), f"the copy of ticket {t.id}")
                if other != f"the copy of ticket {t.id}":
                    f.add("copy-destination", f"ticket {t.id} copies into {pool} row {s}, which {other} holds",
                          component=c.component)


def _config_int(config: JSONObject, key: str) -> int | None:
    value = config.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _configured(dump: LoadedDump, f: _Findings) -> None:
    """The components and pool sizes the configuration fixes are those the dump records.

    A key the configuration does not record decides nothing; host sizes are
    compared only where given explicitly (otherwise a ratio of the device's).
    """
    config = dump.config
    implied = ["full"]
    for name, key, enabled in (("swa", "swa_window", config.get("swa_window") is not None),
                               ("mamba", "mamba", config.get("mamba") is True)):
        if enabled if key in config else name in dump.components:
            implied.append(name)
    if list(dump.components) != implied:
        f.add("config-components", f"the dump enables {', '.join(dump.components)} but its configuration "
                                   f"enables {', '.join(implied)}")
    page = _config_int(config, "page_size") or 1
    sizes: dict[str, int] = {}
    device = _config_int(config, "device_tokens")
    if device is not None:
        sizes["full.device"] = device // page
        sizes["swa.device"] = (_config_int(config, "swa_device_tokens") or device) // page
    for pool, key, unit in (("full.host", "host_tokens", page), ("swa.host", "swa_host_tokens", page),
                            ("mamba.device", "mamba_device_slots", 1), ("mamba.host", "mamba_host_slots", 1)):
        value = _config_int(config, key)
        if value is not None:
            sizes[pool] = value // unit
    for name, stats in dump.pools.items():
        want = sizes.get(name)
        if want is not None and stats.capacity != want:
            f.add("pool-capacity", f"pool {name} has {stats.capacity} rows but the configuration gives it {want}",
                  component=name.partition(".")[0])


def _events(dump: LoadedDump, f: _Findings, failed: set[str]) -> None:
    last = 0
    acquired = None if "ledger" in failed else dump.ledger.counters.get("acquired")
    for e in dump.events:
        if e.seq <= last:
            f.add("event-order", f"event {e.seq} follows event {last}: sequence numbers must increase")
        last = max(last, e.seq)
        if "ledger" not in failed and e.step > dump.ledger.step:
            f.add("event-step", f"event {e.seq} is at step {e.step}, after the ledger's step {dump.ledger.step}")
        if "epoch" not in failed and e.generation > dump.epoch:
            f.add("event-generation", f"event {e.seq} is of generation {e.generation}, after the dump's epoch "
                                      f"{dump.epoch}")
        if e.lease is None:
            continue
        if acquired is not None and e.lease > acquired:
            f.add("lease-id", f"event {e.seq} names lease {e.lease}, above the {acquired} leases the ledger issued",
                  lease=e.lease)
        lease = dump.leases.get(e.lease)
        if lease is None:
            continue
        if e.kind in _ENDED:
            f.add("event-lease", f"event {e.seq} ({e.kind}) ended lease {e.lease}, which the dump lists as live",
                  component=lease.component, lease=lease.id)
        elif e.kind == "acquire" and (e.component, e.owner, e.generation) != (
                lease.component, lease.owner, lease.generation):
            f.add("event-lease", f"event {e.seq} acquired lease {e.lease} as {e.component} for {e.owner!r} at "
                                 f"generation {e.generation}, but the live lease is {lease.component} for "
                                 f"{lease.owner!r} at generation {lease.generation}",
                  component=lease.component, lease=lease.id)


def _tree(dump: LoadedDump, f: _Findings) -> None:
    for node in dump.nodes.values():
        if node.parent is None:
            if node.start != 0:
                f.add("node-span", f"root node {node.id} starts at {node.start}, not 0", node=node.id)
            continue
        parent = dump.nodes[node.parent]
        if node.start != parent.end:
            f.add("node-span", f"node {node.id} starts at token {node.start} but its parent {parent.id} ends at "
                               f"{parent.end}", node=node.id)


def _sanity(dump: LoadedDump, f: _Findings) -> None:
    sanity = dump.sanity
    if sanity is not None and sanity.ok == bool(sanity.violations):
        f.add("sanity-record", f"the recorded sanity check says ok={sanity.ok} with {len(sanity.violations)} "
                               f"violation(s)")


