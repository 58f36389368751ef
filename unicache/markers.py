"""Component markers: plain classes that type leases and pin sets (`Lease[Full, Held]`).

The bottom of the cache's layers (beside `unicache.errors`): config, pools,
tree and components all name components by these markers.
"""

from __future__ import annotations

from typing import Final, NewType, final


@final
class Full:
    """Full-attention KV: per-token pages along the whole path; the base component."""


@final
class SWA:
    """Sliding-window KV: per-token pages, only the last `swa_window` tokens of a path are needed."""


@final
class Mamba:
    """Recurrent (Mamba / linear-attention) state: one slot holding the state at a node's end."""


Component = type[Full] | type[SWA] | type[Mamba]

ComponentIndex = NewType("ComponentIndex", int)
"""A component's place in eviction priority (0 highest): the key of every per-component container."""

FULL: Final = ComponentIndex(0)
SWA_IDX: Final = ComponentIndex(1)
MAMBA: Final = ComponentIndex(2)

COMPONENTS: Final[tuple[Component, ...]] = (Full, SWA, Mamba)
"""Every marker, in eviction priority order (highest first): Full > SWA > Mamba."""

_INDEX: Final[dict[type, ComponentIndex]] = {Full: FULL, SWA: SWA_IDX, Mamba: MAMBA}


def component_index(component: type) -> ComponentIndex:
    """The index of a marker (0 Full, 1 SWA, 2 Mamba); a `KeyError` for anything else."""
    return _INDEX[component]


def component_name(component: type) -> str:
    """Lower-case name used in pool names and reports: "full", "swa", "mamba"."""
    return component.__name__.lower()
