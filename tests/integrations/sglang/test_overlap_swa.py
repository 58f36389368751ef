"""The production-crash shape on Full+SWA (write-back, sliding window 8).

Chain root -> X -> D, both demoted to host. Load-back A (anchor D) reads X's
and D's Full and D's SWA window; X's own SWA stays host-only, so a request
for X alone (load-back B, anchor X) must load X's SWA window from host, on a
node A pins for Full. Stock 0.5.23 refuses B (empty spec: the request
recomputes X); the lease core serves both.
"""

from __future__ import annotations

from array import array

from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType

from tests.integrations.sglang.chains import D, X, ack_both_and_check, overlap_served, swa_crash_shape


def test_stock_core_refuses_the_second_swa_load_back() -> None:
    setup, (a, b) = swa_crash_shape("python")
    assert a[3] and a[2] == len(D)
    assert b[1] == len(X) and not b[3] and b[2] == 0, "stock 0.5.23 refuses the overlap"
    setup.cache.sanity_check()
    setup.cache.ready_to_load_host_cache()
    setup.cache.loading_check()
    setup.cache.sanity_check()


def test_lease_core_serves_both_swa_load_backs_and_releases_every_lease_once() -> None:
    setup, (a, b) = swa_crash_shape("leases")
    core, x_node = overlap_served(setup, a, b)
    lb_a, lb_b = core.load_backs[a[0]][0], core.load_backs[b[0]][0]
    a_full, a_swa = lb_a.lease(ComponentType.FULL), lb_a.lease(ComponentType.SWA)
    b_swa = lb_b.lease(ComponentType.SWA)
    assert a_full is not None and a_swa is not None and b_swa is not None
    x_full, x_swa = x_node.pins(ComponentType.FULL), x_node.pins(ComponentType.SWA)
    assert x_full is not None and x_swa is not None
    assert a_full.id in x_full.ids()
    assert x_swa.ids() == [b_swa.id], "X's SWA is pinned by B alone"
    ack_both_and_check(setup, core, (a[0], b[0]))
    after = setup.cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", X))))
    assert int(after.device_prefix_len) == len(X), "X is on device, SWA window included"
