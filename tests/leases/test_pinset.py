"""PinSet: weak, per-component, lazily allocated, iteration-safe."""

from __future__ import annotations

import sys

import pytest

from leases import ComponentMismatchError, LeaseLedger, PinSet
from tests.leases.markers import Full, Mamba


def test_storage_is_allocated_on_first_pin(ledger: LeaseLedger) -> None:
    pins = PinSet(Full)
    assert not pins and len(pins) == 0 and list(pins) == []
    lease = ledger.acquire(Full, owner="x", pins=[pins])
    assert bool(pins) and len(pins) == 1
    lease.release()


def test_many_leases_of_one_component_pin_one_holder(ledger: LeaseLedger) -> None:
    pins = PinSet(Full, holder=12)
    leases = [ledger.acquire(Full, owner=f"load-back #{i}", pins=[pins]) for i in range(5)]
    assert len(pins) == 5 and pins.ids() == [lease.id for lease in leases]
    for lease in leases:
        lease.release()
    assert len(pins) == 0


def test_wrong_component_is_refused_and_rolled_back(ledger: LeaseLedger) -> None:
    full, mamba = PinSet(Full), PinSet(Mamba)
    with pytest.raises(ComponentMismatchError, match="Mamba"):
        ledger.acquire(Full, owner="x", pins=[full, mamba])  # type: ignore[list-item]  # lease: ignore[lease-discarded]
    assert len(full) == 0 and ledger.live_count == 0 and ledger.acquired == 0
    lease = ledger.acquire(Mamba, owner="y", pins=[mamba])
    with pytest.raises(ComponentMismatchError):
        ledger.pin(lease, full)  # type: ignore[misc]
    lease.release()


def test_iteration_is_safe_while_releasing(ledger: LeaseLedger) -> None:
    pins = PinSet(Full)
    leases = {lease.id: lease for lease in (ledger.acquire(Full, owner=str(i), pins=[pins]) for i in range(10))}
    seen = 0
    for view in pins:  # each release unlinks a lease from the set being iterated
        leases.pop(view.id).release()
        seen += 1
    assert seen == 10 and len(pins) == 0
    assert not leases


def test_pin_and_unpin_after_acquire(ledger: LeaseLedger) -> None:
    a, b = PinSet(Full, holder="a"), PinSet(Full, holder="b")
    lease = ledger.acquire(Full, owner="x", pins=[a])
    ledger.pin(lease, b)
    ledger.pin(lease, b)
    assert lease in a and lease in b and lease.pin_count == 2
    ledger.unpin(lease, a)
    assert lease not in a and lease in b
    lease.release()
    assert lease not in b  # lease: ignore[lease-use-after-release]


def test_unpinned_pin_set_is_small() -> None:
    assert sys.getsizeof(PinSet(Full)) <= 64


class _Holder:
    """A typed holder, as an engine's tree node is."""

    def __init__(self, ident: int) -> None:
        self.id = ident


def test_a_lease_names_its_pin_sets_and_their_typed_holders(ledger: LeaseLedger) -> None:
    a, b = _Holder(7), _Holder(9)
    pa: PinSet[Full, _Holder] = PinSet(Full, a)
    pb: PinSet[Full, _Holder] = PinSet(Full, b)
    lease = ledger.acquire(Full, owner="load-back #1", pins=(pa,))
    ledger.pin(lease, pb)
    assert lease.pin_sets() == (pa, pb)
    assert [p.holder for p in lease.pin_sets()] == [a, b]
    ledger.unpin(lease, pa)
    assert lease.pin_sets() == (pb,)
    last = ledger.events()[-1]
    assert last.nodes == (7,)  # a holder with an integer id is recorded by its id
    done = lease.release()
    assert done.pin_sets() == () and not pb


def test_has_answers_for_held_leases_only(ledger: LeaseLedger) -> None:
    pins = PinSet(Full, holder="n1")
    assert not pins.has(1)
    lease = ledger.acquire(Full, owner="x", pins=[pins])
    other = ledger.acquire(Full, owner="y")
    assert pins.has(lease.id) and not pins.has(other.id)
    lease_id = lease.id
    lease.release()
    assert not pins.has(lease_id)
    again = ledger.acquire(Full, owner="z", pins=[pins])
    ledger.advance_epoch()
    assert not pins.has(again.id)
    again.release()
    other.release()


def test_forget_drops_a_pin_behind_the_ledgers_back_and_release_still_works(ledger: LeaseLedger) -> None:
    pins = PinSet(Full, holder="n1")
    lease = ledger.acquire(Full, owner="x", pins=[pins])
    assert pins.forget(lease.id) and not pins.forget(lease.id)
    assert lease not in pins and lease.pin_sets() == (pins,), "the lease still lists the set: the injected fault"
    done = lease.release()
    assert done.pin_sets() == () and ledger.live_count == 0 and ledger.released == 1
