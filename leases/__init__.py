"""Ownership-typed, generation-tagged capability tokens ("leases").

Engine-agnostic: imports neither torch nor unicache. See DESIGN §3 and the
README for the ownership rules `leasecheck` enforces statically.
"""

from leases.borrow import Borrowed
from leases.errors import (
    ComponentMismatchError,
    DoubleReleaseError,
    DuplicatePinError,
    ForeignLeaseError,
    LeaseArgumentError,
    LeaseError,
    LeaseInfo,
    LeaseLeakError,
    StaleLeaseError,
    WrongThreadError,
)
from leases.events import EventKind, LeaseEvent, TicketBearer
from leases.holdtimes import HoldTimes
from leases.lease import Lease
from leases.ledger import LeaseLedger, add_leak_listener, remove_leak_listener
from leases.linear import consumed_by, consumes, is_linear, linear, takes_from
from leases.mailbox import Mailbox
from leases.pinset import PinSet
from leases.state import Held, Released, Settle
from leases.untracked import untracked
from leases.watchdog import LeaseWatchdog, OverdueLease, WatchdogError

__all__ = [
    "Borrowed",
    "ComponentMismatchError",
    "DoubleReleaseError",
    "DuplicatePinError",
    "EventKind",
    "TicketBearer",
    "WatchdogError",
    "ForeignLeaseError",
    "Held",
    "HoldTimes",
    "Lease",
    "LeaseArgumentError",
    "LeaseError",
    "LeaseEvent",
    "LeaseInfo",
    "LeaseLeakError",
    "LeaseLedger",
    "LeaseWatchdog",
    "Mailbox",
    "OverdueLease",
    "PinSet",
    "Released",
    "Settle",
    "StaleLeaseError",
    "WrongThreadError",
    "add_leak_listener",
    "consumed_by",
    "consumes",
    "is_linear",
    "linear",
    "remove_leak_listener",
    "takes_from",
    "untracked",
]
