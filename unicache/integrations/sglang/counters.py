"""SGLang's lock counters as a guarded view: written only inside the lease core's lock operations.

SGLang's drivers keep the integer `ComponentData.lock_ref`/`host_lock_ref`
that its eviction fast paths read (`cd.lock_ref > 0`, LRU walkers, cursors).
On a lease core's nodes the `ComponentData` of each tree component is a
`GuardedComponentData` (same layout, class swapped at node creation): a
read finds the int in the instance dict as before, while a write of either
counter is refused with `LockCounterWriteError` (naming node, component and
field, counter unchanged) unless the core's `CounterGate` is open. The core opens it only for its lease acquires and
releases (SGLang's lock walk plus the lease), for splits (which copy a
child's counts onto its new parent) and for building the root; so the
counters move only together with a lease, and a stray write cannot make
them drift from the live leases. `sanity_check` still recomputes every
counter from the leases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Optional

from sglang.srt.mem_cache.unified_cache.components.base import ComponentData

from unicache.integrations.sglang.errors import LockCounterWriteError

if TYPE_CHECKING:
    from sglang.srt.mem_cache.unified_cache.unified_tree_core import UnifiedTreeNode


class CounterGate:
    """Whether the lock counters of one core's nodes may be written now (a depth, for nesting)."""

    __slots__ = ("open", "nodes")

    def __init__(self, nodes: Callable[[], Iterable[UnifiedTreeNode]]) -> None:
        self.open = 0
        self.nodes = nodes

    def owner_of(self, cd: object) -> tuple[Optional[int], Optional[int]]:
        """(node id, component) of a guarded `ComponentData`, for the error (a scan: error path only)."""
        for node in self.nodes():
            for ct, data in enumerate(node.component_data):
                if data is cd:
                    return node.id, ct
        return None, None


_COUNTERS = frozenset(("lock_ref", "host_lock_ref"))


def guarded_component_data(gate: CounterGate) -> type[ComponentData]:
    """A `ComponentData` subclass (same layout, so `__class__` can be swapped) whose counters `gate` guards.

    The check sits in `__setattr__`, not in a descriptor: reads of
    `lock_ref` stay plain instance-dict reads that CPython specializes (a
    data descriptor would make every read of SGLang's fast paths take the
    generic path, ~4% of the harness workload); writes of any field pay one
    Python call.
    """

    def __setattr__(cd: ComponentData, name: str, value: object) -> None:
        if gate.open or name not in _COUNTERS:
            object.__setattr__(cd, name, value)
            return
        node_id, ct = gate.owner_of(cd)
        raise LockCounterWriteError(node_id, ct, name, cd.__dict__.get(name), value)

    return type(
        "GuardedComponentData",
        (ComponentData,),
        {
            "__slots__": (),
            "__doc__": "SGLang's ComponentData whose lock counters only the lease core's lock operations write.",
            "__setattr__": __setattr__,
        },
    )
