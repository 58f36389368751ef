"""Lease lifecycle: acquire, release exactly once, identity, sites."""

from __future__ import annotations

import weakref

import pytest

from leases import (
    DoubleReleaseError,
    Held,
    Lease,
    LeaseLedger,
    PinSet,
    Settle,
    StaleLeaseError,
)
from tests.leases.markers import Full, Mamba


def test_acquire_sets_identity_and_pins(ledger: LeaseLedger, full_pins: PinSet[Full]) -> None:
    lease = ledger.acquire(Full, owner="load-back #7", pins=[full_pins])
    assert lease in full_pins
    assert lease.generation == ledger.epoch == 0
    assert lease.component is Full
    assert lease.owner == "load-back #7"
    assert lease.held and lease.outcome is None
    assert lease.site is not None and "test_lease.py" in lease.site
    assert "test_acquire_sets_identity_and_pins" in lease.site
    lease_id = lease.id
    done = lease.release()
    assert done.id == lease_id and done.outcome is Settle.RELEASED
    assert done not in full_pins and len(full_pins) == 0


def test_ids_are_unique_and_never_reused(ledger: LeaseLedger) -> None:
    seen = set()
    for _ in range(50):
        lease = ledger.acquire(Full, owner="x")
        assert lease.id not in seen
        seen.add(lease.id)
        lease.release()
    ledger.advance_epoch()
    lease = ledger.acquire(Full, owner="x")
    assert lease.id not in seen
    lease.release()


def test_double_release_raises_naming_the_lease(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="req-3")
    lease_id = lease.id
    lease.release()
    with pytest.raises(DoubleReleaseError) as err:
        lease.release()  # lease: ignore[lease-double-release]
    msg = str(err.value)
    for part in (f"lease #{lease_id}", "Full", "req-3", "generation 0", "'test'", "acquired at"):
        assert part in msg
    assert err.value.lease is not None and err.value.lease.id == lease_id
    assert ledger.released == 1


def test_leases_cannot_be_constructed_directly() -> None:
    with pytest.raises(TypeError, match="LeaseLedger.acquire"):
        Lease()  # lease: ignore[lease-discarded]


def test_lease_is_weakly_referenceable(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="x")
    ref = weakref.ref(lease)
    assert ref() is lease
    lease.release()


def test_site_only_in_debug_mode() -> None:
    quiet = LeaseLedger("quiet")
    lease = quiet.acquire(Full, owner="x")
    assert lease.site is None
    lease.release()


def test_stacklevel_picks_the_callers_frame(ledger: LeaseLedger) -> None:
    def helper() -> Lease[Full, Held]:
        return ledger.acquire(Full, owner="x", stacklevel=2)

    lease = helper()
    assert lease.site is not None and lease.site.endswith(":test_stacklevel_picks_the_callers_frame")
    lease.release()


def test_ensure_current_after_revoke(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Mamba, owner="x")
    lease.ensure_current()
    ledger.advance_epoch()
    with pytest.raises(StaleLeaseError, match=f"lease #{lease.id}"):
        lease.ensure_current()
    assert lease.release().outcome is Settle.STALE


def test_repr_and_describe(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="lock #2")
    assert repr(lease).startswith(f"<Lease #{lease.id} Full gen=0 owner='lock #2' held")
    assert "ledger 'test'" in lease.describe()
    done = lease.release()
    assert "released" in repr(done)
