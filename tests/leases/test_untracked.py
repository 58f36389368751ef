"""`untracked(value, reason=...)`: the static escape still checks the value at run time."""

from __future__ import annotations

import pytest

from leases import DoubleReleaseError, LeaseArgumentError, LeaseLedger, consumes, linear, untracked
from tests.leases.markers import Full


@linear
class Ticket:
    def __init__(self, ticket_id: int) -> None:
        self.ticket_id = ticket_id

    def __repr__(self) -> str:
        return f"<Ticket #{self.ticket_id}>"

    @consumes
    def close(self) -> None:
        pass


def test_a_live_lease_passes_through_unchanged(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="handed over")
    same = untracked(lease, reason="the test releases it below")
    assert same is lease and same.held
    same.release()
    assert ledger.live() == []


def test_a_released_lease_is_refused_naming_it(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="done")
    lease_id = lease.id
    lease.release()
    with pytest.raises(DoubleReleaseError, match=f"lease #{lease_id} .*no longer held"):
        untracked(lease, reason="too late")  # lease: ignore


def test_a_revoked_lease_may_still_be_handed_over(ledger: LeaseLedger) -> None:
    lease = ledger.acquire(Full, owner="revoked")
    ledger.advance_epoch()
    kept = untracked(lease, reason="its owner releases it after the reset")
    assert kept.release().outcome is not None


def test_a_consumed_linear_value_is_refused() -> None:
    ticket = Ticket(7)
    ticket.close()
    with pytest.raises(DoubleReleaseError, match=r"<Ticket #7> was already consumed by close\(\)"):
        untracked(ticket, reason="too late")  # lease: ignore


def test_an_empty_reason_is_refused_before_anything() -> None:
    with pytest.raises(LeaseArgumentError, match="needs a reason"):
        untracked(Ticket(8), reason="  ")  # lease: ignore[lease-untracked]


def test_plain_values_pass_through() -> None:
    box = [1, 2]
    assert untracked(box, reason="not owned at all") is box
