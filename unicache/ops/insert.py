"""`Inserter`: a computed sequence's slots move into the tree (new or un-evicted nodes, the end state)."""

from __future__ import annotations

from typing import NoReturn

from unicache.components.catalog import ComponentSet
from unicache.components.store import ComponentStore
from unicache.counters import CacheCounters
from unicache.errors import InvalidArgumentError, InvalidSlotError
from unicache.markers import component_name
from unicache.ops.backup import BackupScheduler
from unicache.ops.room import DeviceRoom
from unicache.pools.allocator import SlotAllocator
from unicache.pools.pools import PoolSet
from unicache.reasons import Reason, ReasonKind, ReasonLog
from unicache.results import InsertResult, MambaOutcome
from unicache.transfer.base import CopyOp, Tier
from unicache.tree.node import Node
from unicache.tree.pins import backup_in_flight
from unicache.tree.radix import RadixTree, common_pages


def _not_lent(alloc: SlotAllocator, slots: list[int]) -> NoReturn:
    bad = sorted({x for x in slots if not alloc.is_lent(x)})
    raise InvalidSlotError(
        alloc.name, bad or slots,
        "are not request-owned device pages (alloc_device) or are listed twice",
    )


class Inserter:
    """Validates an insert, takes the request's slots over, and files them in the tree."""

    __slots__ = (
        "_tree", "_components", "_room", "_backups", "_pools", "_counters", "_reasons", "_ps",
        "_write_back", "_wt_threshold",
    )

    def __init__(
        self,
        tree: RadixTree,
        components: ComponentSet,
        room: DeviceRoom,
        backups: BackupScheduler,
        pools: PoolSet,
        counters: CacheCounters,
        reasons: ReasonLog,
        page_size: int,
        write_back: bool,
        write_through_threshold: int,
    ) -> None:
        self._tree = tree
        self._components = components
        self._room = room
        self._backups = backups
        self._pools = pools
        self._counters = counters
        self._reasons = reasons
        self._ps = page_size
        self._write_back = write_back
        self._wt_threshold = write_through_threshold

    def insert(
        self,
        key: bytes,
        start: int,
        pages: list[list[int] | None],
        state_store: ComponentStore,
        state_slot: int | None,
        donate: bool,
    ) -> InsertResult:
        """Cache the sequence with key bytes `key`; every slot passed moves to the cache.

        Call `take_request_slots` first (it validates and takes the pages
        over). `pages[i]` holds component `i`'s pages for the tokens after
        `start` (None: that component gets none); `state_slot`, a state of
        `state_store` for the sequence's end. The first `start` tokens must
        already be on device along the tree path (the request's locked
        prefix). Each store files what it takes (`adopt_device`). See
        docs/cache.md for the state modes.
        """
        ps = self._ps
        tree = self._tree
        tw = tree.token_bytes
        n = len(key) // tw
        if state_slot is not None and donate:
            state_store.device.adopt((state_slot,))
        comps = self._components
        base = comps.base
        base_pages = pages[base.component_index]
        assert base_pages is not None
        base_dev = base.dev
        others: list[tuple[ComponentStore, list[int]]] = []
        for store in comps.aux:
            given = pages[store.component_index]
            if given is not None:
                others.append((store, given))
        clk = tree.tick()
        node = tree.root
        pos = 0
        new_tokens = unevicted = dup = 0
        missing = False
        path: list[Node] = []
        w = tree.page_bytes
        while pos < n:
            pb = pos * tw
            child = node.children.get(key[pb : pb + w])
            if child is None:
                if pos < start:
                    missing = True
                    break
                leaf = tree.add_leaf(node, key[pb:])
                i = (pos - start) // ps
                leaf.last_access = clk
                leaf.hits = 1
                base.adopt_device(leaf, base_pages[i:] if i else base_pages)
                for store, given in others:
                    store.adopt_device(leaf, given[i:] if i else given)
                new_tokens += n - pos
                path.append(leaf)
                node = leaf
                pos = n
                break
            klen = child.end - child.start
            if not key.startswith(child.kb, pb):
                klen = common_pages(key[pb:], child.kb, w) // tw
                child = tree.split(child, klen)
            if pos < start < pos + klen:
                klen = start - pos
                child = tree.split(child, klen)
            child.last_access = clk
            child.hits += 1
            path.append(child)
            if pos < start:
                if base_dev[child.slot] is None:
                    missing = True
                    break
            else:
                i = (pos - start) // ps
                j = i + klen // ps
                if base.adopt_device(child, base_pages[i:j]):
                    unevicted += klen
                else:
                    dup += j - i
                for store, given in others:
                    store.adopt_device(child, given[i:j])
            node = child
            pos += klen
        c = self._counters
        c.inserts += 1
        if missing:
            base.device.free(base_pages)
            for store, given in others:
                store.device.free(given)
            if state_slot is not None and donate:
                state_store.device.free([state_slot])
            c.prefix_missing += 1
            return InsertResult(node, 0, 0, 0, "none", True)
        c.inserted_tokens += new_tokens
        c.unevicted_tokens += unevicted
        c.duplicate_pages_freed += dup
        outcome: MambaOutcome = "none"
        if state_slot is not None:
            outcome = self._insert_state(state_store, node, state_slot, donate)
        if not self._write_back and path:
            backups = self._backups
            thr = self._wt_threshold
            for x in reversed(path):
                if x.hits >= thr:
                    if not base.on_host(x):
                        if not backup_in_flight(base.pins(x)):
                            backups.back_up_chain(backups.unbacked_chain(x))
                    else:
                        backups.back_up_new_aux(x)
                    break
        return InsertResult(node, new_tokens, unevicted, dup, outcome)

    def take_request_slots(
        self,
        n: int,
        start: int,
        pages: list[list[int] | None],
        state_store: ComponentStore,
        state_slot: int | None,
    ) -> None:
        """Validate an insert's arguments, then take the request's pages over (every component's).

        Raises (changing nothing) on a bad argument, or on pages the request
        does not own or lists twice.
        """
        ps = self._ps
        if n % ps:
            raise InvalidArgumentError(
                f"insert: {n} tokens is not a whole number of pages (page_size {ps})"
            )
        if not 0 <= start <= n or start % ps:
            raise InvalidArgumentError(
                f"insert: start {start} must be a page-aligned position in [0, {n}]"
            )
        count = (n - start) // ps
        comps = self._components
        taking: list[tuple[ComponentStore, list[int]]] = []
        for i, given in enumerate(pages):
            if given is None:
                continue
            store = comps.by_index[i]
            if store not in comps.configured:
                raise InvalidArgumentError(
                    f"insert: {component_name(store.component_marker)}_slots given but {store.name} is not enabled"
                )
            if len(given) != count:
                raise InvalidArgumentError(
                    f"insert: {len(given)} {store.name} pages given for {n - start} tokens ({count} pages)"
                )
            taking.append((store, given))
        if state_slot is not None:
            if state_store not in comps.configured:
                raise InvalidArgumentError(
                    f"insert: {component_name(state_store.component_marker)}_slot given but {state_store.name} "
                    "is not enabled"
                )
            device = state_store.device
            if not device.is_lent(state_slot):
                raise InvalidSlotError(
                    device.name, [state_slot],
                    f"is not a request-owned {state_store.name} slot (alloc_device)",
                )
        for k, (store, given) in enumerate(taking):
            if not store.device.adopt(given):
                for done, taken in taking[:k]:
                    done.device.relend(taken)
                _not_lent(store.device, given)

    def _insert_state(self, store: ComponentStore, node: Node, slot: int, donate: bool) -> MambaOutcome:
        """File the sequence's end state: donated, copied into a slot of the cache's, or a duplicate."""
        device = store.device
        c = self._counters
        if node.parent is None or store.on_device(node):
            if donate:
                device.free([slot])
            if node.parent is not None:
                c.count_state_duplicate(store.component_index)
                self._reasons.note(
                    Reason("insert", ReasonKind.DUPLICATE, component_name(store.component_marker), (node.id,), free=int(donate))
                )
                return "duplicate"
            return "none"
        if donate:
            store.adopt_device(node, [slot])
            return "donated"
        got = self._room.alloc(store.component_index, 1)
        if got is None:
            c.count_state_skipped(store.component_index)
            self._reasons.note(self._room.no_room_reason("insert", store.component_index, 1, (node.id,)))
            return "skipped"
        self._pools.copy(CopyOp(store.component_marker, Tier.DEVICE, Tier.DEVICE, [slot], got))
        store.adopt_device(node, got)
        return "copied"
