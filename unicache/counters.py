"""`CacheCounters`: monotonic event counts of one cache (lease counts live on the ledger)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from unicache.markers import FULL, MAMBA, SWA_IDX, ComponentIndex


@dataclass(slots=True)
class CacheCounters:
    """Plain ints, bumped on the hot paths; `as_dict()` for reports.

    Duplicates are counted per component: `*_duplicate_pages` (Full pages),
    `*_duplicate_swa_pages`, `*_duplicate_mamba` (slots) for copies that
    arrived where the data already was; `mamba_duplicates` counts every freed
    duplicate Mamba slot (insert, load-back, backup). `mamba_skipped` counts
    requests that got no Mamba slot (`alloc_device` or `insert`'s copy);
    `alloc_refused_*` every `alloc_device` that returned None.
    `timed_out_tickets` counts tickets given up on (`UniCache.time_out`, joiners
    included), `timed_out_slots` the rows their copies left quarantined, and
    `late_acks` the acks that arrived after their ticket timed out (each frees
    that quarantine and settles nothing else).
    """

    matches: int = 0
    match_tokens: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    inserts: int = 0
    inserted_tokens: int = 0
    unevicted_tokens: int = 0
    duplicate_pages_freed: int = 0
    prefix_missing: int = 0
    locks: int = 0
    load_backs: int = 0
    load_backs_noop: int = 0
    load_backs_refused: int = 0
    load_back_full_tokens: int = 0
    load_back_swa_tokens: int = 0
    load_back_mamba: int = 0
    load_backs_failed: int = 0
    load_back_duplicate_pages: int = 0
    load_back_duplicate_swa_pages: int = 0
    load_back_duplicate_mamba: int = 0
    load_back_joins: int = 0
    backups: int = 0
    backup_joins: int = 0
    backup_pages: int = 0
    backups_refused: int = 0
    backups_failed: int = 0
    backup_duplicate_pages: int = 0
    backup_duplicate_swa_pages: int = 0
    backup_duplicate_mamba: int = 0
    aux_backups: int = 0
    device_evictions: int = 0
    full_pages_evicted: int = 0
    swa_pages_evicted: int = 0
    mamba_evicted: int = 0
    demotions: int = 0
    aux_lost: int = 0
    dropped_nodes: int = 0
    host_evictions: int = 0
    host_pages_evicted: int = 0
    reclaimed_pages: int = 0
    evict_blocked: int = 0
    reclaim_blocked: int = 0
    mamba_skipped: int = 0
    mamba_duplicates: int = 0
    alloc_refused_full: int = 0
    alloc_refused_swa: int = 0
    alloc_refused_mamba: int = 0
    acks: int = 0
    stale_acks: int = 0
    duplicate_acks: int = 0
    failed_acks: int = 0
    resets: int = 0
    quarantined_slots: int = 0
    timed_out_tickets: int = 0
    timed_out_slots: int = 0
    late_acks: int = 0
    splits: int = 0

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def count_refused(self, i: ComponentIndex) -> None:
        """An `alloc_device` of component `i` that returned None."""
        if i == FULL:
            self.alloc_refused_full += 1
        elif i == SWA_IDX:
            self.alloc_refused_swa += 1
        elif i == MAMBA:
            self.alloc_refused_mamba += 1
            self.mamba_skipped += 1

    def count_load_back(self, i: ComponentIndex, moved: int) -> None:
        """A load-back moving `moved` tokens (a state: 1) of component `i`."""
        if i == FULL:
            self.load_back_full_tokens += moved
        elif i == SWA_IDX:
            self.load_back_swa_tokens += moved
        elif i == MAMBA:
            self.load_back_mamba += 1

    def count_load_back_duplicates(self, i: ComponentIndex, n: int) -> None:
        """`n` slots of component `i` a load-back freed: the data was already on device."""
        if i == FULL:
            self.load_back_duplicate_pages += n
        elif i == SWA_IDX:
            self.load_back_duplicate_swa_pages += n
        elif i == MAMBA:
            self.load_back_duplicate_mamba += n
            self.mamba_duplicates += n

    def count_backup_duplicates(self, i: ComponentIndex, n: int) -> None:
        """`n` slots of component `i` a backup freed: the data was already on host."""
        if i == FULL:
            self.backup_duplicate_pages += n
        elif i == SWA_IDX:
            self.backup_duplicate_swa_pages += n
        elif i == MAMBA:
            self.backup_duplicate_mamba += n
            self.mamba_duplicates += n

    def count_device_evicted(self, i: ComponentIndex, n: int) -> None:
        """`n` device slots of component `i` evicted."""
        if i == FULL:
            self.full_pages_evicted += n
        elif i == SWA_IDX:
            self.swa_pages_evicted += n
        elif i == MAMBA:
            self.mamba_evicted += 1

    def count_state_duplicate(self, i: ComponentIndex) -> None:
        """An insert's end state of component `i` that the node had already."""
        if i == MAMBA:
            self.mamba_duplicates += 1

    def count_state_skipped(self, i: ComponentIndex) -> None:
        """An insert's end state of component `i` not kept (no device room for its copy)."""
        if i == MAMBA:
            self.mamba_skipped += 1
