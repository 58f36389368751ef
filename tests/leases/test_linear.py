"""@linear / @consumes: a consumed instance refuses a second consumption."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from leases import DoubleReleaseError, Held, Lease, LeaseLedger, consumed_by, consumes, is_linear, linear, takes_from


@linear
class Ticket:
    def __init__(self, ticket_id: int) -> None:
        self.ticket_id = ticket_id

    def __repr__(self) -> str:
        return f"<Ticket #{self.ticket_id}>"

    @consumes
    def settle(self) -> int:
        return self.ticket_id


@linear
@dataclass(slots=True)
class Receipt:
    request: str

    @consumes
    def unlock(self, why: str) -> str:
        if why == "boom":
            raise RuntimeError("boom")
        return f"{self.request}:{why}"


@linear
class Slotted:
    __slots__ = ("x",)

    def __init__(self) -> None:
        self.x = 1

    @consumes
    def close(self) -> None:
        pass


def test_second_consumption_raises_naming_the_object() -> None:
    t = Ticket(7)
    assert consumed_by(t) is None and is_linear(t)
    assert t.settle() == 7
    assert consumed_by(t) == "settle"  # lease: ignore[lease-use-after-release]
    with pytest.raises(DoubleReleaseError, match=r"<Ticket #7> was already consumed by settle\(\)"):
        t.settle()  # lease: ignore[lease-double-release]


def test_slotted_dataclass_gets_a_flag_slot() -> None:
    r = Receipt("req-1")
    assert r.unlock("done") == "req-1:done"
    with pytest.raises(DoubleReleaseError):
        r.unlock("again")  # lease: ignore[lease-double-release]
    assert not hasattr(r, "__dict__")  # lease: ignore[lease-use-after-release]


def test_plain_slotted_class() -> None:
    s = Slotted()
    s.close()
    with pytest.raises(DoubleReleaseError):
        s.close()  # lease: ignore[lease-double-release]
    assert Slotted.__qualname__ == "Slotted"


def test_a_raising_consumer_leaves_the_instance_live() -> None:
    r = Receipt("req-2")
    with pytest.raises(RuntimeError):
        r.unlock("boom")
    assert consumed_by(r) is None  # lease: ignore[lease-use-after-release]
    assert r.unlock("ok") == "req-2:ok"  # lease: ignore[lease-double-release]


class _Tables:
    def __init__(self, ledger: LeaseLedger) -> None:
        self.locks: dict[int, Lease[_Tables, Held]] = {1: ledger.acquire(_Tables, owner="t")}

    @takes_from("locks")
    def unlock(self, key: int) -> int:
        lease = self.locks.pop(key)
        lease_id = lease.id
        lease.release()
        return lease_id


def test_takes_from_returns_the_method_itself() -> None:
    """The contract is for leasecheck only: no wrapper, no run-time check."""
    raw = _Tables.__dict__["unlock"]
    assert raw.__name__ == "unlock" and not hasattr(raw, "__wrapped__")
    ledger = LeaseLedger("takes")
    tables = _Tables(ledger)
    lease_id = tables.locks[1].id
    assert tables.unlock(1) == lease_id
    assert tables.locks == {} and ledger.live() == []
