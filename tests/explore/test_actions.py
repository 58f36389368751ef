"""The action alphabet: what a state enables, and that its acks are duplicates, stale or failed as meant."""

from __future__ import annotations

from unicache.explore.actions import enabled
from unicache.explore.replay import replay
from unicache.explore.scope import Scope


def _acks(scope: Scope, path: tuple[str, ...], action: str) -> list[object]:
    r = replay(scope, path)
    try:
        assert action in enabled(r, scope)
        out = r.run(action)
        assert out.ok, out.envelope
        acks = out.envelope["acks"]
        assert isinstance(acks, list)
        return [a["status"] for a in acks if isinstance(a, dict)]
    finally:
        assert r.close() is None


def test_the_empty_cache_enables_requests_reset_and_refusals() -> None:
    scope = Scope()
    r = replay(scope, ())
    try:
        assert enabled(r, scope) == [
            "insert 1,2", "insert 1,3", "reset", "refuse-alloc full device 1", "refuse-alloc full host 1",
            "refuse-alloc mamba device 1", "refuse-alloc mamba host 1"]
        assert "refuse-alloc" not in " ".join(enabled(r, Scope(faults=False)))
    finally:
        assert r.close() is None


def test_copies_in_flight_are_bounded_and_acked_every_way() -> None:
    scope = Scope(max_in_flight=1, device_tokens=4)
    r = replay(scope, ("insert 1,2", "insert 1,3", "backup t:1,2"))
    try:
        actions = enabled(r, scope)
        assert "ack T1" in actions and "ack T1 --fail" in actions
        assert not any(a.startswith(("backup", "load-back")) for a in actions)
        assert "lock t:1" in actions and "lock t:1,3" in actions
    finally:
        assert r.close() is None
    assert _acks(scope, ("insert 1,2", "backup t:1,2"), "ack T1 --fail") == ["failed"]
    assert _acks(scope, ("insert 1,2", "backup t:1,2", "ack T1"), "ack T1 --generation 0") == ["duplicate"]
    assert _acks(scope, ("insert 1,2", "backup t:1,2", "reset"), "ack T1") == ["stale"]
    assert _acks(scope, ("insert 1,2", "backup t:1,2", "reset", "ack T1"), "ack T1 --generation 0") == ["stale"]


def test_receipts_and_load_backs() -> None:
    scope = Scope(components=("full",), max_receipts=1)
    r = replay(scope, ("insert 1,2", "backup t:1,2", "ack T1", "lock t:1,2"))
    try:
        actions = enabled(r, scope)
        assert "unlock R1" in actions and not any(a.startswith("lock ") for a in actions)
    finally:
        assert r.close() is None
    r = replay(scope, ("insert 1,2", "backup t:1,2", "ack T1", "evict device 1"))
    try:
        assert "load-back t:1,2" in enabled(r, scope)
    finally:
        assert r.close() is None
