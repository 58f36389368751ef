"""The records of a crash dump, one frozen dataclass per JSON object; decoded by their field types.

Field metadata narrows what :func:`unicache.dump.decode.decode` accepts: ids,
sizes and counters are ``minimum: 0``, names come from closed sets
(components, tiers, event kinds), free-form sections are ``raw``. Checks that
span fields live in each record's ``validate``; checks that span records
(references, slot ranges) in :class:`unicache.dump.schema.CrashDump`, and the
consistency findings in :mod:`unicache.dump.consistency`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from leases import EventKind

from unicache.dump.decode import JSONObject, Record, at, is_int, type_name
from unicache.dump.errors import DumpFormatError

COMPONENT_NAMES = ("full", "swa", "mamba")
TIERS = ("device", "host")
_EVENT_KINDS = frozenset(k.value for k in EventKind)

ID = {"minimum": 0}
COMPONENT = {"choices": COMPONENT_NAMES, "label": "component"}
TIER = {"choices": TIERS, "label": "tier"}
RAW = {"raw": True}


@dataclass(frozen=True, slots=True)
class DumpResidency(Record):
    """One component of one node: device and host slots (pages, or one Mamba slot) and pinning leases."""

    device: tuple[int, ...] | int | None = field(metadata=ID)
    host: tuple[int, ...] | int | None = field(metadata=ID)
    pins: tuple[int, ...] = field(metadata=ID)

    def check_shape(self, component: str, where: str) -> None:
        """Mamba holds one slot per tier; Full and SWA hold page lists."""
        for tier in TIERS:
            value = getattr(self, tier)
            if value is None:
                continue
            if component == "mamba" and not is_int(value):
                raise DumpFormatError(at(where, tier), f"expected an int or null, got {type_name(list(value))}")
            if component != "mamba" and is_int(value):
                raise DumpFormatError(at(where, tier), "expected a list of ints or null, got an int")

    def slots(self, tier: str) -> tuple[int, ...]:
        """The tier's slots as a tuple (empty when not resident)."""
        value = self.device if tier == "device" else self.host
        if value is None:
            return ()
        return (value,) if isinstance(value, int) else value

    @property
    def tiers(self) -> str:
        """"D", "H", "DH" or "-"."""
        out = ("D" if self.device is not None else "") + ("H" if self.host is not None else "")
        return out or "-"


@dataclass(frozen=True, slots=True)
class DumpNode(Record):
    """A tree node: its edge, structure, recency and per-component residency."""

    id: int = field(metadata=ID)
    parent: int | None = field(metadata=ID)
    start: int = field(metadata=ID)
    end: int = field(metadata=ID)
    key: tuple[int, ...] = field()
    children: tuple[int, ...] = field(metadata=ID)
    last_access: int = field()
    hits: int = field(metadata=ID)
    components: dict[str, DumpResidency] = field(metadata={"keys": COMPONENT_NAMES, "label": "component"})

    def validate(self, where: str) -> None:
        if self.end - self.start != len(self.key):
            raise DumpFormatError(
                at(where, "key"),
                f"node {self.id}: key has {len(self.key)} tokens but spans [{self.start}:{self.end})",
            )
        for name, residency in self.components.items():
            residency.check_shape(name, at(at(where, "components"), name))

    def pins(self) -> dict[str, tuple[int, ...]]:
        """Pinning lease ids by component, only components with at least one pin."""
        return {name: r.pins for name, r in self.components.items() if r.pins}


@dataclass(frozen=True, slots=True)
class DumpLease(Record):
    """A live lease: who holds it, its epoch, where it was acquired, and what it pins.

    `nodes` are the nodes whose pin set holds it at capture time; `scope` is
    what the cache recorded when it acquired the lease (they differ only on a bug).
    `component` is lower-case ("full", "swa", "mamba").
    """

    id: int = field(metadata=ID)
    component: str = field(metadata=COMPONENT)
    owner: str = field()
    generation: int = field(metadata=ID)
    site: str | None = field()
    nodes: tuple[int, ...] = field(metadata=ID)
    scope: tuple[int, ...] | None = field(metadata=ID)


@dataclass(frozen=True, slots=True)
class DumpLeak(Record):
    """A lease whose last reference died while held, with where it was acquired (ledger spelling of `component`)."""

    id: int = field(metadata=ID)
    component: str = field()
    owner: str = field()
    generation: int = field(metadata=ID)
    site: str | None = field()


