"""`LeaseUnifiedRadixCache`: SGLang's cache with several live load-backs per anchor.

`UnifiedRadixCache` records each in-flight load-back in ``ongoing_load_back``
keyed by its anchor node; a second load-back on the same anchor overwrites
the first's lock receipts (they leak) and its ack then finds nothing to pop
(``KeyError``). This subclass keeps the attribute (SGLang's scheduler and
`sanity_check` read it) but makes it an `AnchorLoadBacks`: a dict holding the
oldest load-back per anchor, with later ones queued behind it, so acks, which
the cache controller delivers in load order, consume them in commit order,
matching `LeaseTreeCore.finish_load_back`.

Selected with SGLang's radix-cache registry: ``--radix-cache-backend leases``
builds this class through SGLang's own `create_unified_radix_cache` with tree
core ``"leases"`` (see `plugin`).
"""

from __future__ import annotations

from collections import deque
from typing import TypeVar, overload

from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache, _OngoingLoadBack

_T = TypeVar("_T")


class AnchorLoadBacks(dict[int, _OngoingLoadBack]):
    """In-flight load-backs by anchor: the dict shows the oldest, later ones wait in a FIFO.

    `len` counts every in-flight load-back (SGLang's idle check is
    ``len(ongoing_load_back) == 0``); ``d[a] = lb`` queues behind a live one;
    `pop` returns the oldest and promotes the next.
    """

    __slots__ = ("_later", "_queued")

    def __init__(self) -> None:
        super().__init__()
        self._later: dict[int, deque[_OngoingLoadBack]] = {}
        self._queued = 0

    def __setitem__(self, anchor: int, load_back: _OngoingLoadBack) -> None:
        if dict.__contains__(self, anchor):
            self._later.setdefault(anchor, deque()).append(load_back)
            self._queued += 1
        else:
            dict.__setitem__(self, anchor, load_back)

    @overload
    def pop(self, anchor: int, /) -> _OngoingLoadBack: ...
    @overload
    def pop(self, anchor: int, default: _OngoingLoadBack | _T, /) -> _OngoingLoadBack | _T: ...
    def pop(self, anchor: int, *default: _OngoingLoadBack | _T) -> _OngoingLoadBack | _T:
        """Remove and return the oldest load-back on `anchor`; the next one takes its place."""
        if not dict.__contains__(self, anchor):
            if default:
                return default[0]
            raise KeyError(anchor)
        oldest = dict.pop(self, anchor)
        later = self._later.get(anchor)
        if later:
            dict.__setitem__(self, anchor, later.popleft())
            self._queued -= 1
            if not later:
                del self._later[anchor]
        return oldest

    def __len__(self) -> int:
        return dict.__len__(self) + self._queued

    def clear(self) -> None:
        dict.clear(self)
        self._later.clear()
        self._queued = 0

    def queued(self, anchor: int) -> int:
        """How many load-backs on `anchor` are in flight (0 when none)."""
        if not dict.__contains__(self, anchor):
            return 0
        later = self._later.get(anchor)
        return 1 + (len(later) if later else 0)


class LeaseUnifiedRadixCache(UnifiedRadixCache):
    """SGLang's `UnifiedRadixCache` whose ``ongoing_load_back`` holds several load-backs per anchor."""

    _ongoing: AnchorLoadBacks

    @property
    def ongoing_load_back(self) -> AnchorLoadBacks:
        return self._ongoing

    @ongoing_load_back.setter
    def ongoing_load_back(self, value: dict[int, _OngoingLoadBack]) -> None:
        fresh = AnchorLoadBacks()
        for anchor, load_back in value.items():
            fresh[anchor] = load_back
        self._ongoing = fresh
