"""The crash-dump document (format version 1): typed records, validation from JSON, and back.

A dump is plain JSON, never code: `CrashDump.from_json` checks every field's
type, the format tag and version, and that every id the document refers to
(parents, children, pinning leases, event kinds) exists, raising
`DumpFormatError` with the JSON path of the first bad value. `to_json()` is the
exact inverse, so `CrashDump.from_json(d).to_json() == d` for any valid `d`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TypeAlias, Union

from leases import EventKind

from unicache.dump.errors import DumpFormatError, DumpVersionError

JSON: TypeAlias = Union[dict[str, "JSON"], list["JSON"], str, int, float, bool, None]
JSONObject: TypeAlias = dict[str, JSON]

FORMAT = "unicache-crash-dump"
VERSION = 1
COMPONENT_NAMES = ("full", "swa", "mamba")
_EVENT_KINDS = frozenset(k.value for k in EventKind)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int):
        return "an int"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Obj:
    """A JSON object under validation; every accessor names its path in errors."""

    __slots__ = ("data", "where")

    def __init__(self, data: JSON, where: str) -> None:
        if not isinstance(data, dict):
            raise DumpFormatError(where or "<document>", f"expected an object, got {_type_name(data)}")
        self.data = data
        self.where = where

    def _at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def _get(self, key: str) -> JSON:
        if key not in self.data:
            raise DumpFormatError(self._at(key), "missing")
        return self.data[key]

    def _bad(self, key: str, expected: str, value: object) -> DumpFormatError:
        return DumpFormatError(self._at(key), f"expected {expected}, got {_type_name(value)}")

    def req_int(self, key: str, *, minimum: int | None = None) -> int:
        value = self._get(key)
        if not _is_int(value):
            raise self._bad(key, "an int", value)
        assert isinstance(value, int)
        if minimum is not None and value < minimum:
            raise DumpFormatError(self._at(key), f"expected an int >= {minimum}, got {value}")
        return value

    def opt_int(self, key: str) -> int | None:
        value = self._get(key)
        if value is None:
            return None
        return self.req_int(key)

    def req_str(self, key: str) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise self._bad(key, "a string", value)
        return value

    def opt_str(self, key: str) -> str | None:
        value = self._get(key)
        if value is None:
            return None
        return self.req_str(key)

    def req_bool(self, key: str) -> bool:
        value = self._get(key)
        if not isinstance(value, bool):
            raise self._bad(key, "a bool", value)
        return value

    def ints(self, key: str) -> tuple[int, ...]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._bad(key, "a list of ints", value)
        for i, item in enumerate(value):
            if not _is_int(item):
                raise DumpFormatError(f"{self._at(key)}[{i}]", f"expected an int, got {_type_name(item)}")
        return tuple(value)  # type: ignore[arg-type]  # every item checked above

    def opt_ints(self, key: str) -> tuple[int, ...] | None:
        if self._get(key) is None:
            return None
        return self.ints(key)

    def strs(self, key: str) -> tuple[str, ...]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._bad(key, "a list of strings", value)
        out: list[str] = []
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise DumpFormatError(f"{self._at(key)}[{i}]", f"expected a string, got {_type_name(item)}")
            out.append(item)
        return tuple(out)

    def obj(self, key: str) -> _Obj:
        return _Obj(self._get(key), self._at(key))

    def opt_obj(self, key: str) -> _Obj | None:
        value = self._get(key)
        return None if value is None else _Obj(value, self._at(key))

    def objs(self, key: str) -> list[_Obj]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._bad(key, "a list of objects", value)
        return [_Obj(item, f"{self._at(key)}[{i}]") for i, item in enumerate(value)]

    def raw_obj(self, key: str) -> JSONObject:
        value = self._get(key)
        if not isinstance(value, dict):
            raise self._bad(key, "an object", value)
        return value

    def int_map(self, key: str) -> dict[str, int]:
        sub = self.obj(key)
        return {k: sub.req_int(k) for k in sub.data}

    def ints_map(self, key: str) -> dict[str, tuple[int, ...]]:
        sub = self.obj(key)
        return {k: sub.ints(k) for k in sub.data}

    def keys_exactly(self, allowed: Iterable[str]) -> None:
        extra = sorted(set(self.data) - set(allowed))
        if extra:
            raise DumpFormatError(self._at(extra[0]), "unknown field")


Slots: TypeAlias = "tuple[int, ...] | int | None"


def _slots_json(value: Slots) -> JSON:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True, slots=True)
class DumpResidency:
    """One component of one node: device and host slots (pages, or one Mamba slot) and pinning leases."""

    device: Slots
    host: Slots
    pins: tuple[int, ...]

    @staticmethod
    def from_json(o: _Obj, component: str) -> DumpResidency:
        o.keys_exactly(("device", "host", "pins"))
        if component == "mamba":
            return DumpResidency(o.opt_int("device"), o.opt_int("host"), o.ints("pins"))
        return DumpResidency(o.opt_ints("device"), o.opt_ints("host"), o.ints("pins"))

    def to_json(self) -> JSONObject:
        return {
            "device": _slots_json(self.device),
            "host": _slots_json(self.host),
            "pins": list(self.pins),
        }

    @property
    def tiers(self) -> str:
        """"D", "H", "DH" or "-"."""
        out = ("D" if self.device is not None else "") + ("H" if self.host is not None else "")
        return out or "-"


@dataclass(frozen=True, slots=True)
class DumpNode:
    """A tree node: its edge, structure, recency and per-component residency."""

    id: int
    parent: int | None
    start: int
    end: int
    key: tuple[int, ...]
    children: tuple[int, ...]
    last_access: int
    hits: int
    components: dict[str, DumpResidency]

    @staticmethod
    def from_json(o: _Obj) -> DumpNode:
        o.keys_exactly(
            ("id", "parent", "start", "end", "key", "children", "last_access", "hits", "components")
        )
        comps = o.obj("components")
        residency: dict[str, DumpResidency] = {}
        for name in comps.data:
            if name not in COMPONENT_NAMES:
                raise DumpFormatError(comps._at(name), f"unknown component (expected one of {COMPONENT_NAMES})")
            residency[name] = DumpResidency.from_json(comps.obj(name), name)
        node = DumpNode(
            o.req_int("id"), o.opt_int("parent"), o.req_int("start", minimum=0), o.req_int("end", minimum=0),
            o.ints("key"), o.ints("children"), o.req_int("last_access"), o.req_int("hits", minimum=0),
            residency,
        )
        if node.end - node.start != len(node.key):
            raise DumpFormatError(
                o._at("key"),
                f"node {node.id}: key has {len(node.key)} tokens but spans [{node.start}:{node.end})",
            )
        return node

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "parent": self.parent,
            "start": self.start,
            "end": self.end,
            "key": list(self.key),
            "children": list(self.children),
            "last_access": self.last_access,
            "hits": self.hits,
            "components": {name: r.to_json() for name, r in self.components.items()},
        }

    def pins(self) -> dict[str, tuple[int, ...]]:
        """Pinning lease ids by component, only components with at least one pin."""
        return {name: r.pins for name, r in self.components.items() if r.pins}


@dataclass(frozen=True, slots=True)
class DumpLease:
    """A live lease: who holds it, its epoch, where it was acquired, and what it pins.

    `nodes` are the nodes whose pin set holds it at capture time; `scope` is
    what the cache recorded when it acquired the lease (they differ only on a bug).
    `component` is lower-case ("full", "swa", "mamba").
    """

    id: int
    component: str
    owner: str
    generation: int
    site: str | None
    nodes: tuple[int, ...]
    scope: tuple[int, ...] | None

    @staticmethod
    def from_json(o: _Obj) -> DumpLease:
        o.keys_exactly(("id", "component", "owner", "generation", "site", "nodes", "scope"))
        return DumpLease(
            o.req_int("id"), o.req_str("component"), o.req_str("owner"), o.req_int("generation"),
            o.opt_str("site"), o.ints("nodes"), o.opt_ints("scope"),
        )

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "component": self.component,
            "owner": self.owner,
            "generation": self.generation,
            "site": self.site,
            "nodes": list(self.nodes),
            "scope": None if self.scope is None else list(self.scope),
        }


@dataclass(frozen=True, slots=True)
class DumpLeak:
    """A lease whose last reference died while held, with where it was acquired."""

    id: int
    component: str
    owner: str
    generation: int
    site: str | None

    @staticmethod
    def from_json(o: _Obj) -> DumpLeak:
        o.keys_exactly(("id", "component", "owner", "generation", "site"))
        return DumpLeak(o.req_int("id"), o.req_str("component"), o.req_str("owner"), o.req_int("generation"), o.opt_str("site"))

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "component": self.component,
            "owner": self.owner,
            "generation": self.generation,
            "site": self.site,
        }


@dataclass(frozen=True, slots=True)
class DumpLedger:
    """The ledger's identity and counters, and every leak it recorded."""

    name: str
    epoch: int
    step: int
    counters: dict[str, int]
    leaks: tuple[DumpLeak, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpLedger:
        o.keys_exactly(("name", "epoch", "step", "counters", "leaks"))
        return DumpLedger(
            o.req_str("name"), o.req_int("epoch", minimum=0), o.req_int("step"), o.int_map("counters"),
            tuple(DumpLeak.from_json(x) for x in o.objs("leaks")),
        )

    def to_json(self) -> JSONObject:
        return {
            "name": self.name,
            "epoch": self.epoch,
            "step": self.step,
            "counters": dict(self.counters),
            "leaks": [x.to_json() for x in self.leaks],
        }


@dataclass(frozen=True, slots=True)
class DumpCopy:
    """One slot copy of a ticket: rows `src` of one pool into rows `dst` of another."""

    component: str
    src_tier: str
    dst_tier: str
    src: tuple[int, ...]
    dst: tuple[int, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpCopy:
        o.keys_exactly(("component", "src_tier", "dst_tier", "src", "dst"))
        return DumpCopy(o.req_str("component"), o.req_str("src_tier"), o.req_str("dst_tier"), o.ints("src"), o.ints("dst"))

    def to_json(self) -> JSONObject:
        return {
            "component": self.component,
            "src_tier": self.src_tier,
            "dst_tier": self.dst_tier,
            "src": list(self.src),
            "dst": list(self.dst),
        }


@dataclass(frozen=True, slots=True)
class DumpTicket:
    """A live transfer ticket (load-back or backup) and the lease it owns per component.

    `node` is the load-back anchor or the bottom of the backed-up chain.
    """

    id: int
    generation: int
    kind: str
    node: int
    status: str
    owner: str
    leases: dict[str, int]
    copies: tuple[DumpCopy, ...]
    abandoned: bool

    @staticmethod
    def from_json(o: _Obj) -> DumpTicket:
        o.keys_exactly(("id", "generation", "kind", "node", "status", "owner", "leases", "copies", "abandoned"))
        return DumpTicket(
            o.req_int("id"), o.req_int("generation"), o.req_str("kind"), o.req_int("node"),
            o.req_str("status"), o.req_str("owner"), o.int_map("leases"),
            tuple(DumpCopy.from_json(c) for c in o.objs("copies")), o.req_bool("abandoned"),
        )

    def to_json(self) -> JSONObject:
        return {
            "id": self.id,
            "generation": self.generation,
            "kind": self.kind,
            "node": self.node,
            "status": self.status,
            "owner": self.owner,
            "leases": dict(self.leases),
            "copies": [c.to_json() for c in self.copies],
            "abandoned": self.abandoned,
        }


@dataclass(frozen=True, slots=True)
class DumpJob:
    """A job the transfer engine still holds (its ack not yet delivered)."""

    ticket: int
    generation: int
    kind: str
    withheld: bool

    @staticmethod
    def from_json(o: _Obj) -> DumpJob:
        o.keys_exactly(("ticket", "generation", "kind", "withheld"))
        return DumpJob(o.req_int("ticket"), o.req_int("generation"), o.req_str("kind"), o.req_bool("withheld"))

    def to_json(self) -> JSONObject:
        return {
            "ticket": self.ticket,
            "generation": self.generation,
            "kind": self.kind,
            "withheld": self.withheld,
        }


@dataclass(frozen=True, slots=True)
class DumpTransfer:
    """The transfer engine: its class, how many jobs it has not acked, and those it can list."""

    engine: str
    pending: int
    jobs: tuple[DumpJob, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpTransfer:
        o.keys_exactly(("engine", "pending", "jobs"))
        return DumpTransfer(
            o.req_str("engine"), o.req_int("pending", minimum=0), tuple(DumpJob.from_json(j) for j in o.objs("jobs"))
        )

    def to_json(self) -> JSONObject:
        return {"engine": self.engine, "pending": self.pending, "jobs": [j.to_json() for j in self.jobs]}


@dataclass(frozen=True, slots=True)
class DumpQuarantine:
    """Slots held back from the free lists until a (stale) ticket's ack arrives."""

    ticket: int
    generation: int
    kind: str
    slots: dict[str, tuple[int, ...]]

    @staticmethod
    def from_json(o: _Obj) -> DumpQuarantine:
        o.keys_exactly(("ticket", "generation", "kind", "slots"))
        return DumpQuarantine(o.req_int("ticket"), o.req_int("generation"), o.req_str("kind"), o.ints_map("slots"))

    def to_json(self) -> JSONObject:
        return {
            "ticket": self.ticket,
            "generation": self.generation,
            "kind": self.kind,
            "slots": {k: list(v) for k, v in self.slots.items()},
        }


@dataclass(frozen=True, slots=True)
class DumpPool:
    """Occupancy of one pool, in rows (pages or slots)."""

    capacity: int
    free: int
    used: int
    quarantined: int

    @staticmethod
    def from_json(o: _Obj) -> DumpPool:
        o.keys_exactly(("capacity", "free", "used", "quarantined"))
        return DumpPool(
            o.req_int("capacity", minimum=0), o.req_int("free", minimum=0), o.req_int("used", minimum=0),
            o.req_int("quarantined", minimum=0),
        )

    def to_json(self) -> JSONObject:
        return {"capacity": self.capacity, "free": self.free, "used": self.used, "quarantined": self.quarantined}


@dataclass(frozen=True, slots=True)
class DumpEvent:
    """One flight-recorder entry (see `leases.LeaseEvent`)."""

    seq: int
    step: int
    kind: str
    lease: int | None
    component: str | None
    owner: str | None
    generation: int
    nodes: tuple[int | str, ...]
    ticket: int | None
    detail: str

    @staticmethod
    def from_json(o: _Obj) -> DumpEvent:
        o.keys_exactly(
            ("seq", "step", "kind", "lease", "component", "owner", "generation", "nodes", "ticket", "detail")
        )
        kind = o.req_str("kind")
        if kind not in _EVENT_KINDS:
            raise DumpFormatError(o._at("kind"), f"unknown event kind {kind!r}")
        raw = o._get("nodes")
        if not isinstance(raw, list):
            raise o._bad("nodes", "a list", raw)
        nodes: list[int | str] = []
        for i, n in enumerate(raw):
            if not (_is_int(n) or isinstance(n, str)):
                raise DumpFormatError(f"{o._at('nodes')}[{i}]", f"expected an int or a string, got {_type_name(n)}")
            assert isinstance(n, (int, str))
            nodes.append(n)
        return DumpEvent(
            o.req_int("seq"), o.req_int("step"), kind, o.opt_int("lease"), o.opt_str("component"),
            o.opt_str("owner"), o.req_int("generation"), tuple(nodes), o.opt_int("ticket"), o.req_str("detail"),
        )

    def to_json(self) -> JSONObject:
        return {
            "seq": self.seq,
            "step": self.step,
            "kind": self.kind,
            "lease": self.lease,
            "component": self.component,
            "owner": self.owner,
            "generation": self.generation,
            "nodes": list(self.nodes),
            "ticket": self.ticket,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class DumpViolation:
    """One sanity-check finding."""

    kind: str
    node: int | None
    component: str | None
    lease: int | None
    detail: str

    @staticmethod
    def from_json(o: _Obj) -> DumpViolation:
        o.keys_exactly(("kind", "node", "component", "lease", "detail"))
        return DumpViolation(o.req_str("kind"), o.opt_int("node"), o.opt_str("component"), o.opt_int("lease"), o.req_str("detail"))

    def to_json(self) -> JSONObject:
        return {
            "kind": self.kind,
            "node": self.node,
            "component": self.component,
            "lease": self.lease,
            "detail": self.detail,
        }


@dataclass(frozen=True, slots=True)
class DumpSanity:
    """The sanity check run while dumping."""

    ok: bool
    violations: tuple[DumpViolation, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpSanity:
        o.keys_exactly(("ok", "violations"))
        return DumpSanity(o.req_bool("ok"), tuple(DumpViolation.from_json(v) for v in o.objs("violations")))

    def to_json(self) -> JSONObject:
        return {"ok": self.ok, "violations": [v.to_json() for v in self.violations]}


@dataclass(frozen=True, slots=True)
class DumpedError:
    """The exception that caused the dump: class, message, traceback lines, and the ids it carried."""

    type: str
    module: str
    message: str
    traceback: tuple[str, ...]
    ids: JSONObject

    @staticmethod
    def from_json(o: _Obj) -> DumpedError:
        o.keys_exactly(("type", "module", "message", "traceback", "ids"))
        return DumpedError(o.req_str("type"), o.req_str("module"), o.req_str("message"), o.strs("traceback"), o.raw_obj("ids"))

    def to_json(self) -> JSONObject:
        return {
            "type": self.type,
            "module": self.module,
            "message": self.message,
            "traceback": list(self.traceback),
            "ids": dict(self.ids),
        }


@dataclass(frozen=True, slots=True)
class CaptureError:
    """A section the writer could not capture (the cache may be corrupt); the rest is still there."""

    section: str
    type: str
    message: str

    @staticmethod
    def from_json(o: _Obj) -> CaptureError:
        o.keys_exactly(("section", "type", "message"))
        return CaptureError(o.req_str("section"), o.req_str("type"), o.req_str("message"))

    def to_json(self) -> JSONObject:
        return {"section": self.section, "type": self.type, "message": self.message}


_TOP = (
    "format", "version", "created_at", "producer", "error", "seed", "step", "config",
    "components", "epoch", "tree", "pools", "leases", "ledger", "tickets", "transfer",
    "quarantine", "events", "counters", "sanity", "extra", "capture_errors",
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
        if not isinstance(data, dict):
            raise DumpVersionError(
                f"not a unicache crash dump: the document is {_type_name(data)}, not an object",
                found=None, supported=VERSION,
            )
        fmt = data.get("format")
        if fmt != FORMAT:
            raise DumpVersionError(
                f"not a unicache crash dump: format tag is {fmt!r}, expected {FORMAT!r}",
                found=fmt, supported=VERSION,
            )
        version = data.get("version")
        if version != VERSION or not _is_int(version):
            raise DumpVersionError(
                f"crash dump version {version!r} is not supported (this unicache reads version {VERSION})",
                found=version, supported=VERSION,
            )
        o = _Obj(data, "")
        o.keys_exactly(_TOP)
        components = o.strs("components")
        for i, name in enumerate(components):
            if name not in COMPONENT_NAMES:
                raise DumpFormatError(f"components[{i}]", f"unknown component {name!r}")
        tree = o.obj("tree")
        tree.keys_exactly(("root", "nodes"))
        nodes: dict[int, DumpNode] = {}
        for n in tree.objs("nodes"):
            node = DumpNode.from_json(n)
            if node.id in nodes:
                raise DumpFormatError(n._at("id"), f"duplicate node id {node.id}")
            extra_comps = sorted(set(node.components) - set(components))
            if extra_comps:
                raise DumpFormatError(
                    n._at("components"), f"node {node.id}: component {extra_comps[0]!r} is not enabled"
                )
            nodes[node.id] = node
        root = tree.req_int("root")
        if root not in nodes:
            raise DumpFormatError("tree.root", f"root node {root} is not among tree.nodes")
        pools_obj = o.obj("pools")
        pools = {k: DumpPool.from_json(pools_obj.obj(k)) for k in pools_obj.data}
        leases: dict[int, DumpLease] = {}
        for lo in o.objs("leases"):
            lease = DumpLease.from_json(lo)
            if lease.id in leases:
                raise DumpFormatError(lo._at("id"), f"duplicate lease id {lease.id}")
            leases[lease.id] = lease
        transfer_obj = o.opt_obj("transfer")
        sanity_obj = o.opt_obj("sanity")
        error_obj = o.opt_obj("error")
        dump = CrashDump(
            version=VERSION,
            created_at=o.req_str("created_at"),
            producer=o.raw_obj("producer"),
            error=None if error_obj is None else DumpedError.from_json(error_obj),
            seed=o.opt_int("seed"),
            step=o.opt_int("step"),
            config=o.raw_obj("config"),
            components=components,
            epoch=o.req_int("epoch", minimum=0),
            root=root,
            nodes=nodes,
            pools=pools,
            leases=leases,
            ledger=DumpLedger.from_json(o.obj("ledger")),
            tickets=tuple(DumpTicket.from_json(t) for t in o.objs("tickets")),
            transfer=None if transfer_obj is None else DumpTransfer.from_json(transfer_obj),
            quarantine=tuple(DumpQuarantine.from_json(q) for q in o.objs("quarantine")),
            events=tuple(DumpEvent.from_json(e) for e in o.objs("events")),
            counters=o.int_map("counters"),
            sanity=None if sanity_obj is None else DumpSanity.from_json(sanity_obj),
            extra=o.raw_obj("extra"),
            capture_errors=tuple(CaptureError.from_json(c) for c in o.objs("capture_errors")),
        )
        dump._check_references()
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
