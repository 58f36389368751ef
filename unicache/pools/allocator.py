"""`SlotAllocator`: exact slot accounting for one pool (torch-free)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import length_hint
from typing import NoReturn

from unicache.errors import DoubleFreeError, InvalidSlotError

_USED = b"\x01"
_LENT = b"\x02"


def _iter(slots: Sequence[int]) -> Iterator[int]:
    """An iterator over `slots` whose `length_hint` is exact (an array's iterator has none)."""
    return iter(slots if type(slots) is list or type(slots) is tuple else list(slots))


class SlotAllocator:
    """Hands out slot ids 0..capacity-1, lowest first; frees are checked, never clamped.

    Allocation and the checks cost per run of consecutive slots, not per slot
    (a request's pages are a few runs; `bench_allocator.py`):

    - The free slots are runs `[a, b)`, kept coalesced in two dicts
      (`_end_of` start -> end, `_start_of` end -> start), with a stack of
      run starts in the order they were freed (`_stack`, top last; an entry
      whose run was merged or taken is skipped when it reaches the top).
      `_take` hands out the top runs lowest slot first, as slices of `_ids`
      (one int object per slot, shared by every list handed out; with
      `compact=True` an `array("i")`, and `alloc_compact` hands out arrays,
      4 bytes a slot, for holders that keep many slots: host pools).
    - `_used` holds one byte per slot (0 free, 1 used, 2 lent to a request),
      written one slice assignment per run. It is twice the capacity with an
      upper half that stays 0: an id out of range (negative ones wrap into
      that half) reads as "not allocated" at no extra cost.
    - `_head` marks the first slot of every run handed out, so `_runs` can
      split a list the cache passes back (a request's pages, a node's pages)
      into its runs with C-level byte searches, and prove each run with one
      C-level list compare. A list it cannot prove (hand-made, listed twice)
      takes the per-slot path, with the same checks and errors.

    `free` checks every slot (in range, allocated, listed once) before it
    changes anything; a bad call raises naming the slots and changes nothing.

    Lent slots: `alloc_lent` marks the slots it hands out as lent to a request
    (byte 2 instead of 1); `adopt` turns lent slots into plain used ones (the
    request donated them) and `free_lent` returns them, each checking every
    slot first, so request ownership costs no set.

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
        "name", "capacity", "compact", "_ids", "_head", "_stack", "_end_of", "_start_of", "_nfree", "_used",
        "_quarantine", "_deferred", "refuse", "injected_refusals",
    )

    def __init__(self, name: str, capacity: int, *, compact: bool = False) -> None:
        if capacity < 0:
            raise ValueError(f"pool {name}: capacity must be >= 0, got {capacity}")
        self.name = name
        self.capacity = capacity
        self.compact = compact
        ids = range(capacity)
        self._ids: list[int] | array[int] = array("i", ids) if compact else list(ids)
        self._head = bytearray(capacity)
        self._stack: list[int] = [0] if capacity else []
        self._end_of: dict[int, int] = {0: capacity} if capacity else {}
        self._start_of: dict[int, int] = {capacity: 0} if capacity else {}
        self._nfree = capacity
        self._used = bytearray(2 * capacity)
        self._quarantine: dict[int, int] = {}
        self._deferred: set[int] = set()
        self.refuse = 0
        self.injected_refusals = 0

    @property
    def free_count(self) -> int:
        return self._nfree

    @property
    def used_count(self) -> int:
        return self.capacity - self._nfree

    @property
    def quarantined_count(self) -> int:
        return len(self._quarantine)

    def free_runs(self) -> list[tuple[int, int]]:
        """The free runs `(start, end)` in the order allocation takes them, last first (a copy)."""
        end_of = self._end_of
        top_first = dict.fromkeys(a for a in reversed(self._stack) if a in end_of)
        return [(a, end_of[a]) for a in reversed(top_first)]

    def alloc(self, n: int) -> list[int] | None:
        """`n` slots, or None (nothing taken) when fewer are free."""
        out = self._take(n, _USED)
        if out is None or isinstance(out, list):
            return out
        return out.tolist()

    def alloc_lent(self, n: int) -> list[int] | None:
        """Like `alloc`, the slots marked as lent to a request (`adopt`, `free_lent`)."""
        if n == 1 and self._nfree and not self.refuse:
            stack = self._stack
            a = stack[-1]
            end_of = self._end_of
            b = end_of.get(a, -1)
            if b >= 0:
                del end_of[a]
                if b - a > 1:
                    end_of[a + 1] = b
                    self._start_of[b] = a + 1
                    stack[-1] = a + 1
                else:
                    del self._start_of[b]
                    stack.pop()
                self._nfree -= 1
                self._used[a] = 2
                self._head[a] = 1
                return [self._ids[a]]
        out = self._take(n, _LENT)
        if out is None or isinstance(out, list):
            return out
        return out.tolist()

    def is_lent(self, slot: int) -> bool:
        return 0 <= slot < self.capacity and self._used[slot] == 2

    def lent(self) -> list[int]:
        """Every slot lent to a request now, ascending (a scan: for checks and dumps)."""
        used = self._used
        out: list[int] = []
        i = used.find(2, 0, self.capacity)
        while i >= 0:
            out.append(i)
            i = used.find(2, i + 1, self.capacity)
        return out

    def _runs(self, slots: Sequence[int]) -> list[int] | None:
        """`slots` as disjoint ascending runs `[a0, b0, a1, b1, ...]` in order, or None.

        A run starting at slot `a` ends at most at the next slot that is free
        or starts another run `_take` handed out (`_head`), both found by a
        C-level byte search, and is proved with one C-level compare against
        `_ids` (same container type). None (take the per-slot path) when a
        proof fails, a slot is out of range, or two runs overlap (a slot
        listed twice).
        """
        ids = self._ids
        head = self._head
        used = self._used
        cap = self.capacity
        n = len(slots)
        p = 0
        out: list[int] = []
        while p < n:
            a = slots[p]
            if not 0 <= a < cap:
                return None
            b = a + n - p
            e = head.find(1, a + 1, b)
            if e >= 0:
                b = e
            e = used.find(0, a + 1, b)
            if e >= 0:
                b = e
            if slots[p : p + b - a] != ids[a:b]:
                return None
            out.append(a)
            out.append(b)
            p += b - a
        if len(out) > 2:
            bounds = sorted(zip(out[::2], out[1::2]))
            for i in range(1, len(bounds)):
                if bounds[i][0] < bounds[i - 1][1]:
                    return None
        return out

    def adopt(self, slots: Sequence[int]) -> bool:
        """Lent slots become plain used ones (donated to the cache); False, changing nothing, if
        any slot is not lent or is listed twice."""
        if not slots:
            return True
        used = self._used
        if len(slots) == 1:
            x = slots[0]
            if not 0 <= x < self.capacity or used[x] != 2:
                return False
            used[x] = 1
            return True
        runs = self._runs(slots)
        if runs is not None:
            for i in range(0, len(runs), 2):
                a = runs[i]
                b = runs[i + 1]
                if used.count(2, a, b) != b - a:
                    return False
            for i in range(0, len(runs), 2):
                a = runs[i]
                b = runs[i + 1]
                used[a:b] = _USED * (b - a)
            return True
        it = _iter(slots)
        try:
            for x in it:
                if used[x] != 2:
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
        runs = self._runs(slots)
        if runs is not None:
            for i in range(0, len(runs), 2):
                a = runs[i]
                b = runs[i + 1]
                if used.count(2, a, b) != b - a:
                    return False
            if self._quarantine:
                for i in range(0, len(runs), 2):
                    used[runs[i] : runs[i + 1]] = _USED * (runs[i + 1] - runs[i])
                self.free(slots)
                return True
            self._clear_runs(runs)
            return True
        it = _iter(slots)
        done = -1
        try:
            for x in it:
                if used[x] != 2:
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
        self._push_slots(slots)
        return True

    def alloc_compact(self, n: int) -> array[int] | None:
        """Like `alloc`, as an `array("i")` (a compact allocator's native form)."""
        out = self._take(n, _USED)
        if out is None or isinstance(out, array):
            return out
        return array("i", out)

    def _take(self, n: int, mark: bytes) -> list[int] | array[int] | None:
        """`n` slots from the runs on top of the stack, each run marked with one slice assignment."""
        if n > self._nfree:
            return None
        if self.refuse and n > 0:
            self.refuse -= 1
            self.injected_refusals += 1
            return None
        ids = self._ids
        if n <= 0:
            if n < 0:
                raise InvalidSlotError(self.name, [], f"cannot allocate {n} slots")
            return ids[:0]
        self._nfree -= n
        stack = self._stack
        end_of = self._end_of
        start_of = self._start_of
        used = self._used
        head = self._head
        out = None
        while True:
            a = stack[-1]
            b = end_of.get(a, -1)
            if b < 0:
                stack.pop()
                continue
            k = b - a
            if k > n:
                c = a + n
                del end_of[a]
                end_of[c] = b
                start_of[b] = c
                stack[-1] = c
                used[a:c] = mark * n
                head[a] = 1
                if out is None:
                    return ids[a:c]
                out.extend(ids[a:c])
                return out
            stack.pop()
            del end_of[a]
            del start_of[b]
            used[a:b] = mark * k
            head[a] = 1
            if out is None:
                out = ids[a:b]
            else:
                out.extend(ids[a:b])
            n -= k
            if not n:
                return out

    def _push(self, a: int, b: int) -> None:
        """Free the checked run `[a, b)`: merged with the free runs it touches, on top of the stack.

        A used slot right after the run now starts a run of its own (`_runs`).
        """
        zeros = bytes(b - a)
        used = self._used
        used[a:b] = zeros
        head = self._head
        head[a:b] = zeros
        if used[b]:
            head[b] = 1
        self._nfree += b - a
        end_of = self._end_of
        start_of = self._start_of
        c = end_of.pop(b, -1)
        if c >= 0:
            del start_of[c]
            b = c
        z = start_of.pop(a, -1)
        if z >= 0:
            del end_of[z]
            a = z
        end_of[a] = b
        start_of[b] = a
        stack = self._stack
        stack.append(a)
        if len(stack) > 2 * len(end_of) + 64:
            live = dict.fromkeys(x for x in reversed(stack) if x in end_of)
            self._stack = list(reversed(live))

    def _clear_runs(self, runs: list[int]) -> None:
        """Free the checked runs `[a0, b0, a1, b1, ...]` (`_push` each)."""
        for i in range(0, len(runs), 2):
            self._push(runs[i], runs[i + 1])

    def _push_slots(self, slots: Iterable[int]) -> None:
        """Free checked slots, in order, as the runs they form (`_push` each)."""
        a = b = -1
        for x in slots:
            if x == b:
                b += 1
                continue
            if b >= 0:
                self._push(a, b)
            a = x
            b = x + 1
        if b >= 0:
            self._push(a, b)

    def free(self, slots: Sequence[int]) -> None:
        """Return used slots; quarantined ones wait for their quarantine to end."""
        if not slots:
            return
        if self._quarantine:
            self._free_quarantined(slots)
            return
        used = self._used
        runs = self._runs(slots)
        if runs is not None:
            for i in range(0, len(runs), 2):
                if used.find(0, runs[i], runs[i + 1]) >= 0:
                    break
            else:
                self._clear_runs(runs)
                return
        cap = self.capacity
        if len(set(slots)) != len(slots) or not all(0 <= x < cap and used[x] for x in slots):
            self._raise_bad_free(slots)
        for x in slots:
            used[x] = 0
        self._push_slots(slots)

    def _raise_bad_free(self, slots: Sequence[int]) -> NoReturn:
        """The error for a `free` that found a slot out of range, listed twice or not allocated."""
        cap = self.capacity
        bad = sorted({x for x in slots if not 0 <= x < cap})
        if bad:
            raise InvalidSlotError(self.name, bad, f"outside capacity {cap}")
        dup = sorted({x for x in slots if slots.count(x) > 1})
        if dup:
            raise DoubleFreeError(self.name, dup)
        used = self._used
        raise DoubleFreeError(self.name, sorted({x for x in slots if not used[x]}))

    def _free_quarantined(self, slots: Sequence[int]) -> None:
        s = set(slots)
        if len(s) != len(slots):
            raise DoubleFreeError(self.name, sorted(x for x in s if slots.count(x) > 1))
        self.check_used(s)
        q = self._quarantine
        held = [x for x in slots if x in q]
        if held:
            if not self._deferred.isdisjoint(held):
                raise DoubleFreeError(self.name, sorted(self._deferred.intersection(held)))
            self._deferred.update(held)
        used = self._used
        freed = [x for x in slots if x not in q]
        for x in freed:
            used[x] = 0
        self._push_slots(freed)

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
            for x in freed:
                used[x] = 0
            self._push_slots(freed)
        return len(freed)

    def is_free(self, slot: int) -> bool:
        return 0 <= slot < self.capacity and not self._used[slot]

    def quarantined(self) -> dict[int, int]:
        """Slot -> outstanding quarantine references (a copy)."""
        return dict(self._quarantine)

    def deferred(self) -> set[int]:
        """Quarantined slots whose owner already gave them up (freed when quarantine ends)."""
        return set(self._deferred)
