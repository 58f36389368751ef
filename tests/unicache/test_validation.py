"""Public operations check thread, arguments and capacity before they change anything."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest
import torch

from leases import WrongThreadError
from tests.unicache.conftest import MakeCache
from tests.unicache.support import SEQ, chain, residency
from unicache import Full, InvalidArgumentError, Mamba, UniCache
from unicache.transfer.base import Ack


def _snapshot(cache: UniCache) -> str:
    """Tree, pins, tickets, pools and counters as one comparable string (events excluded)."""
    state = cache.dump_state()
    state.pop("events", None)
    state.pop("counters", None)
    return json.dumps(state, sort_keys=True, default=str) + json.dumps(
        {k: v for k, v in cache.counters.as_dict().items()}, sort_keys=True
    )


def _on_other_thread(fn: Callable[[], object]) -> BaseException | None:
    caught: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test thread
            caught.append(e)

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return caught[0] if caught else None


@pytest.mark.parametrize("policy", ["write_back", "write_through"])
def test_every_mutating_operation_refuses_a_foreign_thread_first(make_cache: MakeCache, policy: str) -> None:
    cache, d = make_cache(device_tokens=8, write_policy=policy, mamba=True)
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    before = _snapshot(cache)
    calls: dict[str, Callable[[], object]] = {
        "match_prefix": lambda: cache.match_prefix(SEQ[:6]),
        "alloc_device": lambda: cache.alloc_device(Full, 4),
        "free_device": lambda: cache.free_device(Full, [0]),
        "lock": lambda: cache.lock(b),
        "insert": lambda: cache.insert(SEQ[8:12], [0]),
        "load_back": lambda: cache.load_back(b),
        "backup": lambda: cache.backup(b),
        "poll": cache.poll,
        "deliver": lambda: cache.deliver(Ack(1, 0, True)),
        "evict_device": lambda: cache.evict_device(Full, 8),
        "evict_host": lambda: cache.evict_host(Full, 8),
        "reclaim_host_duplicates": lambda: cache.reclaim_host_duplicates(8),
        "reset": cache.reset,
        "write_slots": lambda: cache.write_slots(Full, [0], torch.zeros(1, 4, dtype=torch.int32)),
    }
    for name, call in calls.items():
        err = _on_other_thread(call)
        assert isinstance(err, WrongThreadError), (name, err)
        assert name in str(err)
        assert _snapshot(cache) == before, name
    d.settle()
    d.assert_ok()


@pytest.mark.parametrize("op", ["evict_device", "evict_host", "alloc_device"])
@pytest.mark.parametrize("n", [-3, -1])
def test_negative_counts_raise_like_alloc_device(make_cache: MakeCache, op: str, n: int) -> None:
    cache, d = make_cache(device_tokens=8, write_policy="write_back")
    chain(cache, d, SEQ[:8], [4, 8])
    before = _snapshot(cache)
    with pytest.raises(InvalidArgumentError, match=rf"{op}\(Full, {n}\)"):
        getattr(cache, op)(Full, n)
    with pytest.raises(InvalidArgumentError, match="reclaim_host_duplicates"):
        cache.reclaim_host_duplicates(n)
    assert _snapshot(cache) == before
    d.assert_ok()


def test_a_component_not_configured_is_refused_before_eviction(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    chain(cache, d, SEQ[:8], [4, 8])
    before = _snapshot(cache)
    for op in ("evict_device", "evict_host", "alloc_device"):
        with pytest.raises(InvalidArgumentError, match="Mamba"):
            getattr(cache, op)(Mamba, 1)
    assert _snapshot(cache) == before


def test_an_oversized_alloc_refuses_before_evicting(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8, write_policy="write_back")
    a, b = chain(cache, d, SEQ[:8], [4, 8])
    tree_before = [(x.id, residency(x).full_device, residency(x).full_host) for x in cache.nodes()]
    evictions = cache.counters.device_evictions
    assert cache.alloc_device(Full, 9) is None
    assert [(x.id, residency(x).full_device, residency(x).full_host) for x in cache.nodes()] == tree_before
    assert cache.counters.device_evictions == evictions and cache.in_flight() == 0
    assert cache.counters.alloc_refused_full == 1
    assert cache.reasons.last is not None and cache.reasons.last.needed == 9
    got = cache.alloc_device(Full, 8)
    assert got is not None and cache.counters.device_evictions > evictions
    cache.free_device(Full, got)
    d.assert_ok()


def test_foreign_and_dead_nodes_are_refused(make_cache: MakeCache) -> None:
    cache, d = make_cache(device_tokens=8)
    other, _ = make_cache(device_tokens=8, ledger_name="other")
    (a,) = chain(cache, d, SEQ[:4], [4])
    for op in ("lock", "load_back", "backup", "path_pages"):
        with pytest.raises(InvalidArgumentError):
            getattr(cache, op)(object())
        with pytest.raises(Exception, match="other|foreign|belongs"):
            getattr(other, op)(a)
    cache.reset()
    with pytest.raises(Exception, match=str(a.id)):
        cache.lock(a)  # lease: ignore[lease-discarded]  (raises: the node died at the reset)
    d.assert_ok()


def test_deliver_refuses_what_is_not_an_ack(make_cache: MakeCache) -> None:
    cache, _ = make_cache()
    with pytest.raises(InvalidArgumentError, match="Ack"):
        cache.deliver((1, 0, True))  # type: ignore[arg-type]
