"""SlotAllocator: exact accounting, checked frees, quarantine."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence

import pytest

from unicache import DoubleFreeError, InvalidSlotError
from unicache.pools.allocator import SlotAllocator


def _array(slots: list[int]) -> Sequence[int]:
    return array("i", slots)


@pytest.mark.parametrize("compact", [False, True])
def test_alloc_free_accounting(compact: bool) -> None:
    a = SlotAllocator("p", 8, compact=compact)
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


@pytest.mark.parametrize("compact", [False, True])
def test_double_free_and_bad_slots_change_nothing(compact: bool) -> None:
    a = SlotAllocator("p", 4, compact=compact)
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


@pytest.mark.parametrize("compact", [False, True])
def test_quarantine_defers_until_released(compact: bool) -> None:
    a = SlotAllocator("p", 4, compact=compact)
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


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        ([0, 1, 0], DoubleFreeError),  # listed twice: found after 0 and 1 were cleared
        ([0, 1, 5], DoubleFreeError),  # 5 is free
        ([0, 1, 8], InvalidSlotError),  # out of range (past the capacity)
        ([0, 1, 17], InvalidSlotError),  # past the guard half
        ([0, 1, -1], InvalidSlotError),  # negative ids would wrap: rejected too
        ([0, -20], InvalidSlotError),
        ([5, 0, 1], DoubleFreeError),  # the first slot is free: nothing was cleared
    ],
)
@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("container", [list, tuple, _array])
def test_a_rejected_free_leaves_the_state_unchanged(
    bad: list[int], error: type[Exception], compact: bool, container: Callable[[list[int]], Sequence[int]]
) -> None:
    a = SlotAllocator("p", 8, compact=compact)
    assert a.alloc(4) == [0, 1, 2, 3]
    with pytest.raises(error):
        a.free(container(bad))
    assert a.used_count == 4 and not any(a.is_free(x) for x in range(4))
    assert all(a.is_free(x) for x in range(4, 8))
    a.free([3, 1])
    assert a.alloc(2) == [1, 3] and a.free_count == 4
    a.free([0, 1, 2, 3])
    assert sorted(a.alloc(8) or []) == list(range(8))


def test_compact_allocator_hands_out_arrays() -> None:
    a = SlotAllocator("p", 8, compact=True)
    x = a.alloc_compact(3)
    assert x is not None and x.typecode == "i" and x.tolist() == [0, 1, 2]
    assert a.alloc(2) == [3, 4]
    a.free(x)
    a.free([3])
    assert a.free_count == 7 and sorted(a.alloc(7) or []) == [0, 1, 2, 3, 5, 6, 7]


def test_lent_slots_are_marked_in_place_adopted_or_freed_all_or_nothing() -> None:
    a = SlotAllocator("t", 8)
    lent = a.alloc_lent(3)
    plain = a.alloc(1)
    assert lent == [0, 1, 2] and plain == [3]
    assert a.lent() == [0, 1, 2] and a.is_lent(1) and not a.is_lent(3) and not a.is_lent(-1)
    assert not a.adopt([0, 0]) and a.lent() == [0, 1, 2]  # listed twice: nothing changes
    assert not a.adopt([1, 3]) and a.lent() == [0, 1, 2]  # 3 is not lent
    assert not a.adopt([2, 99]) and a.lent() == [0, 1, 2]  # out of range
    assert a.adopt([0]) and a.lent() == [1, 2] and a.used_count == 4
    a.relend([0])
    assert a.lent() == [0, 1, 2]
    assert not a.free_lent([1, 3]) and a.used_count == 4 and a.lent() == [0, 1, 2]
    assert a.free_lent([1, 2]) and a.lent() == [0] and a.free_count == 6
    assert a.free_lent([0])
    a.free([3])
    assert a.free_count == 8 and a.lent() == []


@pytest.mark.parametrize("container", [list, tuple, _array])
@pytest.mark.parametrize("bad", [[0, 1, 0], [0, 1, 3], [0, 1, 99], [0, 1, -1], [0, -99], [3, 0, 1]])
def test_a_rejected_adopt_or_free_lent_changes_nothing(
    container: Callable[[list[int]], Sequence[int]], bad: list[int]
) -> None:
    a = SlotAllocator("t", 8)
    assert a.alloc_lent(3) == [0, 1, 2] and a.alloc(1) == [3]
    assert not a.adopt(container(bad))
    assert a.lent() == [0, 1, 2] and a.used_count == 4
    assert not a.free_lent(container(bad))
    assert a.lent() == [0, 1, 2] and a.used_count == 4
    assert a.adopt(container([2, 0])) and a.lent() == [1]
    assert a.free_lent(container([1])) and a.lent() == [] and a.free_count == 5


@pytest.mark.parametrize("compact", [False, True])
def test_single_slot_lending_matches_the_general_path(compact: bool) -> None:
    """`alloc_lent(1)` (a Mamba state's fast path) hands out the same slots, marked the same way."""
    one, many = SlotAllocator("one", 3, compact=compact), SlotAllocator("many", 3, compact=compact)
    got = [one.alloc_lent(1) for _ in range(3)]
    assert got == [[0], [1], [2]] and all(type(x) is list for x in got)
    assert many.alloc_lent(3) == [0, 1, 2]
    assert one.lent() == many.lent() == [0, 1, 2] and one.free_count == 0
    assert one.alloc_lent(1) is None and one.lent() == [0, 1, 2]
    assert one.free_lent([1]) and one.alloc_lent(1) == [1] and one.is_lent(1)
    assert one.adopt([1]) and not one.is_lent(1) and one.used_count == 3



def test_free_refuses_lent_slots_and_a_rejected_free_keeps_them_lent() -> None:
    """Lent slots go back with `free_lent`; `free` names them, and a rejected free restores every mark."""
    a = SlotAllocator("r", 8)
    lent = a.alloc_lent(2)
    used = a.alloc(2)
    assert lent == [0, 1] and used == [2, 3]
    with pytest.raises(InvalidSlotError) as err:
        a.free([2, 0])
    assert err.value.slots == (0,) and "free_lent" in str(err.value)
    with pytest.raises(DoubleFreeError):
        a.free([0, 0])
    assert a.lent() == [0, 1] and a.used_count == 4 and not a.is_free(2)
    assert a.free_lent(lent)
    a.free(used)
    assert a.free_count == 8


def test_a_quarantined_lent_slot_is_refused_by_free_and_returned_by_free_lent() -> None:
    a = SlotAllocator("q", 4)
    assert a.alloc_lent(1) == [0]
    a.quarantine([0])
    with pytest.raises(InvalidSlotError) as err:
        a.free([0])
    assert err.value.slots == (0,) and a.lent() == [0] and a.deferred() == set()
    assert a.free_lent([0]) and a.deferred() == {0} and a.lent() == []
    assert a.release_quarantine([0]) == 1 and a.free_count == 4


@pytest.mark.parametrize("container", [list, tuple, _array])
@pytest.mark.parametrize("bad", [-1, -8, -9, -16])
def test_a_negative_id_never_aliases_a_slot(container: Callable[[list[int]], Sequence[int]], bad: int) -> None:
    """A negative id is refused by every check, however far below zero (a list or map index would wrap)."""
    a = SlotAllocator("n", 8)
    assert a.alloc_lent(8) == list(range(8))
    assert not a.adopt(container([bad])) and not a.free_lent(container([bad]))
    assert a.lent() == list(range(8))
    assert a.adopt(container(list(range(8))))
    with pytest.raises(InvalidSlotError) as err:
        a.free(container([bad]))
    assert err.value.slots == (bad,) and a.free_count == 0 and not any(a.is_free(x) for x in range(8))
    a.free(container(list(range(8))))
    assert sorted(a.alloc(8) or []) == list(range(8))
