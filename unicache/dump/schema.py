"""The crash-dump document (format version 1): typed records, validation from JSON, and back.

A dump is plain JSON, never code: `CrashDump.from_json` checks every field's
type, the format tag and version, and that every id the document refers to
(parents, children, pinning leases, event kinds) exists, raising
`DumpFormatError` with the JSON path of the first bad value. `to_json()` is the
exact inverse, so `CrashDump.from_json(d).to_json() == d` for any valid `d`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import TypeAlias, TypeGuard, TypeVar, Union

from leases import EventKind

from unicache.dump.errors import DumpFormatError, DumpVersionError

JSON: TypeAlias = Union[dict[str, "JSON"], list["JSON"], str, int, float, bool, None]
JSONObject: TypeAlias = dict[str, JSON]

FORMAT = "unicache-crash-dump"
VERSION = 1
COMPONENT_NAMES = ("full", "swa", "mamba")
_EVENT_KINDS = frozenset(k.value for k in EventKind)
_T = TypeVar("_T")


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


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_str(value: object) -> TypeGuard[str]:
    return isinstance(value, str)


def _is_bool(value: object) -> TypeGuard[bool]:
    return isinstance(value, bool)


def _is_object(value: object) -> TypeGuard[JSONObject]:
    return isinstance(value, dict)


def _is_node_ref(value: object) -> TypeGuard[int | str]:
    return _is_int(value) or isinstance(value, str)


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

    def _req(self, key: str, ok: Callable[[object], TypeGuard[_T]], expected: str) -> _T:
        value = self._get(key)
        if not ok(value):
            raise self._bad(key, expected, value)
        return value

    def _opt(self, key: str, read: Callable[[str], _T]) -> _T | None:
        return None if self._get(key) is None else read(key)

    def items(self, key: str, ok: Callable[[object], TypeGuard[_T]], expected: str,
              expected_item: str) -> tuple[_T, ...]:
        """A list whose every item passes `ok`; `expected` names the list, `expected_item` an item."""
        value = self._get(key)
        if not isinstance(value, list):
            raise self._bad(key, expected, value)
        out: list[_T] = []
        for i, item in enumerate(value):
            if not ok(item):
                raise DumpFormatError(f"{self._at(key)}[{i}]", f"expected {expected_item}, got {_type_name(item)}")
            out.append(item)
        return tuple(out)

    def req_int(self, key: str, *, minimum: int | None = None) -> int:
        value = self._req(key, _is_int, "an int")
        if minimum is not None and value < minimum:
            raise DumpFormatError(self._at(key), f"expected an int >= {minimum}, got {value}")
        return value

    def opt_int(self, key: str) -> int | None:
        return self._opt(key, self.req_int)

    def req_str(self, key: str) -> str:
        return self._req(key, _is_str, "a string")

    def opt_str(self, key: str) -> str | None:
        return self._opt(key, self.req_str)

    def req_bool(self, key: str) -> bool:
        return self._req(key, _is_bool, "a bool")

    def ints(self, key: str) -> tuple[int, ...]:
        return self.items(key, _is_int, "a list of ints", "an int")

    def opt_ints(self, key: str) -> tuple[int, ...] | None:
        return self._opt(key, self.ints)

    def strs(self, key: str) -> tuple[str, ...]:
        return self.items(key, _is_str, "a list of strings", "a string")

    def obj(self, key: str) -> _Obj:
        return _Obj(self._get(key), self._at(key))

    def opt_obj(self, key: str) -> _Obj | None:
        return self._opt(key, self.obj)

    def objs(self, key: str) -> list[_Obj]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self._bad(key, "a list of objects", value)
        return [_Obj(item, f"{self._at(key)}[{i}]") for i, item in enumerate(value)]

    def raw_obj(self, key: str) -> JSONObject:
        return self._req(key, _is_object, "an object")

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


@dataclass(frozen=True, slots=True)
class _Record:
    """Base of the dump records: field names are the JSON keys, in order."""

    @classmethod
    def check_keys(cls, o: _Obj) -> None:
        """Reject any key of `o` that is not a field of `cls`."""
        o.keys_exactly(f.name for f in fields(cls))

    def to_json(self) -> JSONObject:
        return {f.name: _to_json(getattr(self, f.name)) for f in fields(self)}


def _to_json(value: object) -> JSON:
    """A record field as JSON: records by their `to_json`, tuples as lists, maps copied."""
    if isinstance(value, _Record):
        return value.to_json()
    if isinstance(value, (tuple, list)):
        return [_to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    assert value is None or isinstance(value, (str, int, float))
    return value


Slots: TypeAlias = "tuple[int, ...] | int | None"


@dataclass(frozen=True, slots=True)
class DumpResidency(_Record):
    """One component of one node: device and host slots (pages, or one Mamba slot) and pinning leases."""

    device: Slots
    host: Slots
    pins: tuple[int, ...]

    @staticmethod
    def from_json(o: _Obj, component: str) -> DumpResidency:
        DumpResidency.check_keys(o)
        if component == "mamba":
            return DumpResidency(o.opt_int("device"), o.opt_int("host"), o.ints("pins"))
        return DumpResidency(o.opt_ints("device"), o.opt_ints("host"), o.ints("pins"))

    @property
    def tiers(self) -> str:
        """"D", "H", "DH" or "-"."""
        out = ("D" if self.device is not None else "") + ("H" if self.host is not None else "")
        return out or "-"


@dataclass(frozen=True, slots=True)
class DumpNode(_Record):
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
        DumpNode.check_keys(o)
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

    def pins(self) -> dict[str, tuple[int, ...]]:
        """Pinning lease ids by component, only components with at least one pin."""
        return {name: r.pins for name, r in self.components.items() if r.pins}


@dataclass(frozen=True, slots=True)
class DumpLease(_Record):
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
        DumpLease.check_keys(o)
        return DumpLease(
            o.req_int("id"), o.req_str("component"), o.req_str("owner"), o.req_int("generation"),
            o.opt_str("site"), o.ints("nodes"), o.opt_ints("scope"),
        )


@dataclass(frozen=True, slots=True)
class DumpLeak(_Record):
    """A lease whose last reference died while held, with where it was acquired."""

    id: int
    component: str
    owner: str
    generation: int
    site: str | None

    @staticmethod
    def from_json(o: _Obj) -> DumpLeak:
        DumpLeak.check_keys(o)
        return DumpLeak(o.req_int("id"), o.req_str("component"), o.req_str("owner"), o.req_int("generation"), o.opt_str("site"))


@dataclass(frozen=True, slots=True)
class DumpLedger(_Record):
    """The ledger's identity and counters, and every leak it recorded."""

    name: str
    epoch: int
    step: int
    counters: dict[str, int]
    leaks: tuple[DumpLeak, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpLedger:
        DumpLedger.check_keys(o)
        return DumpLedger(
            o.req_str("name"), o.req_int("epoch", minimum=0), o.req_int("step"), o.int_map("counters"),
            tuple(DumpLeak.from_json(x) for x in o.objs("leaks")),
        )


@dataclass(frozen=True, slots=True)
class DumpCopy(_Record):
    """One slot copy of a ticket: rows `src` of one pool into rows `dst` of another."""

    component: str
    src_tier: str
    dst_tier: str
    src: tuple[int, ...]
    dst: tuple[int, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpCopy:
        DumpCopy.check_keys(o)
        return DumpCopy(o.req_str("component"), o.req_str("src_tier"), o.req_str("dst_tier"), o.ints("src"), o.ints("dst"))


@dataclass(frozen=True, slots=True)
class DumpTicket(_Record):
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
        DumpTicket.check_keys(o)
        return DumpTicket(
            o.req_int("id"), o.req_int("generation"), o.req_str("kind"), o.req_int("node"),
            o.req_str("status"), o.req_str("owner"), o.int_map("leases"),
            tuple(DumpCopy.from_json(c) for c in o.objs("copies")), o.req_bool("abandoned"),
        )


@dataclass(frozen=True, slots=True)
class DumpJob(_Record):
    """A job the transfer engine still holds (its ack not yet delivered)."""

    ticket: int
    generation: int
    kind: str
    withheld: bool

    @staticmethod
    def from_json(o: _Obj) -> DumpJob:
        DumpJob.check_keys(o)
        return DumpJob(o.req_int("ticket"), o.req_int("generation"), o.req_str("kind"), o.req_bool("withheld"))


@dataclass(frozen=True, slots=True)
class DumpTransfer(_Record):
    """The transfer engine: its class, how many jobs it has not acked, and those it can list."""

    engine: str
    pending: int
    jobs: tuple[DumpJob, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpTransfer:
        DumpTransfer.check_keys(o)
        return DumpTransfer(
            o.req_str("engine"), o.req_int("pending", minimum=0), tuple(DumpJob.from_json(j) for j in o.objs("jobs"))
        )


@dataclass(frozen=True, slots=True)
class DumpQuarantine(_Record):
    """Slots held back from the free lists until a (stale) ticket's ack arrives."""

    ticket: int
    generation: int
    kind: str
    slots: dict[str, tuple[int, ...]]

    @staticmethod
    def from_json(o: _Obj) -> DumpQuarantine:
        DumpQuarantine.check_keys(o)
        return DumpQuarantine(o.req_int("ticket"), o.req_int("generation"), o.req_str("kind"), o.ints_map("slots"))


@dataclass(frozen=True, slots=True)
class DumpPool(_Record):
    """Occupancy of one pool, in rows (pages or slots)."""

    capacity: int
    free: int
    used: int
    quarantined: int

    @staticmethod
    def from_json(o: _Obj) -> DumpPool:
        DumpPool.check_keys(o)
        return DumpPool(
            o.req_int("capacity", minimum=0), o.req_int("free", minimum=0), o.req_int("used", minimum=0),
            o.req_int("quarantined", minimum=0),
        )


@dataclass(frozen=True, slots=True)
class DumpEvent(_Record):
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
        DumpEvent.check_keys(o)
        kind = o.req_str("kind")
        if kind not in _EVENT_KINDS:
            raise DumpFormatError(o._at("kind"), f"unknown event kind {kind!r}")
        nodes = o.items("nodes", _is_node_ref, "a list", "an int or a string")
        return DumpEvent(
            o.req_int("seq"), o.req_int("step"), kind, o.opt_int("lease"), o.opt_str("component"),
            o.opt_str("owner"), o.req_int("generation"), nodes, o.opt_int("ticket"), o.req_str("detail"),
        )


@dataclass(frozen=True, slots=True)
class DumpViolation(_Record):
    """One sanity-check finding."""

    kind: str
    node: int | None
    component: str | None
    lease: int | None
    detail: str

    @staticmethod
    def from_json(o: _Obj) -> DumpViolation:
        DumpViolation.check_keys(o)
        return DumpViolation(o.req_str("kind"), o.opt_int("node"), o.opt_str("component"), o.opt_int("lease"), o.req_str("detail"))


@dataclass(frozen=True, slots=True)
class DumpSanity(_Record):
    """The sanity check run while dumping."""

    ok: bool
    violations: tuple[DumpViolation, ...]

    @staticmethod
    def from_json(o: _Obj) -> DumpSanity:
        DumpSanity.check_keys(o)
        return DumpSanity(o.req_bool("ok"), tuple(DumpViolation.from_json(v) for v in o.objs("violations")))


@dataclass(frozen=True, slots=True)
class DumpedError(_Record):
    """The exception that caused the dump: class, message, traceback lines, and the ids it carried."""

    type: str
    module: str
    message: str
    traceback: tuple[str, ...]
    ids: JSONObject

    @staticmethod
    def from_json(o: _Obj) -> DumpedError:
        DumpedError.check_keys(o)
        return DumpedError(o.req_str("type"), o.req_str("module"), o.req_str("message"), o.strs("traceback"), o.raw_obj("ids"))


@dataclass(frozen=True, slots=True)
class CaptureError(_Record):
    """A section the writer could not capture (the cache may be corrupt); the rest is still there."""

    section: str
    type: str
    message: str

    @staticmethod
    def from_json(o: _Obj) -> CaptureError:
        CaptureError.check_keys(o)
        return CaptureError(o.req_str("section"), o.req_str("type"), o.req_str("message"))


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
