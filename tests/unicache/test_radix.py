"""RadixTree structure: walk, split (the lower fragment keeps its identity), remove."""

from __future__ import annotations

import subprocess
import sys
from array import array

import pytest

from unicache import Full, InvalidArgumentError
from unicache.components.full import FullStore
from unicache.pools.allocator import SlotAllocator
from unicache.tree import Node, RadixTree, common_pages, encode_tokens


def test_common_pages() -> None:
    assert common_pages((1, 2, 3, 4), (1, 2, 3, 4), 2) == 4
    assert common_pages((1, 2, 3, 4), (1, 2, 3, 5), 2) == 2
    assert common_pages((1, 2, 3, 4), (1, 2, 3, 5), 1) == 3
    assert common_pages((1, 2), (1, 2, 3, 4), 1) == 2
    assert common_pages(tuple(range(100)), tuple(range(57)) + (0,) * 43, 4) == 56
    for tw in (4, 8):
        a, b = encode_tokens(range(100), tw), encode_tokens(list(range(57)) + [0] * 43, tw)
        assert common_pages(a, b, 4 * tw) == 56 * tw  # key bytes: pages in bytes


def _full_store() -> FullStore:
    return FullStore(SlotAllocator("full.device", 64), SlotAllocator("full.host", 64))


@pytest.mark.parametrize("tw", [4, 8])
def test_walk_split_keeps_lower_identity(tw: int) -> None:
    splits: list[tuple[int, int]] = []
    t = RadixTree(2, on_split=lambda up, low: splits.append((up.id, low.id)), token_bytes=tw)
    assert t.token_bytes == tw and t.page_bytes == 2 * tw
    full = _full_store()
    t.register(Full, full)
    a = t.add_leaf(t.root, encode_tokens([1, 2, 3, 4, 5, 6], tw))
    full.set_device(a, [10, 11, 12])
    full.set_host(a, array("i", [20, 21, 22]))
    node, pos, path = t.walk(encode_tokens([1, 2, 3, 4, 9, 9], tw), 6)
    assert pos == 4 and path == [node] and node is not a
    assert node.key == (1, 2, 3, 4) and full.device_slots(node) == [10, 11] and full.host_list(node) == [20, 21]
    assert a.key == (5, 6) and a.start == 4 and a.end == 6 and a.parent is node
    assert full.device_slots(a) == [12] and splits == [(node.id, a.id)]
    node2, pos2, path2 = t.walk(encode_tokens([1, 2, 3, 4, 5, 6, 7, 8], tw), 8)
    assert node2 is a and pos2 == 6 and path2 == [node, a]
    assert [x.id for x in t] == [t.root.id, node.id, a.id] and t.size == 3
    t.remove_leaf(a)
    assert not a.alive and t.size == 2 and not node.children
    assert isinstance(node, Node) and node.tokens() == (1, 2, 3, 4)


def test_slots_are_recycled_and_dead_nodes_read_nothing() -> None:
    t = RadixTree(1)
    full = _full_store()
    t.register(Full, full)
    assert full.device_slots(t.root) == [] and t.root.slot == 1
    a = t.add_leaf(t.root, encode_tokens([1], 4))
    full.set_device(a, [5])
    slot = a.slot
    assert full.columns() == t.slots == 3
    full.dev[slot] = None  # the cache frees residency before removal
    t.remove_leaf(a)
    assert a.slot == 0 and full.device_slots(a) is None  # a dead handle reads the null slot
    b = t.add_leaf(t.root, encode_tokens([2], 4))
    assert b.slot == slot and b.id != a.id and full.device_slots(b) is None  # recycled, cleared
    assert full.columns() == 3 and full.device_slots(a) is None
    t.clear()
    assert not b.alive and b.slot == 0 and full.columns() == 2 and full.device_slots(t.root) == []


def test_bookkeeping_modules_do_not_import_torch() -> None:
    code = (
        "import sys; import unicache.tree, unicache.components, unicache.config, "
        "unicache.tickets, unicache.sanity, unicache.transfer.base, unicache.pools.allocator, "
        "unicache; assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_key_width_is_checked() -> None:
    with pytest.raises(InvalidArgumentError, match="token_bytes must be 4 or 8, got 2"):
        RadixTree(1, token_bytes=2)
