"""The CUDA engine: refuses to start without a GPU; with one, copies on a side stream and acks by event."""

from __future__ import annotations

import pytest
import torch

from unicache.cache import UniCache
from unicache.markers import Full
from unicache.engine.transfers import make_transfer, resolve_transfer
from unicache.transfer.base import Tier
from unicache.transfer.cuda import CudaEngine, CudaUnavailableError, cuda_available
from unicache.transfer.simulated import FaultSpec, SimulatedEngine

from .conftest import model_for, small_config
from tests.unicache.support import residency

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_without_a_gpu_the_cuda_engine_refuses_and_auto_picks_simulated() -> None:
    assert not cuda_available()
    with pytest.raises(CudaUnavailableError):
        CudaEngine()
    with pytest.raises(CudaUnavailableError):
        make_transfer("cuda", faults=FaultSpec(), seed=0)
    assert resolve_transfer("auto") == "simulated"
    assert isinstance(make_transfer("auto", faults=FaultSpec(), seed=0), SimulatedEngine)


@needs_cuda
def test_auto_picks_cuda_when_present() -> None:
    assert resolve_transfer("auto") == "cuda"


@needs_cuda
def test_backup_and_load_back_round_trip_on_the_gpu() -> None:
    config = small_config(device="cuda", write_policy="write_through")
    cache = UniCache(config, CudaEngine())
    model = model_for(config)
    tokens = list(range(1, 17))
    h = model.hashes(torch.tensor(tokens))
    pages = cache.alloc_device(Full, 16)
    assert pages is not None
    cache.write_slots(Full, pages, model.kv(h, 0, 16).reshape(16, 1, -1))
    cache.insert(tokens, pages)
    for _ in range(1000):
        cache.poll()
        if cache.in_flight() == 0:
            break
        torch.cuda.synchronize()
    node = cache.match_prefix(tokens).device_node
    host_rows = residency(node).full_host
    assert host_rows is not None
    host = cache.read_slots(Full, host_rows, Tier.HOST).reshape(16, -1)
    assert torch.equal(host, model.kv(h, 0, 16))
    cache.evict_device(Full, 64)
    m = cache.match_prefix(tokens)
    t = cache.load_back(m.anchor)
    assert t is not None
    for _ in range(1000):
        cache.poll()
        if cache.in_flight() == 0:
            break
        torch.cuda.synchronize()
    assert t.result().ok
    m = cache.match_prefix(tokens)
    dev_pages = residency(m.device_node).full_device
    assert m.device_len == 16 and dev_pages is not None
    dev = cache.read_slots(Full, dev_pages).reshape(16, -1)
    assert torch.equal(dev, model.kv(h, 0, 16))
    cache.engine.close()
