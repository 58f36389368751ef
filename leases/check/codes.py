"""The ownership error codes, registered with mypy so its code options accept them.

Registering at import makes `--disable-error-code lease-leak` and inline
`# mypy: disable-error-code="lease-escape"` valid; the runner honours both.
"""

from __future__ import annotations

from typing import Final

from mypy.errorcodes import ErrorCode

CATEGORY: Final = "Ownership (leasecheck)"

LEAK: Final = ErrorCode(
    "lease-leak",
    "A held lease or linear value is left unreleased on some path",
    CATEGORY,
)
DOUBLE_RELEASE: Final = ErrorCode(
    "lease-double-release",
    "A lease or linear value is released/consumed twice, or a borrowed one is consumed",
    CATEGORY,
)
USE_AFTER_RELEASE: Final = ErrorCode(
    "lease-use-after-release", "A lease or linear value is used after it was released", CATEGORY
)
USE_AFTER_MOVE: Final = ErrorCode(
    "lease-use-after-move", "A lease or linear value is used after its ownership moved", CATEGORY
)
DISCARDED: Final = ErrorCode(
    "lease-discarded", "A freshly obtained lease or linear value is dropped", CATEGORY
)
ESCAPE: Final = ErrorCode(
    "lease-escape",
    "A lease or linear value escapes where ownership cannot be followed",
    CATEGORY,
)
NOT_OWNED: Final = ErrorCode(
    "lease-not-owned",
    "A value the function does not own (received as object, Any or a borrow) is consumed",
    CATEGORY,
)
OWNER: Final = ErrorCode(
    "lease-owner",
    "A class stores an owned value in an attribute but is not @linear",
    CATEGORY,
)
DANGLING: Final = ErrorCode(
    "lease-dangling",
    "An owned field is left holding a released or moved value",
    CATEGORY,
)
UNCHECKED: Final = ErrorCode(
    "lease-unchecked",
    "leasecheck could not analyse this code; say what it should assume",
    CATEGORY,
)

UNTRACKED: Final = ErrorCode(
    "lease-untracked",
    "A lease or linear value flows where leasecheck cannot follow it; hand it on through a "
    "tracked type or say so with untracked(value, reason=...)",
    CATEGORY,
)
PARTIAL: Final = "lease-partial"
"""Not an error: the code of the notes `leasecheck --partial` lists (escapes, suppressions, ...)."""

ALL_CODES: Final = (
    LEAK, DOUBLE_RELEASE, USE_AFTER_RELEASE, USE_AFTER_MOVE, DISCARDED, ESCAPE, NOT_OWNED, OWNER,
    DANGLING, UNCHECKED, UNTRACKED,
)
CODE_NAMES: Final = frozenset(code.code for code in ALL_CODES)
