"""The core's own bounded record of acks and refused load-backs, kept whatever the lease history.

The ledger's flight recorder (`UNICACHE_SGLANG_LEASE_HISTORY`) is off by
default: it costs a record per lease acquire and release, several per
request. Acks and load-back attempts are far rarer (one per backup or
load-back), so the core keeps its own ring of them, always on: a dump of a
core running with the default settings still shows the last acks and why
the last load-backs were refused. Each entry also goes to the ledger's
ring (a no-op when it is off), where it sits among the lease events.

A refused load-back is seen, not told. SGLang's cache decides
(`UnifiedRadixCache._load_back_transfers`): it takes a host lock and a
device lock on the anchor, asks the core for the spec, and either commits
it or releases both locks (too few tokens for ``load_back_threshold``, over
the request's memory quota, no device room after evicting, or the
controller could not allocate). So the core keeps the spec it built last
(`LoadBackAttempt`) until the commit; a host-lock release on that anchor
before a commit is a refusal. Whether an eviction ran in between tells
the two families of reasons apart: SGLang evicts only when the device has
too little room, so a refusal after an eviction is ``no_device_room``
(with the protected tokens and the device leases that hold them), one
without is ``threshold_or_quota``; a spec with nothing on host is
``nothing_to_move``. One refusal is the core's own, told when it builds
the spec: under write-back, SGLang's rule that a load-back must not read an
auxiliary component's host copy another anchor's load-back still pins
(the spec comes back empty) is ``pinned_by_load_back``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from leases import EventKind, LeaseLedger

RECENT: Final = 128
"""Entries the record keeps (acks and refusals together, newest last)."""
PINNED_SHOWN: Final = 8
"""Device leases a ``no_device_room`` refusal names (the oldest first)."""


@dataclass(frozen=True, slots=True)
class CoreEvent:
    """One recorded ack or refusal, in the flight recorder's terms (`leases.LeaseEvent` less seq and step)."""

    kind: EventKind
    lease: int | None
    owner: str | None
    generation: int
    nodes: tuple[int, ...]
    detail: str


@dataclass(frozen=True, slots=True)
class LoadBackRefusal:
    """Why SGLang's cache gave up a load-back after the core built its spec."""

    anchor: int
    reason: str
    tokens: int
    nodes: tuple[int, ...]
    generation: int
    detail: str

    def to_json(self) -> dict[str, object]:
        return {"anchor": self.anchor, "reason": self.reason, "tokens": self.tokens, "nodes": list(self.nodes),
                "generation": self.generation, "detail": self.detail}


class LoadBackAttempt:
    """The spec built last, until SGLang commits it or gives it up."""

    __slots__ = ("anchor", "tokens", "nodes", "evicted", "declined")

    def __init__(self, anchor: int, tokens: int, nodes: tuple[int, ...], declined: str | None = None) -> None:
        self.anchor = anchor
        self.tokens = tokens
        self.nodes = nodes
        self.evicted = False
        self.declined = declined
        """Why the core built an empty spec for a load-back it could have moved (None: it did not decline)."""


_Entry = tuple[EventKind, "int | None", object, int, list[int], "str | None", int, int]
"""(kind, lease, owner, generation, node ids, detail or None, ack id (-1: a load-back's), marked nodes):
formatted when read."""


def _detail(kind: EventKind, owner: object, nodes: list[int], ack: int, marked: int) -> str:
    if kind is EventKind.STALE_ACK:
        return f"write-through ack {ack}: no mark lease (revoked by a reset, or never marked)"
    if ack < 0:
        return f"{owner} settled: {len(nodes)} node(s) on device"
    return f"write-through ack {ack}: {len(nodes)} of {marked} marked node(s) backed up"


