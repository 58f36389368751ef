"""`SlotAllocator`: exact slot accounting for one pool (torch-free)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from unicache.errors import DoubleFreeError, InvalidSlotError


class SlotAllocator:
    """Hands out slot ids 0..capacity-1, lowest first; frees are checked, never clamped.

    Quarantine: `quarantine(slots)` marks slots an unfinished copy may still
    touch (reference-counted, several copies may share a slot). Freeing a
    quarantined slot defers it until `release_quarantine` drops its count to
    zero. A slot is always exactly one of: free, used (possibly quarantined).
    """

    __slots__ = ("name", "capacity", "_free", "_free_set", "_quarantine", "_deferred")

    def __init__(self, name: str, capacity: int) -> None:
        if capacity < 0:
            raise ValueError(f"pool {name}: capacity must be >= 0, got {capacity}")
        self.name = name
        self.capacity = capacity
        self._free: list[int] = list(range(capacity - 1, -1, -1))
        self._free_set: set[int] = set(self._free)
        self._quarantine: dict[int, int] = {}
        self._deferred: set[int] = set()

    @property
    def free_count(self) -> int:
        return len(self._free)

    @property
    def used_count(self) -> int:
        return self.capacity - len(self._free)

    @property
    def quarantined_count(self) -> int:
        return len(self._quarantine)

    def alloc(self, n: int) -> list[int] | None:
        """`n` slots, or None (nothing taken) when fewer are free."""
        free = self._free
        if n > len(free):
            return None
        if n <= 0:
            if n < 0:
                raise InvalidSlotError(self.name, [], f"cannot allocate {n} slots")
            return []
        out = free[-n:]
        del free[-n:]
        out.reverse()
        self._free_set.difference_update(out)
        return out

    def _check(self, slots: Sequence[int]) -> set[int]:
        s = set(slots)
        if len(s) != len(slots):
            dup = sorted(x for x in s if slots.count(x) > 1)
            raise DoubleFreeError(self.name, dup)
        if s and (min(s) < 0 or max(s) >= self.capacity):
            bad = sorted(x for x in s if not 0 <= x < self.capacity)
            raise InvalidSlotError(self.name, bad, f"outside capacity {self.capacity}")
        return s

    def free(self, slots: Sequence[int]) -> None:
        """Return used slots; quarantined ones wait for their quarantine to end."""
        if not slots:
            return
        s = self._check(slots)
        free_set = self._free_set
        if not free_set.isdisjoint(s):
            raise DoubleFreeError(self.name, sorted(free_set & s))
        if self._quarantine:
            q = self._quarantine
            held = [x for x in slots if x in q]
            if held:
                if not self._deferred.isdisjoint(held):
                    raise DoubleFreeError(self.name, sorted(self._deferred.intersection(held)))
                self._deferred.update(held)
                s.difference_update(held)
                slots = [x for x in slots if x not in q]
        free_set.update(s)
        self._free.extend(slots)

    def check_used(self, slots: Iterable[int]) -> None:
        """Raise `InvalidSlotError` unless every slot is allocated (not free, in range)."""
        s = set(slots)
        if s and (min(s) < 0 or max(s) >= self.capacity):
            raise InvalidSlotError(
                self.name, sorted(x for x in s if not 0 <= x < self.capacity),
                f"outside capacity {self.capacity}",
            )
        bad = self._free_set & s
        if bad:
            raise InvalidSlotError(self.name, sorted(bad), "are free, not allocated")

    def quarantine(self, slots: Iterable[int]) -> None:
        """Keep used slots from returning to the free list until `release_quarantine`."""
        q = self._quarantine
        for x in slots:
            if x in self._free_set:
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
            self._free_set.update(freed)
            self._free.extend(freed)
        return len(freed)

    def is_free(self, slot: int) -> bool:
        return slot in self._free_set

    def quarantined(self) -> dict[int, int]:
        """Slot -> outstanding quarantine references (a copy)."""
        return dict(self._quarantine)

    def deferred(self) -> set[int]:
        """Quarantined slots whose owner already gave them up (freed when quarantine ends)."""
        return set(self._deferred)
