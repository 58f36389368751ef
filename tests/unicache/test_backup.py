"""Backups: write-through chains at the hit threshold, and state added to a backed node."""

from __future__ import annotations

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, host_full_of
from unicache.tree.pins import backup_in_flight


def test_write_through_backs_up_chain_at_threshold(make_cache: MakeCache) -> None:
    cache, d = make_cache(write_policy="write_through", write_through_threshold=2)
    res = d.compute(SEQ[:4])
    assert res is not None and cache.in_flight() == 0  # 1 hit < 2
    assert d.serve(SEQ[:8]) is not None  # [0,4) reaches 2 hits
    assert cache.in_flight() == 1
    d.settle()
    a = cache.match_prefix(SEQ[:4]).device_node
    assert host_full_of(a) is not None
    assert d.serve(SEQ[:8]) is not None  # [4,8) reaches 2 hits
    d.settle()
    b = cache.match_prefix(SEQ[:8]).device_node
    assert host_full_of(b) is not None and cache.counters.backups == 2
    d.assert_ok()


def test_write_through_backs_up_a_mamba_state_added_to_a_backed_node(
    make_cache: MakeCache,
) -> None:
    cache, d = make_cache(mamba=True, write_policy="write_through", write_through_threshold=1)
    res = d.compute(SEQ[:4], mamba=False)  # Full only: backed up at once
    assert res is not None and cache.in_flight() == 1
    d.settle()
    a = res.node
    assert host_full_of(a) is not None and (a.dev_mamba, a.host_mamba) == (None, None)
    res2 = d.compute(SEQ[:4], 4)  # the same prefix again, now with its Mamba state
    assert res2 is not None and res2.node is a and a.dev_mamba is not None
    assert cache.in_flight() == 1 and cache.counters.aux_backups == 1
    assert a.pins_mamba is not None and backup_in_flight(a, a.pins_mamba)
    assert not backup_in_flight(a)  # Full is on host already: only the state moves
    d.settle()
    assert cache.node_info(a).components["Mamba"].host is not None
    assert cache.counters.backups == 2
    d.assert_ok()