@dataclass(frozen=True, slots=True)
class DumpLedger(Record):
    """The ledger's identity and counters, and every leak it recorded."""

    name: str = field()
    epoch: int = field(metadata=ID)
    step: int = field(metadata=ID)
    counters: dict[str, int] = field(metadata=ID)
    leaks: tuple[DumpLeak, ...] = field()


@dataclass(frozen=True, slots=True)
class DumpCopy(Record):
    """One slot copy of a ticket: rows `src` of one pool into rows `dst` of another."""

    component: str = field(metadata=COMPONENT)
    src_tier: str = field(metadata=TIER)
    dst_tier: str = field(metadata=TIER)
    src: tuple[int, ...] = field(metadata=ID)
    dst: tuple[int, ...] = field(metadata=ID)

    def validate(self, where: str) -> None:
        if len(self.src) != len(self.dst):
            raise DumpFormatError(at(where, "dst"), f"copies {len(self.src)} rows into {len(self.dst)}")


@dataclass(frozen=True, slots=True)
class DumpTicket(Record):
    """A live transfer ticket (load-back or backup) and the lease it owns per component.

    `node` is the load-back anchor or the bottom of the backed-up chain.
    """

    id: int = field(metadata=ID)
    generation: int = field(metadata=ID)
    kind: str = field()
    node: int = field(metadata=ID)
    status: str = field()
    owner: str = field()
    leases: dict[str, int] = field(metadata={"minimum": 0, "keys": COMPONENT_NAMES, "label": "component"})
    copies: tuple[DumpCopy, ...] = field()
    abandoned: bool = field()


@dataclass(frozen=True, slots=True)
class DumpJob(Record):
    """A job the transfer engine still holds (its ack not yet delivered)."""

    ticket: int = field(metadata=ID)
    generation: int = field(metadata=ID)
    kind: str = field()
    withheld: bool = field()


@dataclass(frozen=True, slots=True)
class DumpTransfer(Record):
    """The transfer engine: its class, how many jobs it has not acked, and those it can list."""

    engine: str = field()
    pending: int = field(metadata=ID)
    jobs: tuple[DumpJob, ...] = field()


@dataclass(frozen=True, slots=True)
class DumpQuarantine(Record):
    """Slots held back from the free lists until a (stale) ticket's ack arrives."""

    ticket: int = field(metadata=ID)
    generation: int = field(metadata=ID)
    kind: str = field()
    slots: dict[str, tuple[int, ...]] = field(metadata=ID)


@dataclass(frozen=True, slots=True)
class DumpPool(Record):
    """Occupancy of one pool, in rows (pages or slots); quarantined rows are counted in `used`."""

    capacity: int = field(metadata=ID)
    free: int = field(metadata=ID)
    used: int = field(metadata=ID)
    quarantined: int = field(metadata=ID)

    def validate(self, where: str) -> None:
        if self.free + self.used != self.capacity:
            raise DumpFormatError(where, f"free {self.free} + used {self.used} is not the capacity {self.capacity}")
        if self.quarantined > self.used:
            raise DumpFormatError(at(where, "quarantined"),
                                  f"{self.quarantined} quarantined rows but only {self.used} used")


@dataclass(frozen=True, slots=True)
class DumpEvent(Record):
    """One flight-recorder entry (see `leases.LeaseEvent`)."""

    seq: int = field(metadata=ID)
    step: int = field(metadata=ID)
    kind: str = field(metadata={"choices": _EVENT_KINDS, "label": "event kind"})
    lease: int | None = field(metadata=ID)
    component: str | None = field()
    owner: str | None = field()
    generation: int = field(metadata=ID)
    nodes: tuple[int | str, ...] = field(metadata=ID)
    ticket: int | None = field(metadata=ID)
    detail: str = field()


@dataclass(frozen=True, slots=True)
class DumpViolation(Record):
    """One sanity-check finding."""

    kind: str = field()
    node: int | None = field(metadata=ID)
    component: str | None = field()
    lease: int | None = field(metadata=ID)
    detail: str = field()


@dataclass(frozen=True, slots=True)
class DumpSanity(Record):
    """The sanity check run while dumping."""

    ok: bool = field()
    violations: tuple[DumpViolation, ...] = field()


@dataclass(frozen=True, slots=True)
class DumpedError(Record):
    """The exception that caused the dump: class, message, traceback lines, and the ids it carried."""

    type: str = field()
    module: str = field()
    message: str = field()
    traceback: tuple[str, ...] = field()
    ids: JSONObject = field(metadata=RAW)


@dataclass(frozen=True, slots=True)
class CaptureError(Record):
    """A section the writer could not capture (the cache may be corrupt); the rest is still there."""

    section: str = field()
    type: str = field()
    message: str = field()
