"""Phantom lease states and the typed outcomes of settling a lease."""

from __future__ import annotations

import enum
from typing import TypeVar, final


@final
class Held:
    """Phantom state: the lease is live and its owner must release it exactly once."""


@final
class Released:
    """Phantom state: the lease was consumed; it has no `release`."""


S = TypeVar("S", Held, Released)


class Settle(enum.Enum):
    """How a lease stopped being held.

    RELEASED: its owner released it while current.
    REVOKED:  an epoch advance revoked it; its owner has not released it yet.
    STALE:    its owner released it after it had been revoked (the owner learns
              the revocation from this outcome; nothing is raised).
    LEAKED:   its last strong reference died while it was held or revoked.
    """

    RELEASED = "released"
    REVOKED = "revoked"
    STALE = "stale"
    LEAKED = "leaked"
