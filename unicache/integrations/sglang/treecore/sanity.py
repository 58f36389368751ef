"""`sanity_check`: the tree's invariants, sizes and pins recomputed from the tree and the live leases."""

from __future__ import annotations

from collections import defaultdict

from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import NodeId
from mypy_extensions import mypyc_attr, trait

from unicache.integrations.sglang.treecore.errors import TreeCoreSanityError
from unicache.integrations.sglang.treecore.receipts import TreeReceipt
from unicache.integrations.sglang.treecore.state import FULL, TOKEN_BYTES, TreeState, lease_holders


@trait
@mypyc_attr(allow_interpreted_subclasses=True)
class SanityCheck(TreeState):
    """The sanity part of `UnicacheTreeCore` (see the module docstring)."""

    def sanity_check(self, ongoing_write_through: list[tuple[int, NodeId]],
                     ongoing_load_back: list[tuple[int, NodeId]]) -> None:
        """Recompute the tree's invariants, the sizes and every pin from the live leases; raise on any difference."""
        problems: list[str] = []
        store = self.store
        dev, host = store.dev, store.host_col
        w = self.page_size * TOKEN_BYTES
        seen: set[int] = set()
        total = protected = 0
        expected_dev: dict[int, int] = defaultdict(int)
        for x in self.tree:
            seen.add(x.id)
            if self._nodes.get(x.id) is not x:
                problems.append(f"node {x.id} is in the tree but not in the handle map")
            parent = x.parent
            if parent is None:
                continue
            if parent.children.get(x.kb[:w]) is not x:
                problems.append(f"node {x.id} is not its parent {parent.id}'s child")
            d = dev[x.slot]
            t = self._tensors.get(x.id)
            if (None if t is None else t.tolist()) != d:
                problems.append(f"node {x.id}: the device tensor kept for it differs from its values")
            if d is not None:
                total += len(d)
                if len(d) != x.end - x.start:
                    problems.append(f"node {x.id}: {len(d)} device values for {x.end - x.start} tokens")
                if parent is not self.root and dev[parent.slot] is None:
                    problems.append(f"node {x.id} is on device below host-only node {parent.id}")
                if self._dev_pinned(x):
                    protected += len(d)
            elif host[x.slot] is None:
                problems.append(f"node {x.id} holds Full KV on neither tier")
            kids = sum(1 for c in x.children.values() if dev[c.slot] is not None)
            if kids != x.dev_children:
                problems.append(f"node {x.id}: dev_children {x.dev_children}, {kids} children on device")
            if self.is_evictable_device_leaf(x) and not x.lru & store.lru_device.bit:
                problems.append(f"node {x.id} is an evictable device leaf missing from the device queue")
            if self.is_evictable_host_leaf(x) and not x.lru & store.lru_host.bit:
                problems.append(f"node {x.id} is an evictable host leaf missing from the host queue")
        if set(self._nodes) != seen:
            problems.append(f"handles of removed nodes still mapped: {sorted(set(self._nodes) - seen)}")
        if (total, protected) != (self._total, self._protected):
            problems.append(f"sizes: total {self._total} protected {self._protected}, recomputed {total} {protected}")
        for lease in list(self.device_locks.values()) + [p for s in self.full_pins.values() for p in s]:
            owner = lease.owner
            assert isinstance(owner, TreeReceipt)
            anchor = self._nodes.get(owner.node_id or -1)
            if anchor is None:
                problems.append(f"{owner} (anchor {owner.node_id}): anchor is not a live node")
                continue
            want = {x.id for x in ([] if FULL in owner.acquire_skipped else self._path(anchor))}
            got = {x.id for x in lease_holders(lease)}
            if want != got:
                problems.append(f"{owner} on node {anchor.id}: pins {sorted(got)}, its path is {sorted(want)}")
            for nid in want:
                expected_dev[nid] += 1
        for x in self.tree:
            if x is not self.root and self.device_lock_count(x) != expected_dev.get(x.id, 0):
                problems.append(f"node {x.id}: {self.device_lock_count(x)} device pins, "
                                f"{expected_dev.get(x.id, 0)} leases cover it")
        nodes = list(self.tree)
        for comp in self.aux:
            comp.sanity(nodes, problems)
        held = (len(self.device_locks) + len(self.host_locks) + len(self.write_marks) + sum(c.held() for c in self.aux)
                + sum(len(s) for s in self.full_pins.values()) + sum(len(f) for f in self.load_backs.values()))
        if held != self.ledger.live_count:
            problems.append(f"{self.ledger.live_count} live leases, the core holds {held}")
        for ack, nid in ongoing_write_through:
            if ack not in self.write_marks:
                problems.append(f"write-through ack {ack} (node {nid}) has no mark lease")
        for anchor_id, _nid in ongoing_load_back:
            anchor = self._nodes.get(anchor_id)
            if anchor is None or not self.load_backs.get(anchor_id):
                problems.append(f"load-back anchor {anchor_id} is not live or has no load-back pin lease")
            elif not self._dev_pinned(anchor):
                problems.append(f"load-back anchor {anchor_id} is not device-locked")
        if problems:
            raise TreeCoreSanityError(problems)
