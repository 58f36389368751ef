"""The data oracle: passes on reference data, names the node/component/position of any bad byte."""

from __future__ import annotations

import pytest
import torch

from unicache.cache import UniCache
from unicache.markers import SWA, Full, Mamba
from unicache.engine.errors import CorruptionError
from unicache.engine.oracle import DataOracle
from unicache.engine.reference import PrefixHashes, ReferenceModel
from unicache.transfer.base import Tier

from .conftest import make_cache, model_for
from tests.unicache.support import residency


def insert_reference(cache: UniCache, model: ReferenceModel, tokens: list[int]) -> PrefixHashes:
    """Cache ``tokens`` with reference KV/state (start 0, everything new)."""
    h = model.hashes(torch.tensor(tokens))
    ps = cache.config.page_size
    pages = len(tokens) // ps
    full = cache.alloc_device(Full, pages)
    assert full is not None
    cache.write_slots(Full, full, model.kv(h, 0, len(tokens)).reshape(pages, ps, -1))
    swa = None
    if cache.config.swa_window is not None:
        swa = cache.alloc_device(SWA, pages)
        assert swa is not None
        cache.write_slots(SWA, swa, model.swa_kv(h, 0, len(tokens)).reshape(pages, ps, -1))
    slot = None
    if cache.config.mamba:
        got = cache.alloc_device(Mamba, 1)
        assert got is not None
        slot = got[0]
        cache.write_slots(Mamba, got, model.mamba_state(h, len(tokens)).unsqueeze(0))
    cache.insert(tokens, full, swa_slots=swa, mamba_slot=slot)
    return h


@pytest.fixture
def hybrid() -> UniCache:
    return make_cache(swa_window=4, mamba=True)


def test_clean_prefix_and_tree_pass(hybrid: UniCache) -> None:
    model = model_for(hybrid.config)
    tokens = list(range(1, 13))
    h = insert_reference(hybrid, model, tokens)
    oracle = DataOracle(hybrid, model)
    m = hybrid.match_prefix(tokens)
    assert m.device_len == 12
    oracle.verify_prefix(7, h, m.device_node, 12)
    assert oracle.verify_tree() == 1
    assert oracle.checked_tokens == 12 and oracle.checked_states == 1


def test_a_wrong_full_row_is_named(hybrid: UniCache) -> None:
    model = model_for(hybrid.config)
    tokens = list(range(1, 13))
    h = insert_reference(hybrid, model, tokens)
    node = hybrid.match_prefix(tokens).device_node
    pages = residency(node).full_device
    assert pages is not None
    page = pages[5]
    hybrid.write_slots(Full, [page], hybrid.read_slots(Full, [page]) ^ 1)
    with pytest.raises(CorruptionError) as info:
        DataOracle(hybrid, model).verify_prefix(3, h, node, 12)
    err = info.value
    assert (err.request, err.component, err.tier, err.position) == (3, "full", "device", 5)
    assert f"node {node.id}" in str(err)
    with pytest.raises(CorruptionError, match="tree check"):
        DataOracle(hybrid, model).verify_tree()


def test_a_wrong_mamba_state_or_swa_row_is_caught(hybrid: UniCache) -> None:
    model = model_for(hybrid.config)
    tokens = list(range(1, 9))
    h = insert_reference(hybrid, model, tokens)
    node = hybrid.match_prefix(tokens).device_node
    state, swa = residency(node).mamba_device, residency(node).swa_device
    assert state is not None and swa is not None
    hybrid.write_slots(Mamba, [state], torch.zeros(1, 3, dtype=torch.int32))
    with pytest.raises(CorruptionError, match="mamba"):
        DataOracle(hybrid, model).verify_prefix(0, h, node, 8)
    hybrid.write_slots(Mamba, [state], model.mamba_state(h, 8).unsqueeze(0))
    last = swa[-1]
    hybrid.write_slots(SWA, [last], hybrid.read_slots(SWA, [last]) + 1)
    with pytest.raises(CorruptionError, match="swa device") as info:
        DataOracle(hybrid, model).verify_prefix(0, h, node, 8)
    assert info.value.position == 7


def test_host_copies_are_checked_too() -> None:
    cache = make_cache(write_policy="write_through")
    model = model_for(cache.config)
    tokens = list(range(20, 30))
    insert_reference(cache, model, tokens)
    cache.poll()
    node = cache.match_prefix(tokens).device_node
    host = residency(node).full_host
    assert host is not None
    oracle = DataOracle(cache, model)
    oracle.verify_tree()
    page = host[2]
    cache.write_slots(Full, [page], cache.read_slots(Full, [page], Tier.HOST) + 5, Tier.HOST)
    with pytest.raises(CorruptionError, match="full host") as info:
        oracle.verify_tree()
    assert info.value.position == 2


def test_prefix_not_on_device_is_reported() -> None:
    cache = make_cache(write_policy="write_through")
    model = model_for(cache.config)
    tokens = list(range(1, 9))
    h = insert_reference(cache, model, tokens)
    cache.poll()
    node = cache.match_prefix(tokens).device_node
    cache.evict_device(Full, 64)
    assert residency(node).full_device is None
    with pytest.raises(CorruptionError, match="not on device"):
        DataOracle(cache, model).verify_prefix(1, h, node, 8)
