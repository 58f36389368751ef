"""`SlotAllocator`: exact slot accounting for one pool (torch-free)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import length_hint

from unicache.errors import DoubleFreeError, InvalidSlotError


def _iter(slots: Sequence[int]) -> Iterator[int]:
    """An iterator over `slots` whose `length_hint` is exact (an array's iterator has none)."""
    return iter(slots if type(slots) is list or type(slots) is tuple else list(slots))


class SlotAllocator:
    """Hands out slot ids 0..capacity-1, lowest first; frees are checked, never clamped.

    The free slots are a stack that never changes size (`_stack[:_top]`) and
    `_used` holds each slot's state (0 free, 1 used, 2 lent) in a list of
    small ints, so bookkeeping allocates nothing while the cache runs. A
    list, not a byte map: a list store is a native operation in the compiled
    build (a `bytearray` store is a generic call there) and a specialised one
    in the interpreter, which makes the per-slot loops 3-4x (compiled) and
    1.1-1.7x (interpreted) faster for 8 bytes a slot (docs/performance.md,
    "Request-side allocation: the state map as a list").

    The stack is a list of the slot ints (whose objects are shared with every
    list `alloc` returns), or with `compact=True` an `array("i")`:
    `alloc_compact` then hands out arrays, 4 bytes a slot, for holders that
    keep many slots (host pools). `free` checks every slot (in range,
    allocated and not lent to a request, listed once); a bad call changes
    nothing. Every check loop is one sign test and one state test per slot
    (an id past the end raises `IndexError` at the state test; a negative one
    would wrap around the list, so it is tested first), and a failing pass
    finds how far it got from its iterator's `length_hint` instead of
    counting.

    Lent slots: `alloc_lent` marks the slots it hands out as lent to a request
    (state 2 instead of 1, in the same pass); `adopt` turns lent slots into
    plain used ones (the request donated them) and `free_lent` returns them,
    each checking every slot first, so request ownership costs no set.

    Quarantine: `quarantine(slots)` marks slots an unfinished copy may still
    touch (reference-counted, several copies may share a slot). Freeing a
    quarantined slot defers it until `release_quarantine` drops its count to
    zero. A slot is always exactly one of: free, used (possibly quarantined).

    Fault injection: while `refuse` > 0 each allocation of at least one slot
    that would succeed is refused instead (None, nothing taken), as if the
    pool were short, and counted in `injected_refusals` (`unicache simulate
    --faults allocfail`). Every caller already handles a short pool.
    """

    __slots__ = (
        "name", "capacity", "compact", "_stack", "_top", "_used", "_quarantine", "_deferred",
        "refuse", "injected_refusals",
    )

    def __init__(self, name: str, capacity: int, *, compact: bool = False) -> None:
        if capacity < 0:
            raise ValueError(f"pool {name}: capacity must be >= 0, got {capacity}")
        self.name = name
        self.capacity = capacity
        self.compact = compact
        order = range(capacity - 1, -1, -1)
        self._stack: list[int] | array[int] = array("i", order) if compact else list(order)
        self._top = capacity
        self._used = [0] * capacity
        self._quarantine: dict[int, int] = {}
        self._deferred: set[int] = set()
        self.refuse = 0
        self.injected_refusals = 0

    @property
    def free_count(self) -> int:
        return self._top

    @property
    def used_count(self) -> int:
        return self.capacity - self._top

    @property
    def quarantined_count(self) -> int:
        return len(self._quarantine)

    def alloc(self, n: int) -> list[int] | None:
        """`n` slots, or None (nothing taken) when fewer are free."""
        out = self._take(n, 1)
        if out is None or isinstance(out, list):
            return out
        return out.tolist()

    def alloc_lent(self, n: int) -> list[int] | None:
        """Like `alloc`, the slots marked as lent to a request (`adopt`, `free_lent`)."""
        if n == 1 and self._top and not self.refuse:
            top = self._top - 1
            x = self._stack[top]
            self._top = top
            self._used[x] = 2
            return [x]
        out = self._take(n, 2)
        if out is None or isinstance(out, list):
            return out
        return out.tolist()

    def is_lent(self, slot: int) -> bool:
        return 0 <= slot < self.capacity and self._used[slot] == 2

    def lent(self) -> list[int]:
        """Every slot lent to a request now, ascending (a scan: for checks and dumps)."""
        used = self._used
        out: list[int] = []
        try:
            i = used.index(2)
            while True:
                out.append(i)
                i = used.index(2, i + 1)
        except ValueError:
            return out

    def adopt(self, slots: Sequence[int]) -> bool:
        """Lent slots become plain used ones (donated to the cache); False, changing nothing, if
        any slot is not lent or is listed twice."""
        used = self._used
        it = _iter(slots)
        try:
            for x in it:
                if x < 0 or used[x] != 2:
                    break
                used[x] = 1
            else:
                return True
        except IndexError:
            pass
        for x in slots[: len(slots) - 1 - length_hint(it)]:
            used[x] = 2
        return False

    def relend(self, slots: Sequence[int]) -> None:
        """Undo an `adopt` (the insert that took these slots failed later)."""
        used = self._used
        for x in slots:
            used[x] = 2

    def free_lent(self, slots: Sequence[int]) -> bool:
        """Return lent slots to the free list; False, changing nothing, if any slot is not lent
        or is listed twice."""
        if not slots:
            return True
        used = self._used
        it = _iter(slots)
        done = -1
        try:
            for x in it:
                if x < 0 or used[x] != 2:
                    break
                used[x] = 0
            else:
                done = len(slots)
        except IndexError:
            pass
        if done < len(slots):
            for x in slots[: len(slots) - 1 - length_hint(it)]:
                used[x] = 2
            return False
        if self._quarantine and any(x in self._quarantine for x in slots):
            for x in slots:
                used[x] = 1
            self.free(slots)
            return True
        top = self._top
        n = len(slots)
        stack = self._stack
        if isinstance(stack, list):
            stack[top : top + n] = slots
        else:
            stack[top : top + n] = slots if isinstance(slots, array) else array("i", slots)
        self._top = top + n
        return True

    def alloc_compact(self, n: int) -> array[int] | None:
        """Like `alloc`, as an `array("i")` (a compact allocator's native form)."""
        out = self._take(n, 1)
        if out is None or isinstance(out, array):
            return out
        return array("i", out)

    def _take(self, n: int, mark: int) -> list[int] | array[int] | None:
        top = self._top
        if n > top:
            return None
        if self.refuse and n > 0:
            self.refuse -= 1
            self.injected_refusals += 1
            return None
        if n <= 0:
            if n < 0:
                raise InvalidSlotError(self.name, [], f"cannot allocate {n} slots")
            return self._stack[:0]
        top -= n
        self._top = top
        used = self._used
        stack = self._stack
        if isinstance(stack, list):
            out = stack[top : top + n]
            out.reverse()
            if mark == 2:  # a literal: compiled, the store shares one object instead of boxing one a slot
                for x in out:
                    used[x] = 2
            else:
                for x in out:
                    used[x] = 1
            return out
        got = stack[top : top + n]
        got.reverse()
        for x in got:
            used[x] = mark
        return got

    def free(self, slots: Sequence[int]) -> None:
        """Return used slots (lent ones go back with `free_lent`); quarantined ones wait for their
        quarantine to end."""
        if not slots:
            return
        if self._quarantine:
            self._free_quarantined(slots)
            return
        used = self._used
        it = _iter(slots)
        try:
            for x in it:
                if x < 0 or used[x] != 1:
                    break
                used[x] = 0
            else:
                top = self._top
                n = len(slots)
                stack = self._stack
                if isinstance(stack, list):
                    stack[top : top + n] = slots
                else:
                    stack[top : top + n] = slots if isinstance(slots, array) else array("i", slots)
                self._top = top + n
                return
        except IndexError:
            pass
        for x in slots[: len(slots) - 1 - length_hint(it)]:
            used[x] = 1
        self._raise_bad_free(slots)

    def _raise_bad_free(self, slots: Sequence[int]) -> None:
        """The error for a `free` that found a slot out of range, listed twice, lent or not allocated."""
        cap = self.capacity
        bad = sorted({x for x in slots if not 0 <= x < cap})
        if bad:
            raise InvalidSlotError(self.name, bad, f"outside capacity {cap}")
        dup = sorted({x for x in slots if slots.count(x) > 1})
        if dup:
            raise DoubleFreeError(self.name, dup)
        used = self._used
        lent = sorted({x for x in slots if used[x] == 2})
        if lent:
            raise InvalidSlotError(self.name, lent, "are lent to a request: return them with free_lent")
        raise DoubleFreeError(self.name, sorted({x for x in slots if not used[x]}))

    def _free_quarantined(self, slots: Sequence[int]) -> None:
        s = set(slots)
        if len(s) != len(slots):
            raise DoubleFreeError(self.name, sorted(x for x in s if slots.count(x) > 1))
        self.check_used(s)
        used = self._used
        lent = sorted(x for x in s if used[x] == 2)
        if lent:
            raise InvalidSlotError(self.name, lent, "are lent to a request: return them with free_lent")
        q = self._quarantine
        held = [x for x in slots if x in q]
        if held:
            if not self._deferred.isdisjoint(held):
                raise DoubleFreeError(self.name, sorted(self._deferred.intersection(held)))
            self._deferred.update(held)
        stack = self._stack
        top = self._top
        for x in slots:
            if x not in q:
                used[x] = 0
                stack[top] = x
                top += 1
        self._top = top

    def check_used(self, slots: Iterable[int]) -> None:
        """Raise `InvalidSlotError` unless every slot is allocated (not free, in range)."""
        s = set(slots)
        if s and (min(s) < 0 or max(s) >= self.capacity):
            raise InvalidSlotError(
                self.name, sorted(x for x in s if not 0 <= x < self.capacity),
                f"outside capacity {self.capacity}",
            )
        used = self._used
        bad = sorted(x for x in s if not used[x])
        if bad:
            raise InvalidSlotError(self.name, bad, "are free, not allocated")

    def quarantine(self, slots: Iterable[int]) -> None:
        """Keep used slots from returning to the free list until `release_quarantine`."""
        q = self._quarantine
        cap = self.capacity
        used = self._used
        for x in slots:
            if not 0 <= x < cap or not used[x]:
                raise InvalidSlotError(self.name, [x], "are free and cannot be quarantined")
            q[x] = q.get(x, 0) + 1

    def release_quarantine(self, slots: Iterable[int]) -> int:
        """Drop one quarantine reference per slot; free deferred slots that reach zero."""
        q = self._quarantine
        freed: list[int] = []
        for x in slots:
            c = q.get(x)
            if c is None:
                raise InvalidSlotError(self.name, [x], "are not quarantined")
            if c > 1:
                q[x] = c - 1
                continue
            del q[x]
            if x in self._deferred:
                self._deferred.discard(x)
                freed.append(x)
        if freed:
            used = self._used
            stack = self._stack
            top = self._top
            for x in freed:
                used[x] = 0
                stack[top] = x
                top += 1
            self._top = top
        return len(freed)

    def is_free(self, slot: int) -> bool:
        return 0 <= slot < self.capacity and not self._used[slot]


    def quarantined(self) -> dict[int, int]:
        """Slot -> outstanding quarantine references (a copy)."""
        return dict(self._quarantine)

    def deferred(self) -> set[int]:
        """Quarantined slots whose owner already gave them up (freed when quarantine ends)."""
        return set(self._deferred)
