"""The production-crash shape: two load-backs on one node (Full+Mamba, write-back).

Chain root -> X -> D, both demoted to host. Load-back A (anchor D) reads X's
and D's Full and D's Mamba; before A's ack, load-back B (anchor X) needs X's
Mamba state from host, on a node A pins. Stock 0.5.23 refuses B (empty spec:
the request recomputes); the lease core serves both.
"""

from __future__ import annotations

import pytest
import torch
from sglang.srt.mem_cache.unified_cache.components import ComponentType

from tests.integrations.sglang.chains import D, X, ack_both_and_check, crash_shape, overlap_served
from unicache.integrations.sglang.core import LeaseTreeCore
from unicache.integrations.sglang.errors import UnknownLoadBackError


def test_stock_core_refuses_the_second_load_back() -> None:
    setup, (a, b) = crash_shape("python")
    assert a[3] and a[2] == len(D)
    assert b[1] == len(X) and not b[3] and b[2] == 0
    setup.cache.ready_to_load_host_cache()
    setup.cache.loading_check()
    setup.cache.sanity_check()


def test_lease_core_serves_both_and_releases_every_lease_once() -> None:
    setup, (a, b) = crash_shape("leases")
    core, x_node = overlap_served(setup, a, b)
    lb_a, lb_b = core.load_backs[a[0]][0], core.load_backs[b[0]][0]
    x_full, x_mamba = x_node.pins(ComponentType.FULL), x_node.pins(ComponentType.MAMBA)
    assert x_full is not None and x_mamba is not None
    a_full, b_mamba = lb_a.lease(ComponentType.FULL), lb_b.lease(ComponentType.MAMBA)
    assert a_full is not None and b_mamba is not None
    assert x_full.ids() == [a_full.id]
    assert x_mamba.ids() == [b_mamba.id]
    ack_both_and_check(setup, core, (a[0], b[0]))
    assert core.node_by_id(b[0]).load_back_pending_id is None


def test_reset_revokes_in_flight_load_backs() -> None:
    setup, (a, b) = crash_shape("leases")
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    held = core.ledger.live_count
    epoch = core.ledger.epoch
    setup.cache.reset()
    assert core.ledger.epoch == epoch + 1
    assert core.ledger.revoked == held and core.ledger.stale == held
    assert core.ledger.live_count == 0 and not core.load_backs
    core.finish_load_back(a[0])
    assert core.stale_acks == 1


def test_clearing_a_leased_pin_field_is_refused() -> None:
    from unicache.integrations.sglang.errors import PinFieldWriteError

    setup, (a, _b) = crash_shape("leases")
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    node = core.node_by_id(a[0])
    with pytest.raises(PinFieldWriteError, match=f"node {a[0]}"):
        node.load_back_pending_id = None
    assert node.load_back_pending_id == a[0], "the refused write left the pin in place"
    setup.cache.ready_to_load_host_cache()
    setup.cache.loading_check()
    assert core.ledger.live_count == 0


def test_two_load_backs_on_one_anchor_are_acked_in_commit_order() -> None:
    setup, (a, b) = crash_shape("leases")
    cache = setup.cache
    core = cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    first = core.load_backs[a[0]][0]
    first_ids = set(first.lease_ids().values())
    kv_xfer, comp_xfers = core.build_load_back_spec(a[0])
    core.commit_load_back(a[0], torch.empty(0, dtype=torch.int64), kv_xfer, comp_xfers)
    queue = core.load_backs[a[0]]
    assert len(queue) == 2 and queue[0] is first and queue[1].seq > first.seq
    second_seq = queue[1].seq
    cache.ready_to_load_host_cache()
    cache.loading_check()
    assert all(core.ledger.get(i) is None for i in first_ids), "the first ack releases the first load-back"
    assert [lb.seq for lb in core.load_backs[a[0]]] == [second_seq]
    core.finish_load_back(a[0])
    assert not core.load_backs and core.ledger.live_count == 0
    assert core.ledger.released == core.ledger.acquired
    with pytest.raises(UnknownLoadBackError, match=f"anchor {a[0]}"):
        core.finish_load_back(a[0])
