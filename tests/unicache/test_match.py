"""Match: device and host anchors, SWA windows, Mamba ends."""

from __future__ import annotations

from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, residency
from unicache import SWA, Full


def test_match_device_host_and_anchor(make_cache: MakeCache) -> None:
    cache, d = make_cache(load_back_threshold=5)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    m = cache.match_prefix(SEQ[:10])
    assert (m.matched_len, m.device_len, m.anchor_len) == (8, 8, 8)
    assert m.device_node is b and not m.needs_load_back and not m.worth_load_back
    cache.backup(b)
    cache.backup(a)
    d.settle()
    cache.match_prefix(SEQ[:4])
    assert cache.evict_device(Full, 1) == 4
    m = cache.match_prefix(SEQ[:8])
    assert m.device_node is a and m.anchor is b and m.host_len == 4
    assert m.full_host_tokens == 4 and m.needs_load_back and not m.worth_load_back  # < 5
    assert cache.evict_device(Full, 1) == 4
    m = cache.match_prefix(SEQ[:8])
    assert m.device_len == 0 and m.full_host_tokens == 8 and m.worth_load_back
    d.assert_ok()


def test_match_swa_window_and_mamba_end(make_cache: MakeCache) -> None:
    cache, d = make_cache(swa_window=3, mamba=True)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    assert d.serve(SEQ[:6] + [1, 2]) is not None  # splits a.. b at 6: fragment without Mamba
    m = cache.match_prefix(SEQ[:6])
    frag = m.anchor
    assert frag.end == 4 or frag is a  # the [4, 6) fragment has no Mamba state: back off to a
    assert m.anchor is a and m.anchor_len == 4
    m = cache.match_prefix(SEQ[:8])
    assert m.anchor is b and m.device_node is b
    cache.match_prefix(SEQ[:8])
    assert cache.evict_device(SWA, 1) >= 1  # the oldest SWA holder loses its window pages
    d.assert_ok()
    m = cache.match_prefix(SEQ[:8])
    assert m.device_len < 8 or m.device_node is b


def test_swa_window_tombstone_blocks_anchor(make_cache: MakeCache) -> None:
    # write_through below its threshold: nothing is backed up, so eviction loses SWA
    cache, d = make_cache(swa_window=2, write_policy="write_through", write_through_threshold=99)
    a, b, c = chain(cache, d, SEQ[:6], [2, 4, 6])
    cache.match_prefix(SEQ[:6])
    cache.match_prefix(SEQ[:2])
    cache.match_prefix(SEQ[4:])  # no-op match: different first token
    cache.match_prefix(SEQ[:4])
    # c is the least recently used SWA holder: tombstone it (no host copy: lost)
    assert cache.evict_device(SWA, 2) == 2 and residency(c).swa_device is None
    m = cache.match_prefix(SEQ[:6])
    assert m.matched_len == 6 and m.anchor is b and m.device_node is b
    d.assert_ok()
