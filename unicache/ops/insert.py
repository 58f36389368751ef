"""Insert: a computed sequence's slots move into the tree (new or un-evicted nodes, Mamba)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from unicache.markers import FULL, MAMBA, SWA_IDX, Mamba
from unicache import guards
from unicache.errors import InvalidArgumentError, InvalidSlotError
from unicache.pools.allocator import SlotAllocator
from unicache.reasons import Reason, ReasonKind
from unicache.results import InsertResult, MambaOutcome
from unicache.transfer.base import CopyOp, Tier
from unicache.tree.node import TOKEN_BYTES, Node, encode_tokens
from unicache.tree.pins import backup_in_flight
from unicache.tree.radix import common_pages

if TYPE_CHECKING:
    from unicache.cache import UniCache


def insert(cache: UniCache,
    tokens: Sequence[int],
    full_slots: Sequence[int],
    *,
    start: int = 0,
    swa_slots: Sequence[int] | None = None,
    mamba_slot: int | None = None,
    mamba_donate: bool = True,
) -> InsertResult:
    """Cache a computed sequence; every slot passed moves to the cache.

    `tokens[:start]` must already be on device along the tree path (the
    request's locked prefix); `full_slots`/`swa_slots` are the request's
    pages for `tokens[start:]`. See docs/cache.md for the Mamba modes.
    """
    guards.owner_thread(cache, "insert")
    tb = encode_tokens(tokens)
    ps = cache._ps
    n = len(tb) // TOKEN_BYTES
    fs = list(full_slots)
    ss = list(swa_slots) if swa_slots is not None else None
    cache._check_insert_args(n, start, fs, ss, mamba_slot)
    if mamba_slot is not None and mamba_donate:
        cache._stores[MAMBA].device.adopt((mamba_slot,))
    tree = cache._tree
    fd = cache._fd
    clk = cache._tick()
    node = cache.root
    pos = 0
    new_tokens = unevicted = dup = 0
    missing = False
    path: list[Node] = []
    lru_full = cache._stores[FULL].lru_device
    dups = cache._dups
    w = tree.page_bytes
    while pos < n:
        pb = pos * TOKEN_BYTES
        child = node.children.get(tb[pb : pb + w])
        if child is None:
            if pos < start:
                missing = True
                break
            leaf = tree.add_leaf(node, tb[pb:])
            i = (pos - start) // ps
            leaf.dev_full = fs[i:] if i else fs
            node.dev_children += 1
            leaf.last_access = clk
            leaf.hits = 1
            lru_full.push(leaf)
            if ss is not None:
                leaf.dev_swa = ss[i:] if i else ss
                cache._stores[SWA_IDX].lru_device.push(leaf)
            new_tokens += n - pos
            path.append(leaf)
            node = leaf
            pos = n
            break
        klen = child.end - child.start
        if not tb.startswith(child.kb, pb):
            klen = common_pages(tb[pb:], child.kb, w) // TOKEN_BYTES
            child = tree.split(child, klen)
        if pos < start < pos + klen:
            klen = start - pos
            child = tree.split(child, klen)
        child.last_access = clk
        child.hits += 1
        path.append(child)
        if pos < start:
            if child.dev_full is None:
                missing = True
                break
        else:
            i = (pos - start) // ps
            j = i + klen // ps
            if child.dev_full is None:
                child.dev_full = fs[i:j]
                node.dev_children += 1
                unevicted += klen
                lru_full.push(child)
                if child.host_pages is not None:
                    dups[child.id] = child
            else:
                fd.free(fs[i:j])
                dup += j - i
            if ss is not None:
                if child.dev_swa is None:
                    child.dev_swa = ss[i:j]
                    cache._stores[SWA_IDX].lru_device.push(child)
                else:
                    sd = cache._stores[SWA_IDX].device
                    sd.free(ss[i:j])
        node = child
        pos += klen
    c = cache.counters
    c.inserts += 1
    if missing:
        fd.free(fs)
        if ss is not None:
            sd = cache._stores[SWA_IDX].device
            sd.free(ss)
        if mamba_slot is not None and mamba_donate:
            md = cache._stores[MAMBA].device
            md.free([mamba_slot])
        c.prefix_missing += 1
        return InsertResult(node, 0, 0, 0, "none", True)
    c.inserted_tokens += new_tokens
    c.unevicted_tokens += unevicted
    c.duplicate_pages_freed += dup
    outcome: MambaOutcome = "none"
    if mamba_slot is not None:
        outcome = cache._insert_mamba(node, mamba_slot, mamba_donate)
    if not cache._wb and path:
        thr = cache._wt_threshold
        for x in reversed(path):
            if x.hits >= thr:
                if x.host_pages is None:
                    if not backup_in_flight(x):
                        cache._backup_nodes(cache._unbacked_chain(x))
                else:
                    _backup_new_aux(cache, x)
                break
    return InsertResult(node, new_tokens, unevicted, dup, outcome)


def _backup_new_aux(cache: UniCache, x: Node) -> None:
    """Write-through of a node whose Full is on host: back up the SWA/Mamba added since."""
    swa = (
        x.dev_swa is not None
        and x.host_swa_pages is None
        and not backup_in_flight(x, x.pins_swa)
    )
    mamba = (
        x.dev_mamba is not None
        and x.host_mamba is None
        and not backup_in_flight(x, x.pins_mamba)
    )
    if swa or mamba:
        cache._backup_aux(x, swa, mamba)


def check_insert_args(
    cache: UniCache,
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
    ps = cache._ps
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
    if cache._swa:
        if ss is None or len(ss) != pages:
            raise InvalidArgumentError(
                f"insert: SWA is enabled; swa_slots must give {pages} pages, got "
                f"{None if ss is None else len(ss)}"
            )
    elif ss is not None:
        raise InvalidArgumentError("insert: swa_slots given but SWA is not enabled")
    if mamba_slot is not None:
        if not cache._mamba:
            raise InvalidArgumentError("insert: mamba_slot given but Mamba is not enabled")
        md = cache._stores[MAMBA].device
        if not md.is_lent(mamba_slot):
            raise InvalidSlotError(
                md.name, [mamba_slot], "is not a request-owned Mamba slot (alloc_device)"
            )
    fd = cache._fd
    if not fd.adopt(fs):
        _not_lent(fd, fs)
    if ss is not None:
        sd = cache._stores[SWA_IDX].device
        if not sd.adopt(ss):
            fd.relend(fs)
            _not_lent(sd, ss)


def _not_lent(alloc: SlotAllocator, slots: list[int]) -> NoReturn:
    bad = sorted({x for x in slots if not alloc.is_lent(x)})
    raise InvalidSlotError(
        alloc.name, bad or slots,
        "are not request-owned device pages (alloc_device) or are listed twice",
    )


def insert_mamba(cache: UniCache, node: Node, slot: int, donate: bool) -> MambaOutcome:
    md = cache._stores[MAMBA].device
    c = cache.counters
    if node.parent is None or node.dev_mamba is not None:
        if donate:
            md.free([slot])
        if node.parent is not None:
            c.mamba_duplicates += 1
            cache.reasons.note(Reason("insert", ReasonKind.DUPLICATE, "mamba", (node.id,), free=int(donate)))
            return "duplicate"
        return "none"
    if donate:
        node.dev_mamba = slot
        cache._stores[MAMBA].lru_device.push(node)
        return "donated"
    got = cache._alloc_dev(MAMBA, 1)
    if got is None:
        c.mamba_skipped += 1
        cache.reasons.note(cache._no_room_reason("insert", MAMBA, 1, (node.id,)))
        return "skipped"
    cache.pools.copy(CopyOp(Mamba, Tier.DEVICE, Tier.DEVICE, [slot], got))
    node.dev_mamba = got[0]
    cache._stores[MAMBA].lru_device.push(node)
    return "copied"
