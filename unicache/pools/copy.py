"""`CopyOp`: one copy of rows between two tiers of a component's pools, and the `Tier`s.

Defined with the pools (which perform copies); `unicache.transfer` groups
them into jobs and re-exports both names.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


class Tier(enum.Enum):
    DEVICE = "device"
    HOST = "host"


class CopyOp:
    """Copy rows `src` of `component`'s `src_tier` pool into rows `dst` of its `dst_tier` pool.

    Rows are pages (Full, SWA) or state slots (Mamba); `src[i]` goes to
    `dst[i]`. The slot sequences are lists or `array("i")` (host pages are
    kept compact); treat them, and the op, as immutable.
    """

    __slots__ = ("component", "src_tier", "dst_tier", "src", "dst")

    src: Sequence[int]
    dst: Sequence[int]

    def __init__(
        self,
        component: type,
        src_tier: Tier,
        dst_tier: Tier,
        src: Sequence[int],
        dst: Sequence[int],
    ) -> None:
        self.component = component
        self.src_tier = src_tier
        self.dst_tier = dst_tier
        self.src = src
        self.dst = dst

    def __repr__(self) -> str:
        return (
            f"CopyOp({self.component.__name__} {self.src_tier.value}->{self.dst_tier.value}, "
            f"{len(self.src)} rows)"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "component": self.component.__name__,
            "src_tier": self.src_tier.value,
            "dst_tier": self.dst_tier.value,
            "src": list(self.src),
            "dst": list(self.dst),
        }
