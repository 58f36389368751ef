"""`untracked(value, reason=...)`: hand an owned value on where leasecheck cannot follow it.

leasecheck reports `lease-untracked` wherever a held lease or `@linear`
instance flows into something it does not model (an `Any`, a dynamically
resolved callee, a `functools.partial`, an awaitable it cannot await, a
generic result). Wrapping the value in `untracked(...)` says that this is
meant: the checker stops following that value there, counts the escape and
lists it with its reason under `leasecheck --partial`. The run time still
checks it: the value must be live when it is handed over (a lease that is
not yet settled, a `@linear` instance not yet consumed), the reason must say
something, and a lease that the untracked code later drops unreleased is
reported by its ledger's leak detector like any other.
"""

from __future__ import annotations

from typing import TypeVar

from leases.errors import DoubleReleaseError, LeaseArgumentError
from leases.lease import Lease
from leases.linear import consumed_by, is_linear
from leases.state import Settle

_T = TypeVar("_T")

_SETTLED = (Settle.RELEASED, Settle.STALE, Settle.LEAKED)


def untracked(value: _T, *, reason: str) -> _T:
    """Return `value` unchanged; leasecheck does not follow it past this call.

    Raises `LeaseArgumentError` for an empty reason and `DoubleReleaseError`
    for a lease already settled or a `@linear` instance already consumed.
    """
    if not isinstance(reason, str) or not reason.strip():
        raise LeaseArgumentError(f"untracked({value!r}) needs a reason saying who owns it now")
    if isinstance(value, Lease):
        outcome = value.outcome
        if outcome is not None and outcome in _SETTLED:
            raise DoubleReleaseError(
                f"{value.describe()} is no longer held ({outcome.value}); it cannot be "
                f"handed to untracked code ({reason})",
                lease=value.info(),
            )
    elif is_linear(value) and not isinstance(value, type):
        by = consumed_by(value)
        if by is not None:
            raise DoubleReleaseError(
                f"{value!r} was already consumed by {by}(); it cannot be handed to untracked "
                f"code ({reason})"
            )
    return value
