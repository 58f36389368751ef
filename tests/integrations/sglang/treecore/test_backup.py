"""Write-through marks: `mark_write_through_pending` orders the nodes parents first, one lease marks them all."""

from __future__ import annotations

import random

from tests.integrations.sglang.chains import insert_tokens
from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.workload import build_cache

BASE = list(range(100, 116))


def _depth(core: UnicacheTreeCore, node_id: int) -> int:
    """The oracle: the number of ancestors, counted by walking up from the node."""
    d, up = 0, core.node(node_id).parent
    while up is not None:
        d, up = d + 1, up.parent
    return d


def test_marked_nodes_come_back_parents_first_then_by_id() -> None:
    setup = build_cache(backend="unicache", mamba=False, device_tokens=512, max_context_len=128,
                        policy="write_back")
    core = setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    insert_tokens(setup, BASE)
    for branch in range(4):
        stem = BASE + [1000 + 16 * branch + i for i in range(8)]
        insert_tokens(setup, stem)
        insert_tokens(setup, stem + [5000 + 16 * branch + i for i in range(8)])
    root = core.root
    ids = [x.id for x in core.nodes() if x is not root]
    assert len(ids) >= 9 and len({_depth(core, i) for i in ids}) >= 3, "a tree several levels deep"
    rng = random.Random(7)
    for ack, size in enumerate((1, 2, 5, len(ids)), start=900):
        batch = rng.sample(ids, size)
        order = core.mark_write_through_pending(batch, ack)
        assert order == sorted(batch, key=lambda i: (_depth(core, i), i))
        assert all(core.write_through_ack(core.node(i)) == ack for i in batch)
        core.finish_write_through(batch, ack)
        assert all(core.write_through_ack(core.node(i)) is None for i in batch)
    assert core.ledger.live_count == 0
