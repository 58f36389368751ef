"""SlotAllocator against a plain model (sets and dicts, one slot at a time), over random operations."""

from __future__ import annotations

from array import array
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from unicache import DoubleFreeError, InvalidSlotError
from unicache.pools.allocator import SlotAllocator

CAP = 24


class Model:
    """What every slot is: free, used or lent; quarantine counts; deferred frees."""

    def __init__(self) -> None:
        self.state = dict.fromkeys(range(CAP), 0)
        self.quarantine: dict[int, int] = {}
        self.deferred: set[int] = set()

    def owned(self, slots: Sequence[int], want: tuple[int, ...]) -> bool:
        return len(set(slots)) == len(slots) and all(self.state.get(x, -1) in want for x in slots)

    def take(self, got: Sequence[int], mark: int) -> None:
        assert len(set(got)) == len(got) and all(self.state[x] == 0 for x in got)
        for x in got:
            self.state[x] = mark

    def free(self, slots: Sequence[int]) -> None:
        """Apply a free `_model_free_error` accepted: quarantined slots are deferred."""
        for x in slots:
            if x in self.quarantine:
                self.deferred.add(x)
            else:
                self.state[x] = 0


def _check(a: SlotAllocator, m: Model) -> None:
    free = sorted(x for x, s in m.state.items() if s == 0)
    assert [x for x in range(CAP) if a.is_free(x)] == free
    assert a.lent() == sorted(x for x, s in m.state.items() if s == 2)
    assert a.free_count == len(free) and a.used_count == CAP - len(free)
    assert a.quarantined() == m.quarantine and a.deferred() == m.deferred


@pytest.mark.parametrize("compact", [False, True])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_allocator_matches_the_model(compact: bool, data: st.DataObject) -> None:
    a = SlotAllocator("m", CAP, compact=compact)
    m = Model()
    handed: list[list[int]] = []
    for _ in range(data.draw(st.integers(10, 60))):
        op = data.draw(st.sampled_from(["alloc", "lent", "lent1", "adopt", "free_lent", "free", "quarantine",
                                        "release", "refuse"]))
        if op in ("alloc", "lent", "lent1"):
            n = 1 if op == "lent1" else data.draw(st.integers(0, CAP // 2))
            before = a.free_count
            got = a.alloc(n) if op == "alloc" else a.alloc_lent(n)
            if n > before or (a.injected_refusals and got is None):
                assert got is None and a.free_count == before
            else:
                assert got is not None and len(got) == n
                m.take(got, 1 if op == "alloc" else 2)
                handed.append(got)
        elif op == "refuse":
            a.refuse = data.draw(st.integers(0, 1))
        else:
            slots: list[int]
            reuse = data.draw(st.booleans())
            if handed and reuse:
                src = data.draw(st.sampled_from(handed))
                lo = data.draw(st.integers(0, len(src)))
                slots = src[lo : data.draw(st.integers(lo, len(src)))]
                if data.draw(st.integers(0, 9)) == 0:
                    slots = slots + slots[:1]
            else:
                ids = st.one_of(st.integers(-2, CAP + 2), st.integers(-3 * CAP, 3 * CAP))
                slots = data.draw(st.lists(ids, max_size=6))
            kind = data.draw(st.sampled_from(["list", "tuple", "array"]))
            arg: Sequence[int] = (
                slots if kind == "list" else tuple(slots) if kind == "tuple"
                else array("i", slots) if all(-(2**31) <= x < 2**31 for x in slots) else slots
            )
            if op in ("adopt", "free_lent"):
                ok = m.owned(slots, (2,))
                q_before = dict(m.quarantine)
                got_ok = a.adopt(arg) if op == "adopt" else a.free_lent(arg)
                assert got_ok == ok, (op, slots)
                if ok:
                    if op == "adopt":
                        for x in slots:
                            m.state[x] = 1
                    else:
                        for x in slots:
                            m.state[x] = 1
                        m.free(slots)
                        assert m.quarantine == q_before
            elif op == "free":
                expected = _model_free_error(m, slots)
                if expected is None:
                    a.free(arg)
                    m.free(slots)
                else:
                    with pytest.raises(expected):
                        a.free(arg)
            elif op == "quarantine":
                if slots and all(0 <= x < CAP and m.state[x] for x in slots):
                    a.quarantine(slots)
                    for x in slots:
                        m.quarantine[x] = m.quarantine.get(x, 0) + 1
                elif slots and (not 0 <= slots[0] < CAP or not m.state[slots[0]]):
                    with pytest.raises(InvalidSlotError):
                        a.quarantine(slots[:1])
            elif op == "release":
                held = [x for x in slots if x in m.quarantine]
                if held and len(set(held)) == len(held):
                    a.release_quarantine(held)
                    for x in held:
                        c = m.quarantine.pop(x)
                        if c > 1:
                            m.quarantine[x] = c - 1
                        elif x in m.deferred:
                            m.deferred.discard(x)
                            m.state[x] = 0
        _check(a, m)


def _model_free_error(m: Model, slots: list[int]) -> type[Exception] | None:
    """The error `free(slots)` must raise, or None: out of range, listed twice, lent, free, or already deferred."""
    if not slots:
        return None
    if m.quarantine:
        if len(set(slots)) != len(slots):
            return DoubleFreeError
        if any(not 0 <= x < CAP or m.state[x] != 1 for x in slots):
            return InvalidSlotError
        if any(x in m.deferred for x in slots):
            return DoubleFreeError
        return None
    if any(not 0 <= x < CAP for x in slots):
        return InvalidSlotError
    if len(set(slots)) != len(slots):
        return DoubleFreeError
    if any(m.state[x] == 2 for x in slots):
        return InvalidSlotError
    if any(m.state[x] == 0 for x in slots):
        return DoubleFreeError
    return None
