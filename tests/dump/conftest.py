"""A cache with something in every dump section: nodes on both tiers, leases of three components,
a held lock, an in-flight backup, and the quarantine of a copy that was in flight at a reset."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from leases import Borrowed
from unicache import SWA, CacheConfig, Full, Mamba
from unicache.cache import UniCache
from unicache.repl.manual_engine import ManualEngine
from unicache.tickets import LockReceipt


@dataclass
class Busy:
    cache: UniCache
    engine: ManualEngine
    receipt: Borrowed[LockReceipt]  # busy_cache keeps it and unlocks it on exit


def _insert(cache: UniCache, tokens: list[int]) -> None:
    m = cache.match_prefix(tokens)
    start = m.device_len
    lock = cache.lock(m.device_node) if start else None
    n = len(tokens) - start
    full = cache.alloc_device(Full, n)
    swa = cache.alloc_device(SWA, n)
    mamba = cache.alloc_device(Mamba, 1)
    assert full is not None and swa is not None and mamba is not None
    cache.insert(tokens, full, start=start, swa_slots=swa, mamba_slot=mamba[0])
    if lock is not None:
        cache.unlock(lock)


@contextmanager
def busy_cache() -> Iterator[Busy]:
    """The busy cache; on exit the lock is released and every held copy acked, and no lease is left."""
    engine = ManualEngine()
    cache = UniCache(CacheConfig(device_tokens=32, swa_window=4, mamba=True, mamba_device_slots=8, kv_width=2,
                                 mamba_width=2, device="cpu", debug=True), engine)
    _insert(cache, [1, 2, 3, 4])
    assert cache.backup(cache.match_prefix([1, 2, 3, 4]).device_node) == 1
    cache.reset()
    _insert(cache, [5, 6, 7, 8])
    _insert(cache, [5, 6, 7, 8, 9, 10])
    node = cache.match_prefix([5, 6, 7, 8, 9, 10]).device_node
    receipt = cache.lock(node)
    assert cache.backup(node) is not None
    busy = Busy(cache, engine, receipt)
    yield busy
    cache.unlock(receipt)
    for ticket in engine.held():
        cache.deliver(engine.take(ticket))
    assert cache.ledger.live() == []


@pytest.fixture
def busy() -> Iterator[Busy]:
    with busy_cache() as b:
        yield b
