"""`Inserter`: a computed sequence's slots move into the tree (new or un-evicted nodes, Mamba)."""

from __future__ import annotations

from typing import NoReturn

from unicache.components.catalog import ComponentSet
from unicache.counters import CacheCounters
from unicache.errors import InvalidArgumentError, InvalidSlotError
from unicache.markers import MAMBA, Mamba
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
        tb: bytes,
        fs: list[int],
        start: int,
        ss: list[int] | None,
        mamba_slot: int | None,
        mamba_donate: bool,
    ) -> InsertResult:
        """Cache the sequence with key bytes `tb`; every slot passed moves to the cache.

        Call `take_request_slots` first (it validates and takes `fs`/`ss` over).
        The first `start` tokens must already be on device along the tree path
        (the request's locked prefix); `fs`/`ss` are the request's pages for
        the rest. See docs/cache.md for the Mamba modes.
        """
        ps = self._ps
        tree = self._tree
        tw = tree.token_bytes
        n = len(tb) // tw
        if mamba_slot is not None and mamba_donate:
            self._components.mamba.device.adopt((mamba_slot,))
        fd = self._components.full.device
        clk = self._tree.tick()
        node = self._tree.root
        pos = 0
        new_tokens = unevicted = dup = 0
        missing = False
        path: list[Node] = []
        full = self._components.full
        lru_full = full.lru_device
        dups = full.dups
        fdev = full.dev
        fhost = full.host_col
        swa = self._components.swa
        sdev = swa.dev
        w = tree.page_bytes
        while pos < n:
            pb = pos * tw
            child = node.children.get(tb[pb : pb + w])
            if child is None:
                if pos < start:
                    missing = True
                    break
                leaf = tree.add_leaf(node, tb[pb:])
                i = (pos - start) // ps
                fdev[leaf.slot] = fs[i:] if i else fs
                node.dev_children += 1
                leaf.last_access = clk
                leaf.hits = 1
                lru_full.push(leaf)
                if ss is not None:
                    sdev[leaf.slot] = ss[i:] if i else ss
                    swa.lru_device.push(leaf)
                new_tokens += n - pos
                path.append(leaf)
                node = leaf
                pos = n
                break
            klen = child.end - child.start
            if not tb.startswith(child.kb, pb):
                klen = common_pages(tb[pb:], child.kb, w) // tw
                child = tree.split(child, klen)
            if pos < start < pos + klen:
                klen = start - pos
                child = tree.split(child, klen)
            child.last_access = clk
            child.hits += 1
            path.append(child)
            slot = child.slot
            if pos < start:
                if fdev[slot] is None:
                    missing = True
                    break
            else:
                i = (pos - start) // ps
                j = i + klen // ps
                if fdev[slot] is None:
                    fdev[slot] = fs[i:j]
                    node.dev_children += 1
                    unevicted += klen
                    lru_full.push(child)
                    if fhost[slot] is not None:
                        dups[child.id] = child
                else:
                    fd.free(fs[i:j])
                    dup += j - i
                if ss is not None:
                    if sdev[slot] is None:
                        sdev[slot] = ss[i:j]
                        swa.lru_device.push(child)
                    else:
                        swa.device.free(ss[i:j])
            node = child
            pos += klen
        c = self._counters
        c.inserts += 1
        if missing:
            fd.free(fs)
            if ss is not None:
                sd = self._components.swa.device
                sd.free(ss)
            if mamba_slot is not None and mamba_donate:
                md = self._components.mamba.device
                md.free([mamba_slot])
            c.prefix_missing += 1
            return InsertResult(node, 0, 0, 0, "none", True)
        c.inserted_tokens += new_tokens
        c.unevicted_tokens += unevicted
        c.duplicate_pages_freed += dup
        outcome: MambaOutcome = "none"
        if mamba_slot is not None:
            outcome = self._insert_mamba(node, mamba_slot, mamba_donate)
        if not self._write_back and path:
            backups = self._backups
            thr = self._wt_threshold
            for x in reversed(path):
                if x.hits >= thr:
                    if fhost[x.slot] is None:
                        if not backup_in_flight(full.pins(x)):
                            backups.back_up_chain(backups.unbacked_chain(x))
                    else:
                        backups.back_up_new_aux(x)
                    break
        return InsertResult(node, new_tokens, unevicted, dup, outcome)

    def take_request_slots(
        self,
        n: int,
        start: int,
        fs: list[int],
        ss: list[int] | None,
        mamba_slot: int | None,
    ) -> None:
        """Validate an insert's arguments, then take the request's Full and SWA pages over.

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
        pages = (n - start) // ps
        if len(fs) != pages:
            raise InvalidArgumentError(
                f"insert: {len(fs)} Full pages given for {n - start} tokens ({pages} pages)"
            )
        if self._components.has_swa:
            if ss is None or len(ss) != pages:
                raise InvalidArgumentError(
                    f"insert: SWA is enabled; swa_slots must give {pages} pages, got "
                    f"{None if ss is None else len(ss)}"
                )
        elif ss is not None:
            raise InvalidArgumentError("insert: swa_slots given but SWA is not enabled")
        if mamba_slot is not None:
            if not self._components.has_mamba:
                raise InvalidArgumentError("insert: mamba_slot given but Mamba is not enabled")
            md = self._components.mamba.device
            if not md.is_lent(mamba_slot):
                raise InvalidSlotError(
                    md.name, [mamba_slot], "is not a request-owned Mamba slot (alloc_device)"
                )
        fd = self._components.full.device
        if not fd.adopt(fs):
            _not_lent(fd, fs)
        if ss is not None:
            sd = self._components.swa.device
            if not sd.adopt(ss):
                fd.relend(fs)
                _not_lent(sd, ss)


    def _insert_mamba(self, node: Node, slot: int, donate: bool) -> MambaOutcome:
        mamba = self._components.mamba
        md = mamba.device
        c = self._counters
        if node.parent is None or mamba.device_state(node) is not None:
            if donate:
                md.free([slot])
            if node.parent is not None:
                c.mamba_duplicates += 1
                self._reasons.note(Reason("insert", ReasonKind.DUPLICATE, "mamba", (node.id,), free=int(donate)))
                return "duplicate"
            return "none"
        if donate:
            mamba.set_device_state(node, slot)
            mamba.lru_device.push(node)
            return "donated"
        got = self._room.alloc(MAMBA, 1)
        if got is None:
            c.mamba_skipped += 1
            self._reasons.note(self._room.no_room_reason("insert", MAMBA, 1, (node.id,)))
            return "skipped"
        self._pools.copy(CopyOp(Mamba, Tier.DEVICE, Tier.DEVICE, [slot], got))
        mamba.set_device_state(node, got[0])
        mamba.lru_device.push(node)
        return "copied"
