"""Recompute SGLang's per-node lock counters from the live tree-lock leases.

`LeaseTreeCore.sanity_check` compares every node's `lock_ref` and
`host_lock_ref` (Full, SWA, Mamba) with what the live `TreeLock`s and Full
pins stand for (`add_expected_refs`); the root carries SGLang's permanent
device lock of 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sglang.srt.mem_cache.unified_cache.component_type import ComponentType

from unicache.integrations.sglang.locks import add_expected_refs

if TYPE_CHECKING:
    from unicache.integrations.sglang.core import LeaseTreeCore

_CHECKED = (ComponentType.FULL, ComponentType.SWA, ComponentType.MAMBA)


def expected_lock_refs(core: LeaseTreeCore) -> dict[tuple[int, int, bool], int]:
    """(node id, component, host) -> the count the live lock leases stand for."""
    out: dict[tuple[int, int, bool], int] = {}
    root = core.root_node
    write_back = core.is_write_back
    for lock in core.tree_locks.values():
        add_expected_refs(lock, core.node_by_id(lock.anchor), root, write_back, out)
    for pins in core.full_pins.values():
        for pin in pins:
            add_expected_refs(pin, core.node_by_id(pin.anchor), root, write_back, out)
    return out


def lock_problems(core: LeaseTreeCore) -> list[str]:
    """Every counter that differs from the live leases, and a ledger/lock count mismatch."""
    problems: list[str] = []
    expected = expected_lock_refs(core)
    checked = [int(ct) for ct in _CHECKED if ct in core.component_types]
    root = core.root_node
    for node in core._collect_all_nodes():
        base = 1 if node is root else 0
        for ct in checked:
            cd = node.component_data[ct]
            want = expected.get((node.id, ct, False), 0) + base
            if cd.lock_ref != want:
                problems.append(
                    f"node {node.id} component {ct}: lock_ref {cd.lock_ref}, live lock leases say {want}"
                )
            want = expected.get((node.id, ct, True), 0)
            if cd.host_lock_ref != want:
                problems.append(
                    f"node {node.id} component {ct}: host_lock_ref {cd.host_lock_ref}, "
                    f"live lock leases say {want}"
                )
    held = sum(len(lock.lease_ids()) for lock in core.tree_locks.values())
    held += sum(len(pin.lease_ids()) for pins in core.full_pins.values() for pin in pins)
    if core.lock_ledger.live_count != held:
        problems.append(f"lock ledger has {core.lock_ledger.live_count} live leases, locks hold {held}")
    return problems