class CoreRecord:
    """Recent acks and load-back refusals of one core, and their counts.

    An ack is appended as a tuple of what it is (its text is made when the
    record is read: recording costs a tuple and an append, about 0.4 us).
    """

    __slots__ = ("ledger", "_entries", "refusals", "attempt", "write_through_acks", "load_back_acks", "stale_acks",
                 "load_backs", "refused")

    def __init__(self, ledger: LeaseLedger) -> None:
        self.ledger = ledger
        self._entries: deque[_Entry] = deque(maxlen=RECENT)
        self.refusals: deque[LoadBackRefusal] = deque(maxlen=RECENT)
        self.attempt: LoadBackAttempt | None = None
        self.write_through_acks = 0
        self.load_back_acks = 0
        self.stale_acks = 0
        self.load_backs = 0
        self.refused: dict[str, int] = {}

    @property
    def events(self) -> list[CoreEvent]:
        """The recorded entries, oldest first, as flight-recorder events."""
        return [self._event(entry) for entry in self._entries]

    @staticmethod
    def _event(entry: _Entry) -> CoreEvent:
        kind, lease, owner, generation, nodes, detail, ack, marked = entry
        text = detail if detail is not None else _detail(kind, owner, nodes, ack, marked)
        return CoreEvent(kind, lease, None if owner is None else str(owner), generation, tuple(nodes), text)

    def _add(self, entry: _Entry) -> None:
        self._entries.append(entry)
        if self.ledger.history:
            e = self._event(entry)
            self.ledger.record(e.kind, detail=e.detail, nodes=e.nodes, component="Full", lease_id=e.lease,
                               owner=e.owner, generation=e.generation)

    def write_through_ack(self, ack: int, lease: int, owner: object, generation: int, nodes: list[int],
                          marked: int) -> None:
        """Ack `ack` settled (or partly settled: `marked` nodes were marked) its mark lease `lease`."""
        self.write_through_acks += 1
        self._add((EventKind.ACK, lease, owner, generation, list(nodes), None, ack, marked))

    def load_back_ack(self, lease: int, owner: object, generation: int, nodes: list[int]) -> None:
        """A load-back's ack released its pin lease `lease` (`owner`: its `LoadBackPin`)."""
        self.load_back_acks += 1
        self._add((EventKind.ACK, lease, owner, generation, nodes, None, -1, 0))

    def stale_ack(self, ack: int, nodes: list[int]) -> None:
        """A write-through ack with no lease behind it (its mark was revoked by a reset, or never made)."""
        self.stale_acks += 1
        self._add((EventKind.STALE_ACK, None, None, self.ledger.epoch, list(nodes), None, ack, 0))

    def spec_built(self, anchor: int, tokens: int, nodes: list[int]) -> None:
        self.attempt = LoadBackAttempt(anchor, tokens, tuple(nodes))

    def spec_declined(self, anchor: int, tokens: int, nodes: list[int], why: str) -> None:
        """The core built an empty spec for `tokens` it could have moved (`why` names the pinning load-back)."""
        self.attempt = LoadBackAttempt(anchor, tokens, tuple(nodes), why)

    def evicting(self) -> None:
        """A device eviction walk starts: if a spec is pending, SGLang is making room for it."""
        attempt = self.attempt
        if attempt is not None:
            attempt.evicted = True

    def committed(self) -> None:
        self.attempt = None
        self.load_backs += 1

    def given_up(self, anchor: int, protected: int, total: int, pinning: list[int]) -> None:
        """SGLang released the host lock of `anchor` with the spec built for it uncommitted: a refusal.

        `protected` / `total`: device tokens pinned / held now; `pinning`: ids
        of the live device leases (locks and Full pins), oldest first.
        """
        attempt = self.attempt
        if attempt is None or attempt.anchor != anchor:
            return
        self.attempt = None
        n = attempt.tokens
        if attempt.declined is not None:
            reason = "pinned_by_load_back"
            detail = f"load-back at #{anchor} of {n} tokens declined: {attempt.declined}"
        elif n == 0:
            reason = "nothing_to_move"
            detail = f"load-back at #{anchor} refused: nothing to move (no host copies between it and the device)"
        elif attempt.evicted:
            reason = "no_device_room"
            shown = ", ".join(f"L{i}" for i in pinning[:PINNED_SHOWN])
            more = f", +{len(pinning) - PINNED_SHOWN} more" if len(pinning) > PINNED_SHOWN else ""
            detail = (f"load-back at #{anchor} refused: no device room for {n} tokens after eviction; "
                      f"{protected} of {total} device tokens pinned by {len(pinning)} device lease(s)"
                      f"{' (' + shown + more + ')' if pinning else ''}")
        else:
            reason = "threshold_or_quota"
            detail = (f"load-back at #{anchor} refused: {n} host tokens below SGLang's load_back_threshold, over "
                      f"the request's memory quota, or the controller refused the copy (no eviction was needed)")
        generation = self.ledger.epoch
        self.refused[reason] = self.refused.get(reason, 0) + 1
        self.refusals.append(LoadBackRefusal(anchor, reason, n, attempt.nodes, generation, detail))
        self._add((EventKind.NOTE, None, None, generation, list(dict.fromkeys((anchor, *attempt.nodes))), detail, 0, 0))

    def reset(self) -> None:
        self.attempt = None

    def counts(self) -> dict[str, int]:
        """The record's counters, by name (the dump's ``counters`` and the metrics read these)."""
        out = {"write_through_acks": self.write_through_acks, "load_back_acks": self.load_back_acks,
               "stale_acks": self.stale_acks, "load_backs": self.load_backs,
               "load_back_refusals": sum(self.refused.values())}
        for reason, n in sorted(self.refused.items()):
            out[f"load_back_refusals_{reason}"] = n
        return out
