"""SlotAllocator: exact accounting, checked frees, quarantine."""

from __future__ import annotations

import pytest

from unicache import DoubleFreeError, InvalidSlotError
from unicache.pools.allocator import SlotAllocator


def test_alloc_free_accounting() -> None:
    a = SlotAllocator("p", 8)
    x = a.alloc(3)
    assert x == [0, 1, 2] and a.used_count == 3 and a.free_count == 5
    assert a.alloc(6) is None and a.free_count == 5
    a.free(x[:2])
    assert a.used_count == 1
    y = a.alloc(7)
    assert y is not None and sorted(y + [2]) == list(range(8))
    assert a.alloc(0) == [] and a.alloc(1) is None
    with pytest.raises(InvalidSlotError):
        a.alloc(-1)


def test_double_free_and_bad_slots_change_nothing() -> None:
    a = SlotAllocator("p", 4)
    x = a.alloc(2)
    assert x is not None
    a.free([x[0]])
    with pytest.raises(DoubleFreeError) as err:
        a.free(x)
    assert err.value.slots == (x[0],) and "p" in str(err.value)
    assert a.used_count == 1
    with pytest.raises(DoubleFreeError):
        a.free([x[1], x[1]])
    with pytest.raises(InvalidSlotError):
        a.free([7])
    assert a.used_count == 1
    with pytest.raises(InvalidSlotError):
        a.check_used([x[0]])
    a.check_used([x[1]])


def test_quarantine_defers_until_released() -> None:
    a = SlotAllocator("p", 4)
    x = a.alloc(3)
    assert x is not None
    a.quarantine(x[:2])
    a.quarantine(x[:1])
    a.free(x)
    assert a.free_count == 2  # x[2] freed, x[0], x[1] deferred
    assert a.deferred() == {x[0], x[1]} and a.quarantined_count == 2
    with pytest.raises(DoubleFreeError):
        a.free([x[0]])
    assert a.release_quarantine(x[:2]) == 1  # x[1] free, x[0] still quarantined once
    assert a.release_quarantine(x[:1]) == 1
    assert a.free_count == 4 and a.quarantined_count == 0
    with pytest.raises(InvalidSlotError):
        a.release_quarantine([x[0]])
    with pytest.raises(InvalidSlotError):
        a.quarantine([x[0]])
