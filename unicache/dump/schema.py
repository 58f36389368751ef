"""The crash-dump document (format version 1): typed records, validated from JSON, and back.

A dump is plain JSON, never code. Every record (:mod:`unicache.dump.records`)
is a frozen dataclass whose fields are the JSON keys; :func:`unicache.dump.decode.decode` reads it from
the field types (ints are never bools and stay in int64 range, floats are
finite, ids and sizes are non-negative, names come from closed sets) and the
record's ``validate`` checks what spans fields. :meth:`CrashDump.from_json`
then checks the format tag and version, the configuration's ranges, that node,
lease and ticket ids (and the tickets of quarantine entries and held jobs) are
unique, that every id the tree refers to (parents, children, pinning leases)
exists, that every component and pool a record names is enabled and that every
slot is inside its pool, raising `DumpFormatError` with the JSON path of the
first bad value. `to_json()` is the exact inverse, so
`CrashDump.from_json(d).to_json() == d` for any valid `d`.
:meth:`CrashDump.revalidate` re-runs all of that on a loaded dump and adds the
cross-record consistency findings the REPL's ``check`` reports
(:mod:`unicache.dump.consistency`): what a broken cache could have written
loads, and is reported instead of refused.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from unicache.dump.config_rules import check_config, dump_token_bytes
from unicache.dump.consistency import inconsistencies
from unicache.dump.decode import JSON, JSONObject, Record, decode, is_int, type_name
from unicache.dump.errors import DumpError, DumpFormatError, DumpVersionError
from unicache.dump.records import (
    COMPONENT,
    ID,
    RAW,
    COMPONENT_NAMES,
    TIERS,
    CaptureError,
    DumpCopy,
    DumpedError,
    DumpEvent,
    DumpJob,
    DumpLeak,
    DumpLease,
    DumpLedger,
    DumpNode,
    DumpPool,
    DumpQuarantine,
    DumpResidency,
    DumpSanity,
    DumpTicket,
    DumpTransfer,
    DumpViolation,
)

__all__ = [
    "COMPONENT_NAMES", "FORMAT", "JSON", "VERSION", "CaptureError", "CrashDump", "DumpCopy", "DumpEvent",
    "DumpJob", "DumpLeak", "DumpLease", "DumpLedger", "DumpNode", "DumpPool", "DumpQuarantine",
    "DumpResidency", "DumpSanity", "DumpTicket", "DumpTransfer", "DumpViolation", "DumpedError", "JSONObject",
]

FORMAT = "unicache-crash-dump"
VERSION = 1
@dataclass(frozen=True, slots=True)
class _Tree(Record):
    root: int = field(metadata=ID)
    nodes: tuple[DumpNode, ...] = field()


@dataclass(frozen=True, slots=True)
class _Document(Record):
    """The document exactly as written (lists where `CrashDump` indexes by id)."""

    format: str = field()
    version: int = field()
    created_at: str = field()
    producer: JSONObject = field(metadata=RAW)
    error: DumpedError | None = field()
    seed: int | None = field()
    step: int | None = field(metadata=ID)
    config: JSONObject = field(metadata=RAW)
    components: tuple[str, ...] = field(metadata=COMPONENT)
    epoch: int = field(metadata=ID)
    tree: _Tree = field()
    pools: dict[str, DumpPool] = field()
    leases: tuple[DumpLease, ...] = field()
    ledger: DumpLedger = field()
    tickets: tuple[DumpTicket, ...] = field()
    transfer: DumpTransfer | None = field()
    quarantine: tuple[DumpQuarantine, ...] = field()
    events: tuple[DumpEvent, ...] = field()
    counters: dict[str, int] = field(metadata=ID)
    sanity: DumpSanity | None = field()
    extra: JSONObject = field(metadata=RAW)
    capture_errors: tuple[CaptureError, ...] = field()


def _check_tag(data: JSON) -> None:
    if not isinstance(data, dict):
        raise DumpVersionError(
            f"not a unicache crash dump: the document is {type_name(data)}, not an object",
            found=None, supported=VERSION,
        )
    fmt = data.get("format")
    if fmt != FORMAT:
        raise DumpVersionError(
            f"not a unicache crash dump: format tag is {fmt!r}, expected {FORMAT!r}",
            found=fmt, supported=VERSION,
        )
    version = data.get("version")
    if version != VERSION or not is_int(version):
        raise DumpVersionError(
            f"crash dump version {version!r} is not supported (this unicache reads version {VERSION})",
            found=version, supported=VERSION,
        )


@dataclass(frozen=True, slots=True)
class CrashDump:
    """A validated crash dump. `nodes` is in pre-order (root first); `leases` by id."""

    version: int
    created_at: str
    producer: JSONObject
    error: DumpedError | None
    seed: int | None
    step: int | None
    config: JSONObject
    components: tuple[str, ...]
    epoch: int
    root: int
    nodes: dict[int, DumpNode]
    pools: dict[str, DumpPool]
    leases: dict[int, DumpLease]
    ledger: DumpLedger
    tickets: tuple[DumpTicket, ...]
    transfer: DumpTransfer | None
    quarantine: tuple[DumpQuarantine, ...]
    events: tuple[DumpEvent, ...]
    counters: dict[str, int]
    sanity: DumpSanity | None
    extra: JSONObject
    capture_errors: tuple[CaptureError, ...]

    @staticmethod
    def from_json(data: JSON) -> CrashDump:
        """Validate a parsed document; raise `DumpVersionError` / `DumpFormatError` on anything off."""
        _check_tag(data)
        doc = decode(_Document, data, "")
        check_config(doc.config, "config")
        token_bytes = dump_token_bytes(doc.config)
        top = (1 << (8 * token_bytes - 1)) - 1
        nodes: dict[int, DumpNode] = {}
        for i, node in enumerate(doc.tree.nodes):
            where = f"tree.nodes[{i}]"
            if node.id in nodes:
                raise DumpFormatError(f"{where}.id", f"duplicate node id {node.id}")
            if node.key and not 0 <= min(node.key) <= max(node.key) <= top:
                k, bad = next((k, t) for k, t in enumerate(node.key) if not 0 <= t <= top)
                raise DumpFormatError(f"{where}.key[{k}]", f"node {node.id}: token id {bad} is outside 0..{top}, "
                                                            f"the range of the dump's {token_bytes}-byte keys")
            extra_comps = sorted(set(node.components) - set(doc.components))
            if extra_comps:
                raise DumpFormatError(f"{where}.components",
                                      f"node {node.id}: component {extra_comps[0]!r} is not enabled")
            nodes[node.id] = node
        if doc.tree.root not in nodes:
            raise DumpFormatError("tree.root", f"root node {doc.tree.root} is not among tree.nodes")
        leases: dict[int, DumpLease] = {}
        for i, lease in enumerate(doc.leases):
            if lease.id in leases:
                raise DumpFormatError(f"leases[{i}].id", f"duplicate lease id {lease.id}")
            leases[lease.id] = lease
        dump = CrashDump(
            version=VERSION, created_at=doc.created_at, producer=doc.producer, error=doc.error, seed=doc.seed,
            step=doc.step, config=doc.config, components=doc.components, epoch=doc.epoch, root=doc.tree.root,
            nodes=nodes, pools=doc.pools, leases=leases, ledger=doc.ledger, tickets=doc.tickets,
            transfer=doc.transfer, quarantine=doc.quarantine, events=doc.events, counters=doc.counters,
            sanity=doc.sanity, extra=doc.extra, capture_errors=doc.capture_errors,
        )
        dump._check_references()
        dump._check_records()
        dump._check_slot_ranges()
        return dump

    def _check_references(self) -> None:
        index = {nid: i for i, nid in enumerate(self.nodes)}
        for i, node in enumerate(self.nodes.values()):
            where = f"tree.nodes[{i}]"
            if node.id == self.root:
                if node.parent is not None:
                    raise DumpFormatError(f"{where}.parent", f"root node {node.id} has parent {node.parent}")
            else:
                parent = self.nodes.get(node.parent) if node.parent is not None else None
                if parent is None:
                    raise DumpFormatError(
                        f"{where}.parent", f"node {node.id}: parent {node.parent} is not in the tree"
                    )
                if node.id not in parent.children:
                    raise DumpFormatError(
                        f"{where}.parent", f"node {node.id}: parent {parent.id} does not list it as a child"
                    )
                if index[parent.id] > i:
                    raise DumpFormatError(f"{where}", f"node {node.id} comes before its parent {parent.id}")
        for i, node in enumerate(self.nodes.values()):
            where = f"tree.nodes[{i}]"
            for c in node.children:
                child = self.nodes.get(c)
                if child is None or child.parent != node.id:
                    raise DumpFormatError(
                        f"{where}.children", f"node {node.id}: child {c} is not a node whose parent is {node.id}"
                    )
            for name, res in node.components.items():
                for lid in res.pins:
                    lease = self.leases.get(lid)
                    if lease is None:
                        raise DumpFormatError(
                            f"{where}.components.{name}.pins",
                            f"node {node.id}: pinned by lease {lid}, which is not among the live leases",
                        )
                    if lease.component != name:
                        raise DumpFormatError(
                            f"{where}.components.{name}.pins",
                            f"node {node.id}: {name} pin set holds lease {lid} of component {lease.component}",
                        )

    def _check_records(self) -> None:
        """Ticket, quarantine and job ids are unique; every component and pool a record names is enabled.

        When the writer could not capture the enabled components, only the
        spelling of pool names is checked (it then records ``full`` alone).
        """
        seen: set[int] = set()
        for i, ticket in enumerate(self.tickets):
            if ticket.id in seen:
                raise DumpFormatError(f"tickets[{i}].id", f"duplicate ticket id {ticket.id}")
            seen.add(ticket.id)
        seen.clear()
        for i, q in enumerate(self.quarantine):
            if q.ticket in seen:
                raise DumpFormatError(f"quarantine[{i}].ticket", f"ticket {q.ticket} is quarantined twice")
            seen.add(q.ticket)
        seen.clear()
        for i, job in enumerate(() if self.transfer is None else self.transfer.jobs):
            if job.ticket in seen:
                raise DumpFormatError(f"transfer.jobs[{i}].ticket", f"two held jobs for ticket {job.ticket}")
            seen.add(job.ticket)
        lost = any(c.section == "components" for c in self.capture_errors)
        enabled = frozenset(COMPONENT_NAMES if lost else self.components)

        def component(name: str, where: str, what: str) -> None:
            if name not in enabled:
                raise DumpFormatError(where, f"{what}: component {name!r} is not enabled")

        def pool(name: str, where: str) -> None:
            comp, _, tier = name.partition(".")
            if comp not in COMPONENT_NAMES or tier not in TIERS:
                raise DumpFormatError(where, f"unknown pool {name!r} (expected COMPONENT.TIER, e.g. full.device)")
            component(comp, where, f"pool {name}")

        for name in self.pools:
            pool(name, f"pools.{name}")
        for i, lease in enumerate(self.leases.values()):
            component(lease.component, f"leases[{i}].component", f"lease {lease.id}")
        for i, ticket in enumerate(self.tickets):
            for name in ticket.leases:
                component(name, f"tickets[{i}].leases.{name}", f"ticket {ticket.id}")
            for j, c in enumerate(ticket.copies):
                component(c.component, f"tickets[{i}].copies[{j}].component", f"ticket {ticket.id}")
        for i, q in enumerate(self.quarantine):
            for name in q.slots:
                pool(name, f"quarantine[{i}].slots.{name}")
        for i, e in enumerate(self.events):
            if e.component is not None:
                component(e.component, f"events[{i}].component", f"event {e.seq}")

    def _check_slot_ranges(self) -> None:
        """Every slot a node, copy or quarantine names lies inside its pool (when the pool was captured)."""
        def check(pool: str, slots: tuple[int, ...], where: str) -> None:
            stats = self.pools.get(pool)
            if stats is None:
                return
            for s in slots:
                if s >= stats.capacity:
                    raise DumpFormatError(where, f"slot {s} is outside pool {pool} of {stats.capacity} rows")

        for i, node in enumerate(self.nodes.values()):
            for name, res in node.components.items():
                for tier in TIERS:
                    check(f"{name}.{tier}", res.slots(tier), f"tree.nodes[{i}].components.{name}.{tier}")
        for i, ticket in enumerate(self.tickets):
            for j, c in enumerate(ticket.copies):
                check(f"{c.component}.{c.src_tier}", c.src, f"tickets[{i}].copies[{j}].src")
                check(f"{c.component}.{c.dst_tier}", c.dst, f"tickets[{i}].copies[{j}].dst")
        for i, q in enumerate(self.quarantine):
            for pool, slots in q.slots.items():
                check(pool, slots, f"quarantine[{i}].slots.{pool}")

    def revalidate(self) -> list[DumpViolation]:
        """Re-run the whole validation on this dump and check it for consistency; findings, not errors.

        A dump that no longer validates (built in memory, or from a document
        edited after loading) yields one ``dump-format`` finding; a valid one is
        checked across records (:func:`unicache.dump.consistency.inconsistencies`).
        """
        try:
            CrashDump.from_json(self.to_json())
        except DumpError as exc:
            return [DumpViolation("dump-format", None, None, None, str(exc))]
        return inconsistencies(self)

    def to_json(self) -> JSONObject:
        return {
            "format": FORMAT,
            "version": self.version,
            "created_at": self.created_at,
            "producer": dict(self.producer),
            "error": None if self.error is None else self.error.to_json(),
            "seed": self.seed,
            "step": self.step,
            "config": dict(self.config),
            "components": list(self.components),
            "epoch": self.epoch,
            "tree": {"root": self.root, "nodes": [n.to_json() for n in self.nodes.values()]},
            "pools": {k: p.to_json() for k, p in self.pools.items()},
            "leases": [x.to_json() for x in self.leases.values()],
            "ledger": self.ledger.to_json(),
            "tickets": [t.to_json() for t in self.tickets],
            "transfer": None if self.transfer is None else self.transfer.to_json(),
            "quarantine": [q.to_json() for q in self.quarantine],
            "events": [e.to_json() for e in self.events],
            "counters": dict(self.counters),
            "sanity": None if self.sanity is None else self.sanity.to_json(),
            "extra": dict(self.extra),
            "capture_errors": [c.to_json() for c in self.capture_errors],
        }

    def node_path(self, node_id: int) -> list[DumpNode]:
        """Nodes from the root's child down to `node_id` (empty for the root)."""
        out: list[DumpNode] = []
        node = self.nodes[node_id]
        while node.parent is not None:
            out.append(node)
            node = self.nodes[node.parent]
        out.reverse()
        return out

    @property
    def token_bytes(self) -> int:
        """Bytes a token id took in the dumped cache's keys (8 for a dump from before the setting)."""
        return dump_token_bytes(self.config)

    def tokens(self, node_id: int) -> tuple[int, ...]:
        """The token prefix ending at `node_id`."""
        out: tuple[int, ...] = ()
        for node in self.node_path(node_id):
            out += node.key
        return out

    def subtree(self, node_id: int) -> Iterator[DumpNode]:
        """`node_id` and its descendants, pre-order."""
        stack = [self.nodes[node_id]]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(self.nodes[c] for c in reversed(node.children))

    def nodes_pinned_by(self, lease_id: int) -> list[int]:
        """Ids of nodes whose pin sets hold `lease_id`, pre-order."""
        return [n.id for n in self.nodes.values() if any(lease_id in r.pins for r in n.components.values())]
