"""`UniCache`: the unified hierarchical radix prefix cache whose every pin is a lease."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from itertools import count
from typing import TYPE_CHECKING, TypeVar

from leases import EventKind, Held, Lease, LeaseLedger, Mailbox, PinSet

from unicache.components.full import deepest_device, evicted_chain, is_device_leaf
from unicache.components.markers import (
    FULL,
    MAMBA,
    SWA_IDX,
    SWA,
    Component,
    Full,
    Mamba,
)
from unicache.components.swa import window_nodes
from unicache.config import CacheConfig
from unicache.counters import CacheCounters
from unicache.errors import (
    DoubleFreeError,
    ForeignObjectError,
    InvalidArgumentError,
    InvalidSlotError,
    SanityError,
    UnknownNodeError,
    UnknownTicketError,
)
from unicache.introspect import (
    NodeInfo,
    QuarantineInfo,
    TicketInfo,
    dump_state,
    node_info,
    quarantine_info,
    ticket_info,
)
from unicache.pools.allocator import SlotAllocator
from unicache.pools.pools import PoolSet
from unicache.results import (
    Completion,
    InsertResult,
    MambaOutcome,
    MatchResult,
    TicketStatus,
)
from unicache.tickets import (
    BackupTicket,
    LoadBack,
    LoadBackTicket,
    LockReceipt,
    Segment,
    Ticket,
)
from unicache.transfer.base import Ack, CopyOp, JobKind, Tier, TransferEngine, TransferJob
from unicache.transfer.immediate import ImmediateEngine
from unicache.tree.lru import LazyLRU
from unicache.tree.node import Node
from unicache.tree.radix import RadixTree, common_pages

if TYPE_CHECKING:
    import torch

    from unicache.sanity import SanityReport

C = TypeVar("C")

_DEVICE = Tier.DEVICE
_HOST = Tier.HOST
_IN_FLIGHT = TicketStatus.IN_FLIGHT
_INDEX: dict[type, int] = {Full: FULL, SWA: SWA_IDX, Mamba: MAMBA}


@dataclass(slots=True)
class QuarantineRecord:
    """A ticket whose copy was still in flight at a reset; its slots wait for its stale ack."""

    ticket: Ticket
    generation: int
    copies: tuple[CopyOp, ...]


def _pins_full(node: Node) -> PinSet[Full]:
    p = node.pins_full
    if p is None:
        p = node.pins_full = PinSet(Full, node.id)
    return p


def _pins_swa(node: Node) -> PinSet[SWA]:
    p = node.pins_swa
    if p is None:
        p = node.pins_swa = PinSet(SWA, node.id)
    return p


def _pins_mamba(node: Node) -> PinSet[Mamba]:
    p = node.pins_mamba
    if p is None:
        p = node.pins_mamba = PinSet(Mamba, node.id)
    return p


def _has_pins(p: PinSet[C] | None) -> bool:
    return p is not None and bool(p)


class UniCache:
    """Full / SWA / Mamba KV on device and host tiers, in one paged radix tree.

    Every pin is a lease of the cache's `LeaseLedger`: lock receipts, load-back
    tickets and backup tickets each own one lease per component they cover,
    and every covered node holds that lease in its component's `PinSet`.
    Eviction and reclaim consult the pin sets; nothing else pins. The cache
    runs on one thread (the ledger's); acks from other threads go through
    `inbox`.
    """

    def __init__(self, config: CacheConfig, engine: TransferEngine | None = None) -> None:
        self.config = config
        self.ledger = LeaseLedger(
            config.ledger_name, strict=config.strict, debug=config.debug, history=config.history
        )
        self.pools = PoolSet(config)
        self.engine: TransferEngine = engine if engine is not None else ImmediateEngine()
        self.engine.attach(self.pools)
        self.counters = CacheCounters()
        self.inbox: Mailbox[Ack] = Mailbox(self.ledger)
        self._ps = config.page_size
        self._name = config.ledger_name
        self._swa = config.swa_window is not None
        self._window = config.swa_window or 0
        self._mamba = config.mamba
        self._wb = config.write_policy == "write_back"
        self._wt_threshold = config.write_through_threshold
        self._lb_threshold = max(1, config.load_back_threshold)
        self._enabled = (True, self._swa, self._mamba)
        self._dev: list[SlotAllocator | None] = [None, None, None]
        self._host: list[SlotAllocator | None] = [None, None, None]
        for comp in config.components:
            i = _INDEX[comp]
            self._dev[i] = self.pools.device_pool(comp).alloc
            self._host[i] = self.pools.host_pool(comp).alloc
        fd = self._dev[FULL]
        fh = self._host[FULL]
        assert fd is not None and fh is not None
        self._fd: SlotAllocator = fd
        self._fh: SlotAllocator = fh
        self._lent: tuple[set[int], set[int], set[int]] = (set(), set(), set())
        self._node_ids = count(1)
        self._ticket_ids = count(1)
        self._receipt_ids = count(1)
        self._last_ticket = 0
        self._clock = 0
        self._tickets: dict[int, Ticket] = {}
        self._quarantine: dict[int, QuarantineRecord] = {}
        self._scopes: dict[int, list[Node]] = {}
        self._completions: list[Completion] = []
        self._new_tree()

    def _new_tree(self) -> None:
        self._tree = RadixTree(self._ps, self._node_ids, owner=self, on_split=self._on_split)
        self.root = self._tree.root
        self._lru_dev = (LazyLRU(1), LazyLRU(2), LazyLRU(4))
        self._lru_host = (LazyLRU(8), LazyLRU(16), LazyLRU(32))
        self._dups: dict[int, Node] = {}

    def __repr__(self) -> str:
        comps = "+".join(c.__name__ for c in self.config.components)
        return (
            f"<UniCache {self.config.ledger_name!r} {comps} ps={self._ps} epoch={self.epoch} "
            f"nodes={self._tree.size} in_flight={len(self._tickets)}>"
        )

    @property
    def epoch(self) -> int:
        return self.ledger.epoch

    def _cidx(self, component: type) -> int:
        i = _INDEX.get(component)
        if i is None or not self._enabled[i]:
            raise InvalidArgumentError(
                f"component {getattr(component, '__name__', component)!r} is not enabled in "
                f"this cache (enabled: {[c.__name__ for c in self.config.components]})"
            )
        return i

    def _check_node(self, node: Node) -> None:
        if node.tree is not self:
            owner = node.tree
            name = owner.config.ledger_name if isinstance(owner, UniCache) else str(owner)
            raise ForeignObjectError("node", node.id, self.config.ledger_name, name)
        if not node.alive:
            raise UnknownNodeError(node.id, "is not a live node of this cache (removed or reset)")

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    # ------------------------------------------------------------------ match

    def match_prefix(self, tokens: Sequence[int]) -> MatchResult:
        """Longest cached prefix of `tokens` (whole pages), on device and after a load-back."""
        t = tokens if type(tokens) is tuple else tuple(tokens)
        n = len(t)
        n -= n % self._ps
        _, matched, path = self._tree.walk(t, n)
        clk = self._tick()
        root = self.root
        dev_node = anchor = root
        frontier = 0
        swa = self._swa
        mamba = self._mamba
        if not swa and not mamba:
            for node in path:
                node.last_access = clk
                node.hits += 1
                if node.dev_full is not None:
                    dev_node = node
            if path:
                anchor = path[-1]
            frontier = dev_node.end
        else:
            w = self._window
            run_any = run_dev = 0
            full_dev = True
            for node in path:
                node.last_access = clk
                node.hits += 1
                if node.dev_full is None:
                    full_dev = False
                else:
                    frontier = node.end
                lower = node.end - w
                if swa:
                    if node.dev_swa is None:
                        run_dev = node.end
                        if node.host_swa is None:
                            run_any = node.end
                    ok_any = run_any <= lower or run_any == 0
                    ok_dev = run_dev <= lower or run_dev == 0
                else:
                    ok_any = ok_dev = True
                if mamba:
                    if node.dev_mamba is None:
                        ok_dev = False
                        if node.host_mamba is None:
                            ok_any = False
                if ok_any:
                    anchor = node
                    if ok_dev and full_dev:
                        dev_node = node
        a_end = anchor.end
        full_host = a_end - frontier if a_end > frontier else 0
        swa_host = 0
        if swa and anchor is not dev_node:
            for node in window_nodes(anchor, self._window):
                if node.dev_swa is None:
                    swa_host += len(node.key)
        mamba_host = mamba and anchor.parent is not None and anchor.dev_mamba is None
        worth = anchor is not dev_node and (
            full_host >= self._lb_threshold or swa_host > 0 or mamba_host
        )
        c = self.counters
        c.matches += 1
        c.match_tokens += n
        c.device_hit_tokens += dev_node.end
        c.host_hit_tokens += a_end - dev_node.end
        return MatchResult(
            matched, dev_node, dev_node.end, anchor, a_end, full_host, swa_host, mamba_host, worth
        )

    # ------------------------------------------------------- request-owned slots

    def alloc_device(self, component: type, n: int) -> list[int] | None:
        """`n` device pages (Full/SWA) or Mamba slots for a request, evicting on shortfall.

        None when even eviction cannot make room (everything left is pinned).
        The slots belong to the caller until it donates them to `insert` or
        hands them back with `free_device`.
        """
        i = self._cidx(component)
        if n < 0:
            raise InvalidArgumentError(f"alloc_device({component.__name__}, {n}): n must be >= 0")
        got = self._alloc_dev(i, n)
        if got is not None:
            self._lent[i].update(got)
        return got

    def free_device(self, component: type, slots: Sequence[int]) -> None:
        """Hand request-owned device slots back (from `alloc_device`, not donated)."""
        i = self._cidx(component)
        alloc = self._dev[i]
        assert alloc is not None
        lent = self._lent[i]
        s = list(slots)
        bad = sorted(x for x in set(s) if x not in lent)
        if bad:
            already = [x for x in bad if 0 <= x < alloc.capacity and alloc.is_free(x)]
            if already:
                raise DoubleFreeError(alloc.name, already)
            raise InvalidSlotError(alloc.name, bad, "are not owned by a request (alloc_device)")
        alloc.free(s)
        lent.difference_update(s)

    def write_slots(
        self, component: type, slots: list[int], data: torch.Tensor, tier: Tier = _DEVICE
    ) -> None:
        """Store rows into a pool (tests and the engine's reference model)."""
        self._cidx(component)
        self.pools.write(component, tier, slots, data)

    def read_slots(self, component: type, slots: list[int], tier: Tier = _DEVICE) -> torch.Tensor:
        """A CPU copy of rows of a pool."""
        self._cidx(component)
        return self.pools.read(component, tier, slots)

    def _alloc_dev(self, i: int, n: int) -> list[int] | None:
        alloc = self._dev[i]
        assert alloc is not None
        got = alloc.alloc(n)
        if got is None:
            self._evict_dev(i, n - alloc.free_count)
            got = alloc.alloc(n)
        return got

    def _alloc_host(self, i: int, n: int) -> list[int] | None:
        alloc = self._host[i]
        assert alloc is not None
        got = alloc.alloc(n)
        if got is None:
            self._evict_host(i, n - alloc.free_count)
            got = alloc.alloc(n)
        return got

    # ------------------------------------------------------------- lock / unlock

    def lock(self, node: Node) -> LockReceipt:
        """Lock the path ending at `node` (its device-resident part) for a running request."""
        self._check_node(node)
        end = deepest_device(node)
        rid = next(self._receipt_ids)
        epoch = self.ledger.epoch
        self.counters.locks += 1
        if end.parent is None:
            return LockReceipt(
                rid, end, 0, epoch, None, None, None, f"lock#{rid}", self._scopes, self._name
            )
        end.last_access = self._tick()
        owner = f"lock#{rid}"
        ledger = self.ledger
        scopes = self._scopes
        full = ledger.acquire(Full, owner=owner, pins=(_pins_full(end),))
        scopes[full.id] = [end]
        swa: Lease[SWA, Held] | None = None
        mamba: Lease[Mamba, Held] | None = None
        if self._swa:
            win = window_nodes(end, self._window)
            swa = ledger.acquire(SWA, owner=owner, pins=tuple(_pins_swa(x) for x in win))
            scopes[swa.id] = win
        if self._mamba and end.dev_mamba is not None:
            mamba = ledger.acquire(Mamba, owner=owner, pins=(_pins_mamba(end),))
            scopes[mamba.id] = [end]
        return LockReceipt(rid, end, end.end, epoch, full, swa, mamba, owner, scopes, self._name)

    def unlock(self, receipt: LockReceipt) -> None:
        """Release exactly what `lock` took; a second unlock raises `DoubleReleaseError`."""
        receipt.release(scopes=self._scopes, cache=self.config.ledger_name)

    # -------------------------------------------------------------------- insert

    def insert(
        self,
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
        t = tokens if type(tokens) is tuple else tuple(tokens)
        ps = self._ps
        n = len(t)
        fs = list(full_slots)
        ss = list(swa_slots) if swa_slots is not None else None
        self._check_insert_args(n, start, fs, ss, mamba_slot)
        lent = self._lent
        lent[FULL].difference_update(fs)
        if ss is not None:
            lent[SWA_IDX].difference_update(ss)
        if mamba_slot is not None and mamba_donate:
            lent[MAMBA].discard(mamba_slot)
        tree = self._tree
        fd = self._fd
        clk = self._tick()
        node = self.root
        pos = 0
        new_tokens = unevicted = dup = 0
        missing = False
        path: list[Node] = []
        lru_full = self._lru_dev[FULL]
        dups = self._dups
        while pos < n:
            child = node.children.get(t[pos] if ps == 1 else t[pos : pos + ps])
            if child is None:
                if pos < start:
                    missing = True
                    break
                leaf = tree.add_leaf(node, t[pos:])
                i = (pos - start) // ps
                leaf.dev_full = fs[i:] if i else fs
                node.dev_children += 1
                leaf.last_access = clk
                leaf.hits = 1
                lru_full.push(leaf)
                if ss is not None:
                    leaf.dev_swa = ss[i:] if i else ss
                    self._lru_dev[SWA_IDX].push(leaf)
                new_tokens += n - pos
                path.append(leaf)
                node = leaf
                pos = n
                break
            key = child.key
            klen = len(key)
            if pos + klen > n or t[pos : pos + klen] != key:
                klen = common_pages(t[pos:], key, ps)
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
                    if child.host_full is not None:
                        dups[child.id] = child
                else:
                    fd.free(fs[i:j])
                    dup += j - i
                if ss is not None:
                    if child.dev_swa is None:
                        child.dev_swa = ss[i:j]
                        self._lru_dev[SWA_IDX].push(child)
                    else:
                        sd = self._dev[SWA_IDX]
                        assert sd is not None
                        sd.free(ss[i:j])
            node = child
            pos += klen
        c = self.counters
        c.inserts += 1
        if missing:
            fd.free(fs)
            if ss is not None:
                sd = self._dev[SWA_IDX]
                assert sd is not None
                sd.free(ss)
            if mamba_slot is not None and mamba_donate:
                md = self._dev[MAMBA]
                assert md is not None
                md.free([mamba_slot])
            c.prefix_missing += 1
            return InsertResult(node, 0, 0, 0, "none", True)
        c.inserted_tokens += new_tokens
        c.unevicted_tokens += unevicted
        c.duplicate_pages_freed += dup
        outcome: MambaOutcome = "none"
        if mamba_slot is not None:
            outcome = self._insert_mamba(node, mamba_slot, mamba_donate)
        if not self._wb and path:
            thr = self._wt_threshold
            for x in reversed(path):
                if x.hits >= thr:
                    if x.host_full is None and x.backing == 0:
                        self._backup_nodes(self._unbacked_chain(x))
                    break
        return InsertResult(node, new_tokens, unevicted, dup, outcome)

    def _check_insert_args(
        self, n: int, start: int, fs: list[int], ss: list[int] | None, mamba_slot: int | None
    ) -> None:
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
        lent = self._lent
        if not lent[FULL].issuperset(fs) or len(set(fs)) != len(fs):
            raise InvalidSlotError(
                self._fd.name, sorted(set(fs) - lent[FULL]) or fs,
                "are not request-owned device pages (alloc_device) or are listed twice",
            )
        if self._swa:
            if ss is None or len(ss) != pages:
                raise InvalidArgumentError(
                    f"insert: SWA is enabled; swa_slots must give {pages} pages, got "
                    f"{None if ss is None else len(ss)}"
                )
            sd = self._dev[SWA_IDX]
            assert sd is not None
            if not lent[SWA_IDX].issuperset(ss) or len(set(ss)) != len(ss):
                raise InvalidSlotError(
                    sd.name, sorted(set(ss) - lent[SWA_IDX]) or ss,
                    "are not request-owned device pages (alloc_device) or are listed twice",
                )
        elif ss is not None:
            raise InvalidArgumentError("insert: swa_slots given but SWA is not enabled")
        if mamba_slot is not None:
            if not self._mamba:
                raise InvalidArgumentError("insert: mamba_slot given but Mamba is not enabled")
            if mamba_slot not in lent[MAMBA]:
                md = self._dev[MAMBA]
                assert md is not None
                raise InvalidSlotError(
                    md.name, [mamba_slot], "is not a request-owned Mamba slot (alloc_device)"
                )

    def _insert_mamba(self, node: Node, slot: int, donate: bool) -> MambaOutcome:
        md = self._dev[MAMBA]
        assert md is not None
        c = self.counters
        if node.parent is None or node.dev_mamba is not None:
            if donate:
                md.free([slot])
            if node.parent is not None:
                c.mamba_duplicates += 1
                return "duplicate"
            return "none"
        if donate:
            node.dev_mamba = slot
            self._lru_dev[MAMBA].push(node)
            return "donated"
        got = self._alloc_dev(MAMBA, 1)
        if got is None:
            c.mamba_skipped += 1
            return "skipped"
        self.pools.copy(CopyOp(Mamba, _DEVICE, _DEVICE, [slot], got))
        node.dev_mamba = got[0]
        self._lru_dev[MAMBA].push(node)
        return "copied"

    # --------------------------------------------------------------------- splits

    def _on_split(self, upper: Node, lower: Node) -> None:
        """Carry every pin of `lower` to the new `upper` fragment, with its scope and heap entries."""
        self.counters.splits += 1
        ledger = self.ledger
        scopes = self._scopes
        p = lower.pins_full
        if p is not None and p:
            up = _pins_full(upper)
            for lease in p:
                ledger.pin(lease, up)
                scope = scopes.get(lease.id)
                if scope is not None:
                    scope.append(upper)
        s = lower.pins_swa
        if s is not None and s:
            us = _pins_swa(upper)
            for sl in s:
                ledger.pin(sl, us)
                scope = scopes.get(sl.id)
                if scope is not None:
                    scope.append(upper)
        m = lower.pins_mamba
        if m is not None and m:
            um = _pins_mamba(upper)
            for ml in m:
                ledger.pin(ml, um)
                scope = scopes.get(ml.id)
                if scope is not None:
                    scope.append(upper)
        if upper.dev_full is not None:
            self._lru_dev[FULL].push(upper)
            if upper.host_full is not None:
                self._dups[upper.id] = upper
        if upper.dev_swa is not None:
            self._lru_dev[SWA_IDX].push(upper)
        if upper.host_swa is not None:
            self._lru_host[SWA_IDX].push(upper)

    # ------------------------------------------------------------------ load-back

    def load_back(self, anchor: Node) -> LoadBackTicket | None:
        """Start moving what `anchor` needs from host to device; None if nothing can/need move.

        One lease per component that moves data is taken *before* device
        pages are allocated, so the eviction that allocation may run never
        touches what this load-back reads nor the anchor's path.
        """
        self._check_node(anchor)
        c = self.counters
        if anchor.parent is None:
            c.load_backs_noop += 1
            return None
        chain, top = evicted_chain(anchor)
        win: list[Node] = []
        swa_move: list[Node] = []
        if self._swa:
            win = window_nodes(anchor, self._window)
            for x in win:
                if x.dev_swa is None:
                    if x.host_swa is None:
                        c.load_backs_refused += 1
                        return None
                    swa_move.append(x)
            swa_move.reverse()
        mamba_move = False
        if self._mamba and anchor.dev_mamba is None:
            if anchor.host_mamba is None:
                c.load_backs_refused += 1
                return None
            mamba_move = True
        if not chain and not swa_move and not mamba_move:
            c.load_backs_noop += 1
            return None
        tid = next(self._ticket_ids)
        self._last_ticket = tid
        owner = f"load_back#{tid}@{anchor.id}"
        ticket = LoadBack(tid, self.ledger.epoch, anchor, owner)
        ledger = self.ledger
        scopes = self._scopes
        if chain:
            scope = chain + [top] if top.parent is not None else list(chain)
            full = ledger.acquire(Full, owner=owner, pins=tuple(_pins_full(x) for x in scope))
            scopes[full.id] = scope
            ticket.full = full
        if swa_move:
            swa = ledger.acquire(SWA, owner=owner, pins=tuple(_pins_swa(x) for x in win))
            scopes[swa.id] = win
            ticket.swa = swa
        if mamba_move:
            mamba = ledger.acquire(Mamba, owner=owner, pins=(_pins_mamba(anchor),))
            scopes[mamba.id] = [anchor]
            ticket.mamba = mamba
        copies: list[CopyOp] = []
        full_dst: list[int] | None = []
        swa_dst: list[int] | None = []
        mamba_dst: list[int] | None = []
        if chain:
            src: list[int] = []
            for x in chain:
                hf = x.host_full
                assert hf is not None, x.id
                src += hf
            full_dst = self._alloc_dev(FULL, len(src))
            if full_dst is not None:
                copies.append(CopyOp(Full, _HOST, _DEVICE, src, full_dst))
                ticket.full_start = chain[0].start
                ticket.full_dst = full_dst
                ticket.full_tokens = anchor.end - chain[0].start
        if swa_move and full_dst is not None:
            ssrc: list[int] = []
            for x in swa_move:
                hs = x.host_swa
                assert hs is not None, x.id
                ssrc += hs
            swa_dst = self._alloc_dev(SWA_IDX, len(ssrc))
            if swa_dst is not None:
                copies.append(CopyOp(SWA, _HOST, _DEVICE, ssrc, swa_dst))
                segs: list[Segment] = []
                k = 0
                for x in swa_move:
                    w = len(x.key) // self._ps
                    segs.append((x.start, swa_dst[k : k + w]))
                    k += w
                ticket.swa_segments = segs
                ticket.swa_tokens = len(ssrc) * self._ps
        if mamba_move and full_dst is not None and swa_dst is not None:
            mamba_dst = self._alloc_dev(MAMBA, 1)
            if mamba_dst is not None:
                hm = anchor.host_mamba
                assert hm is not None
                copies.append(CopyOp(Mamba, _HOST, _DEVICE, [hm], mamba_dst))
                ticket.mamba_dst = mamba_dst[0]
                ticket.mamba_moved = True
        if full_dst is None or swa_dst is None or mamba_dst is None:
            if full_dst:
                self._fd.free(full_dst)
            if swa_dst:
                sd = self._dev[SWA_IDX]
                assert sd is not None
                sd.free(swa_dst)
            ticket.release_leases(scopes)
            ticket.status = TicketStatus.FAILED
            c.load_backs_refused += 1
            return None
        job = TransferJob(tid, ticket.generation, JobKind.LOAD_BACK, tuple(copies))
        ticket.job = job
        self._tickets[tid] = ticket
        c.load_backs += 1
        c.load_back_full_tokens += ticket.full_tokens
        c.load_back_swa_tokens += ticket.swa_tokens
        c.load_back_mamba += mamba_move
        self.engine.submit(job)
        return LoadBackTicket(ticket)

    def _settle_load_back(self, t: LoadBack, ok: bool) -> None:
        ps = self._ps
        fd = self._fd
        anchor = t.node
        if ok:
            clk = self._clock
            if t.full_dst:
                fs = t.full_start
                dst = t.full_dst
                lru = self._lru_dev[FULL]
                dups = self._dups
                x: Node | None = anchor
                while x is not None and x.start >= fs and x.parent is not None:
                    pages = dst[(x.start - fs) // ps : (x.end - fs) // ps]
                    if x.dev_full is None:
                        x.dev_full = pages
                        x.parent.dev_children += 1
                        x.last_access = clk
                        lru.push(x)
                        if x.host_full is not None:
                            dups[x.id] = x
                    else:
                        fd.free(pages)
                        self.counters.load_back_duplicate_pages += len(pages)
                    x = x.parent
            if t.swa_segments:
                self._publish_segments(anchor, t.swa_segments, SWA_IDX, device=True)
            if t.mamba_dst is not None:
                if anchor.dev_mamba is None:
                    anchor.dev_mamba = t.mamba_dst
                    self._lru_dev[MAMBA].push(anchor)
                else:
                    md = self._dev[MAMBA]
                    assert md is not None
                    md.free([t.mamba_dst])
            t.status = TicketStatus.DONE
        else:
            if t.full_dst:
                fd.free(t.full_dst)
            if t.swa_segments:
                sd = self._dev[SWA_IDX]
                assert sd is not None
                for _, pages in t.swa_segments:
                    sd.free(pages)
            if t.mamba_dst is not None:
                md = self._dev[MAMBA]
                assert md is not None
                md.free([t.mamba_dst])
            t.status = TicketStatus.FAILED
            self.counters.load_backs_failed += 1
        t.release_leases(self._scopes)

    def _publish_segments(
        self, bottom: Node, segments: list[Segment], i: int, *, device: bool
    ) -> None:
        """Give each node inside a segment its slice of the segment's pages (or free duplicates)."""
        ps = self._ps
        lo = min(s for s, _ in segments)
        alloc = self._dev[i] if device else self._host[i]
        assert alloc is not None
        lru = self._lru_dev[i] if device else self._lru_host[i]
        x: Node | None = bottom
        while x is not None and x.parent is not None and x.end > lo:
            for s, pages in segments:
                e = s + len(pages) * ps
                if s <= x.start and x.end <= e:
                    part = pages[(x.start - s) // ps : (x.end - s) // ps]
                    if device:
                        if x.dev_swa is None:
                            x.dev_swa = part
                            lru.push(x)
                        else:
                            alloc.free(part)
                    elif x.host_swa is None:
                        x.host_swa = part
                        lru.push(x)
                    else:
                        alloc.free(part)
                    break
            x = x.parent

    # --------------------------------------------------------------------- backup

    def backup(self, node: Node) -> int | None:
        """Start backing `node` up to host (write_through: with its unbacked ancestors).

        Returns the backup ticket id, or None when there is nothing to back up
        (already backed, already in flight) or no host room.
        """
        self._check_node(node)
        if node.parent is None or node.dev_full is None:
            return None
        if self._wb:
            chain = [node] if node.host_full is None and node.backing == 0 else []
        else:
            chain = self._unbacked_chain(node)
        return self._backup_nodes(chain)

    def _unbacked_chain(self, node: Node) -> list[Node]:
        chain: list[Node] = []
        x = node
        while (
            x.parent is not None
            and x.host_full is None
            and x.backing == 0
            and x.dev_full is not None
        ):
            chain.append(x)
            x = x.parent
        chain.reverse()
        return chain

    def _backup_nodes(self, chain: list[Node]) -> int | None:
        """Back up a contiguous root-first chain (every node device-resident, none backed)."""
        if not chain:
            return None
        c = self.counters
        src: list[int] = []
        for x in chain:
            df = x.dev_full
            assert df is not None
            src += df
        host = self._alloc_host(FULL, len(src))
        if host is None:
            c.backups_refused += 1
            return None
        copies = [CopyOp(Full, _DEVICE, _HOST, src, host)]
        swa_nodes: list[Node] = []
        segs: list[Segment] = []
        if self._swa:
            swa_nodes = [x for x in chain if x.dev_swa is not None and x.host_swa is None]
            if swa_nodes:
                ssrc: list[int] = []
                for x in swa_nodes:
                    ds = x.dev_swa
                    assert ds is not None
                    ssrc += ds
                sdst = self._alloc_host(SWA_IDX, len(ssrc))
                if sdst is None:
                    swa_nodes = []
                else:
                    copies.append(CopyOp(SWA, _DEVICE, _HOST, ssrc, sdst))
                    k = 0
                    for x in swa_nodes:
                        w = len(x.key) // self._ps
                        segs.append((x.start, sdst[k : k + w]))
                        k += w
        mamba_nodes: list[tuple[Node, int]] = []
        if self._mamba:
            want = [x for x in chain if x.dev_mamba is not None and x.host_mamba is None]
            if want:
                mdst = self._alloc_host(MAMBA, len(want))
                if mdst is not None:
                    msrc: list[int] = []
                    for x, slot in zip(want, mdst):
                        dm = x.dev_mamba
                        assert dm is not None
                        msrc.append(dm)
                        mamba_nodes.append((x, slot))
                    copies.append(CopyOp(Mamba, _DEVICE, _HOST, msrc, mdst))
        tid = next(self._ticket_ids)
        self._last_ticket = tid
        owner = f"backup#{tid}@{chain[-1].id}"
        t = BackupTicket(tid, self.ledger.epoch, chain[-1], owner)
        ledger = self.ledger
        scopes = self._scopes
        full = ledger.acquire(Full, owner=owner, pins=tuple(_pins_full(x) for x in chain))
        scopes[full.id] = list(chain)
        t.full = full
        if swa_nodes:
            swa = ledger.acquire(SWA, owner=owner, pins=tuple(_pins_swa(x) for x in swa_nodes))
            scopes[swa.id] = swa_nodes
            t.swa = swa
        if mamba_nodes:
            mnodes = [x for x, _ in mamba_nodes]
            mamba = ledger.acquire(Mamba, owner=owner, pins=tuple(_pins_mamba(x) for x in mnodes))
            scopes[mamba.id] = mnodes
            t.mamba = mamba
        for x in chain:
            x.backing += 1
        t.full_start = chain[0].start
        t.full_dst = host
        t.swa_segments = segs
        t.mamba_slots = mamba_nodes
        job = TransferJob(tid, t.generation, JobKind.BACKUP, tuple(copies))
        t.job = job
        self._tickets[tid] = t
        c.backups += 1
        c.backup_pages += len(src)
        self.engine.submit(job)
        return tid

    def _settle_backup(self, t: BackupTicket, ok: bool) -> None:
        ps = self._ps
        fh = self._fh
        fs = t.full_start
        dst = t.full_dst
        dups = self._dups
        x: Node | None = t.node
        while x is not None and x.parent is not None and x.start >= fs:
            x.backing -= 1
            if ok:
                pages = dst[(x.start - fs) // ps : (x.end - fs) // ps]
                if x.host_full is None:
                    x.host_full = pages
                    if x.dev_full is not None:
                        dups[x.id] = x
                    elif not x.children:
                        self._lru_host[FULL].push(x)
                else:
                    fh.free(pages)
            x = x.parent
        if ok:
            if t.swa_segments:
                self._publish_segments(t.node, t.swa_segments, SWA_IDX, device=False)
            if t.mamba_slots:
                mh = self._host[MAMBA]
                assert mh is not None
                lru = self._lru_host[MAMBA]
                for node, slot in t.mamba_slots:
                    if node.host_mamba is None:
                        node.host_mamba = slot
                        lru.push(node)
                    else:
                        mh.free([slot])
            t.status = TicketStatus.DONE
        else:
            fh.free(dst)
            if t.swa_segments:
                sh = self._host[SWA_IDX]
                assert sh is not None
                for _, pages in t.swa_segments:
                    sh.free(pages)
            if t.mamba_slots:
                mh = self._host[MAMBA]
                assert mh is not None
                mh.free([s for _, s in t.mamba_slots])
            t.status = TicketStatus.FAILED
            self.counters.backups_failed += 1
        t.close(self._scopes)

    # ------------------------------------------------------------------ acks

    def poll(self) -> list[Completion]:
        """Collect the engine's acks (and any posted to `inbox`) and settle their tickets."""
        out = self._completions
        if out:
            self._completions = []
        else:
            out = []
        for ack in self.engine.poll():
            done = self._on_ack(ack)
            if done is not None:
                out.append(done)
        if len(self.inbox):
            for ack in self.inbox.drain():
                done = self._on_ack(ack)
                if done is not None:
                    out.append(done)
        if self._completions:
            out.extend(self._completions)
            self._completions = []
        return out

    def deliver(self, ack: Ack) -> Completion | None:
        """Process one ack now (REPL, tests, engines that hand acks over directly)."""
        return self._on_ack(ack)

    def in_flight(self) -> int:
        """Tickets of the current epoch waiting for their ack."""
        return len(self._tickets)

    def _on_ack(self, ack: Ack) -> Completion | None:
        c = self.counters
        tid = ack.ticket
        gen = ack.generation
        t = self._tickets.get(tid)
        if t is not None and t.generation == gen:
            del self._tickets[tid]
            c.acks += 1
            if not ack.ok:
                c.failed_acks += 1
                self.ledger.record(
                    EventKind.FAILED_TRANSFER, ticket=tid, nodes=(t.node.id,),
                    detail=ack.detail or "copy failed",
                )
            if type(t) is LoadBack:
                self._settle_load_back(t, ack.ok)
                return Completion(tid, gen, JobKind.LOAD_BACK, t.status, t.node.id)
            assert isinstance(t, BackupTicket)
            self._settle_backup(t, ack.ok)
            return Completion(tid, gen, JobKind.BACKUP, t.status, t.node.id)
        q = self._quarantine.get(tid)
        if q is not None and q.generation == gen:
            del self._quarantine[tid]
            for op in q.copies:
                self.pools.pool(op.component, op.src_tier).alloc.release_quarantine(op.src)
                self.pools.pool(op.component, op.dst_tier).alloc.release_quarantine(op.dst)
            qt = q.ticket
            kind = JobKind.LOAD_BACK if type(qt) is LoadBack else JobKind.BACKUP
            if type(qt) is BackupTicket:
                qt.close(self._scopes)
            else:
                qt.release_leases(self._scopes)
            c.stale_acks += 1
            self.ledger.record(
                EventKind.STALE_ACK, ticket=tid,
                detail=f"generation {gen} < epoch {self.ledger.epoch}: quarantine released",
            )
            return Completion(tid, gen, kind, TicketStatus.STALE, None)
        if tid < 1 or tid > self._last_ticket or gen < 0 or gen > self.ledger.epoch:
            raise UnknownTicketError(
                tid, gen,
                f"was never issued by cache {self.config.ledger_name!r} "
                f"(last ticket {self._last_ticket}, epoch {self.ledger.epoch})",
            )
        if gen < self.ledger.epoch:
            c.stale_acks += 1
            detail = f"stale: generation {gen} < epoch {self.ledger.epoch}"
        else:
            c.duplicate_acks += 1
            detail = "duplicate: ticket already settled"
        self.ledger.record(EventKind.STALE_ACK, ticket=tid, detail=detail)
        return None

    def _sync_backups(self, tickets: Collection[int]) -> None:
        """Write-back eviction waits for its backups: complete them now and settle the acks."""
        self.engine.flush(tickets)
        done = self.poll()
        self._completions.extend(done)

    # ------------------------------------------------------------------ eviction

    def evict_device(self, component: type, n: int) -> int:
        """Free at least `n` device pages (Full/SWA) or slots (Mamba) if unpinned data allows."""
        return self._evict_dev(self._cidx(component), n)

    def evict_host(self, component: type, n: int) -> int:
        """Free at least `n` host pages/slots of `component` if unpinned data allows."""
        return self._evict_host(self._cidx(component), n)

    def _evict_dev(self, i: int, n: int) -> int:
        if n <= 0:
            return 0
        if i == FULL:
            return self._evict_dev_full(n)
        return self._evict_dev_aux(i, n)

    def _evict_dev_full(self, n: int) -> int:
        freed = 0
        heap = self._lru_dev[FULL]
        c = self.counters
        for _ in range(4):
            blocked: list[Node] = []
            started: list[int] = []
            while freed < n:
                node = heap.pop()
                if node is None:
                    break
                if not node.alive or node.dev_full is None or node.parent is None:
                    continue
                if not is_device_leaf(node):
                    continue
                if node.pinned():
                    blocked.append(node)
                    c.evict_blocked += 1
                    continue
                if node.host_full is None:
                    if self._wb:
                        tid = self._backup_nodes([node])
                        if tid is not None:
                            started.append(tid)
                            blocked.append(node)
                            continue
                    freed += self._drop_subtree(node)
                    continue
                freed += self._demote(node)
            for b in blocked:
                heap.push(b)
            if freed >= n or not started or not self.config.sync_write_back:
                break
            self._sync_backups(started)
        return freed

    def _demote(self, node: Node) -> int:
        """Drop `node`'s device copies (Full cascades to SWA and Mamba); host copies stay."""
        c = self.counters
        pages = node.dev_full
        parent = node.parent
        assert pages is not None and parent is not None
        node.dev_full = None
        parent.dev_children -= 1
        self._fd.free(pages)
        if node.dev_swa is not None:
            self._free_dev_swa(node)
        if node.dev_mamba is not None:
            self._free_dev_mamba(node)
        c.demotions += 1
        c.device_evictions += 1
        c.full_pages_evicted += len(pages)
        if parent.parent is not None and is_device_leaf(parent):
            self._lru_dev[FULL].push(parent)
        if not node.children and node.host_full is not None:
            self._lru_host[FULL].push(node)
        return len(pages)

    def _free_dev_swa(self, node: Node) -> int:
        pages = node.dev_swa
        assert pages is not None
        sd = self._dev[SWA_IDX]
        assert sd is not None
        sd.free(pages)
        node.dev_swa = None
        self.counters.swa_pages_evicted += len(pages)
        if node.host_swa is None:
            self.counters.aux_lost += 1
        return len(pages)

    def _free_dev_mamba(self, node: Node) -> int:
        slot = node.dev_mamba
        assert slot is not None
        md = self._dev[MAMBA]
        assert md is not None
        md.free([slot])
        node.dev_mamba = None
        self.counters.mamba_evicted += 1
        if node.host_mamba is None:
            self.counters.aux_lost += 1
        return 1

    def _drop_subtree(self, node: Node) -> int:
        """Remove `node` and everything below it (data lost); 0 if any of it is pinned."""
        sub = list(self._iter_subtree(node))
        for x in sub:
            if x.pinned() or x.backing:
                self.counters.evict_blocked += 1
                return 0
        freed = 0
        for x in reversed(sub):
            freed += self._free_node(x)
            self._tree.remove_leaf(x)
            self.counters.dropped_nodes += 1
        parent = node.parent
        assert parent is not None
        self._after_child_removed(parent)
        return freed

    def _after_child_removed(self, parent: Node) -> None:
        if parent.parent is None:
            return
        if parent.dev_full is not None:
            if is_device_leaf(parent):
                self._lru_dev[FULL].push(parent)
        elif not parent.children and parent.host_full is not None:
            self._lru_host[FULL].push(parent)

    def _iter_subtree(self, node: Node) -> Iterator[Node]:
        stack = [node]
        while stack:
            x = stack.pop()
            yield x
            stack.extend(x.children.values())

    def _free_node(self, x: Node) -> int:
        """Free every slot a node holds on both tiers; returns Full device pages freed."""
        freed = 0
        if x.dev_full is not None:
            freed = len(x.dev_full)
            self._fd.free(x.dev_full)
            x.dev_full = None
            if x.parent is not None:
                x.parent.dev_children -= 1
        if x.host_full is not None:
            self._fh.free(x.host_full)
            x.host_full = None
        if x.dev_swa is not None or x.host_swa is not None:
            sd, sh = self._dev[SWA_IDX], self._host[SWA_IDX]
            assert sd is not None and sh is not None
            if x.dev_swa is not None:
                sd.free(x.dev_swa)
                x.dev_swa = None
            if x.host_swa is not None:
                sh.free(x.host_swa)
                x.host_swa = None
        if x.dev_mamba is not None or x.host_mamba is not None:
            md, mh = self._dev[MAMBA], self._host[MAMBA]
            assert md is not None and mh is not None
            if x.dev_mamba is not None:
                md.free([x.dev_mamba])
                x.dev_mamba = None
            if x.host_mamba is not None:
                mh.free([x.host_mamba])
                x.host_mamba = None
        return freed

    def _evict_dev_aux(self, i: int, n: int) -> int:
        heap = self._lru_dev[i]
        c = self.counters
        freed = 0
        blocked: list[Node] = []
        while freed < n:
            node = heap.pop()
            if node is None:
                break
            if not node.alive:
                continue
            if i == SWA_IDX:
                if node.dev_swa is None:
                    continue
                if _has_pins(node.pins_swa) or _has_pins(node.pins_mamba):
                    blocked.append(node)
                    c.evict_blocked += 1
                    continue
                freed += self._free_dev_swa(node)
                if node.dev_mamba is not None:
                    self._free_dev_mamba(node)
            else:
                if node.dev_mamba is None:
                    continue
                if _has_pins(node.pins_mamba):
                    blocked.append(node)
                    c.evict_blocked += 1
                    continue
                freed += self._free_dev_mamba(node)
            c.device_evictions += 1
        for b in blocked:
            heap.push(b)
        return freed

    def _evict_host(self, i: int, n: int) -> int:
        if n <= 0:
            return 0
        if i != FULL:
            return self._evict_host_aux(i, n)
        freed = self.reclaim_host_duplicates(n) if self._wb else 0
        heap = self._lru_host[FULL]
        c = self.counters
        blocked: list[Node] = []
        while freed < n:
            node = heap.pop()
            if node is None:
                break
            if (
                not node.alive
                or node.dev_full is not None
                or node.host_full is None
                or node.children
            ):
                continue
            if node.pinned() or node.backing:
                blocked.append(node)
                c.evict_blocked += 1
                continue
            freed += len(node.host_full)
            c.host_pages_evicted += len(node.host_full)
            c.host_evictions += 1
            self._free_node(node)
            self._tree.remove_leaf(node)
            parent = node.parent
            assert parent is not None
            self._after_child_removed(parent)
        for b in blocked:
            heap.push(b)
        return freed

    def _evict_host_aux(self, i: int, n: int) -> int:
        heap = self._lru_host[i]
        c = self.counters
        freed = 0
        blocked: list[Node] = []
        alloc = self._host[i]
        assert alloc is not None
        while freed < n:
            node = heap.pop()
            if node is None:
                break
            if not node.alive:
                continue
            if i == SWA_IDX:
                hs = node.host_swa
                if hs is None:
                    continue
                if _has_pins(node.pins_swa):
                    blocked.append(node)
                    c.evict_blocked += 1
                    continue
                alloc.free(hs)
                node.host_swa = None
                freed += len(hs)
                if node.dev_swa is None:
                    c.aux_lost += 1
            else:
                hm = node.host_mamba
                if hm is None:
                    continue
                if _has_pins(node.pins_mamba):
                    blocked.append(node)
                    c.evict_blocked += 1
                    continue
                alloc.free([hm])
                node.host_mamba = None
                freed += 1
                if node.dev_mamba is None:
                    c.aux_lost += 1
            c.host_evictions += 1
        for b in blocked:
            heap.push(b)
        return freed

    def reclaim_host_duplicates(self, n: int) -> int:
        """Free up to `n`+ Full host pages whose data is also on device.

        Consults `PinSet[Full]` only: a Full lease (a load-back or backup
        reading or writing that host copy) blocks; SWA and Mamba leases do
        not. Aux host copies are kept (they may be the only copy). A first
        pass spares device leaves (about to be demoted, needing the copy).
        """
        freed = 0
        dups = self._dups
        fh = self._fh
        c = self.counters
        for spare_leaves in (True, False):
            for nid, node in list(dups.items()):
                if freed >= n:
                    return freed
                hf = node.host_full
                if not node.alive or node.dev_full is None or hf is None or node.parent is None:
                    dups.pop(nid, None)
                    continue
                p = node.pins_full
                if p is not None and p:
                    if not spare_leaves:
                        c.reclaim_blocked += 1
                        self.ledger.record(
                            EventKind.RECLAIM_BLOCKED, nodes=(node.id,), component="Full",
                            detail=f"Full host copy pinned by leases {p.ids()}",
                        )
                    continue
                if node.backing:
                    continue
                if spare_leaves and is_device_leaf(node):
                    continue
                fh.free(hf)
                node.host_full = None
                del dups[nid]
                freed += len(hf)
                c.reclaimed_pages += len(hf)
        return freed

    # ---------------------------------------------------------------------- reset

    def reset(self) -> int:
        """Drop every cached prefix and start a new epoch.

        Every lease is revoked (they leave all pin sets). Slots an unfinished
        copy may read or write are quarantined until that copy's (now stale)
        ack; every other slot the tree or a ticket held is freed. Request-owned
        slots are left to their requests. Returns the new epoch.
        """
        epoch = self.ledger.advance_epoch()
        quarantined = 0
        for tid, t in self._tickets.items():
            job = t.job
            assert job is not None
            for op in job.copies:
                self.pools.pool(op.component, op.src_tier).alloc.quarantine(op.src)
                self.pools.pool(op.component, op.dst_tier).alloc.quarantine(op.dst)
                self.pools.pool(op.component, op.dst_tier).alloc.free(op.dst)
                quarantined += len(op.src) + len(op.dst)
            t.status = TicketStatus.STALE
            self._quarantine[tid] = QuarantineRecord(t, t.generation, job.copies)
        self._tickets.clear()
        old = self._tree
        for node in old:
            if node.parent is not None:
                self._free_node(node)
        old.kill()
        self._scopes.clear()
        self._new_tree()
        self.counters.resets += 1
        self.counters.quarantined_slots += quarantined
        return epoch

    # ------------------------------------------------------------------- checks

    def sanity_check(self) -> SanityReport:
        """Recompute every derived count and pin set from the live leases; list violations.

        Also forgets the recorded scopes of leases that leaked (their owner died
        without releasing them); the ledger reports those leaks.
        """
        from unicache.sanity import sanity_check

        live = {lease.id for lease in self.ledger.live()}
        for lease_id in [k for k in self._scopes if k not in live]:
            del self._scopes[lease_id]
        return sanity_check(self)

    def check(self) -> None:
        """`sanity_check()`, raising `SanityError` when anything is off."""
        report = self.sanity_check()
        if not report.ok:
            raise SanityError(report)

    # ------------------------------------------------------------ introspection

    def nodes(self) -> Iterator[Node]:
        """Every live node, pre-order, root first."""
        return iter(self._tree)

    def node(self, node_id: int) -> Node:
        for x in self._tree:
            if x.id == node_id:
                return x
        raise UnknownNodeError(node_id, f"is not a live node of cache {self.config.ledger_name!r}")

    @property
    def node_count(self) -> int:
        return self._tree.size

    def live_tickets(self) -> list[Ticket]:
        """Tickets of the current epoch waiting for their ack, oldest first."""
        return list(self._tickets.values())

    def quarantine_records(self) -> list[QuarantineRecord]:
        return list(self._quarantine.values())

    def lease_scope(self, lease_id: int) -> list[Node] | None:
        """The nodes a live lease of this cache pins (its recorded scope)."""
        scope = self._scopes.get(lease_id)
        return list(scope) if scope is not None else None

    def path_pages(self, node: Node, component: type = Full, tier: Tier = _DEVICE) -> list[int]:
        """The pages (Full/SWA) of the whole path ending at `node`, root first, on one tier.

        Raises `InvalidArgumentError` if a node of the path lacks them (e.g. a
        host-only node asked for device pages, or an SWA tombstone).
        """
        self._check_node(node)
        i = self._cidx(component)
        if i == MAMBA:
            raise InvalidArgumentError("path_pages: Mamba has one state per node, not pages")
        out: list[int] = []
        for x in node.path():
            if i == FULL:
                pages = x.dev_full if tier is _DEVICE else x.host_full
            else:
                pages = x.dev_swa if tier is _DEVICE else x.host_swa
            if pages is None:
                raise InvalidArgumentError(
                    f"path_pages: node {x.id} holds no {component.__name__} pages on {tier.value}"
                )
            out += pages
        return out

    def lent_slots(self, component: Component) -> set[int]:
        """Device slots currently owned by requests (allocated, not yet donated or freed)."""
        return set(self._lent[self._cidx(component)])

    def node_info(self, node: Node) -> NodeInfo:
        """Residency and pins of one node, per component."""
        return node_info(self, node)

    def tickets(self) -> list[TicketInfo]:
        """Snapshots of the live tickets."""
        return [ticket_info(t) for t in self._tickets.values()]

    def quarantine(self) -> list[QuarantineInfo]:
        """Snapshots of the tickets whose slots wait for a stale ack."""
        return [quarantine_info(q) for q in self._quarantine.values()]

    def lease_scopes(self) -> dict[int, tuple[str, str, list[int]]]:
        """Live lease id -> (component, owner, ids of the nodes it pins)."""
        out: dict[int, tuple[str, str, list[int]]] = {}
        for lease in self.ledger.live():
            scope = self._scopes.get(lease.id, [])
            out[lease.id] = (lease.component.__name__, str(lease.owner), [x.id for x in scope])
        return out

    def dump_state(self) -> dict[str, object]:
        """A JSON-friendly snapshot: config, tree with pins, tickets, pools, counters, events."""
        return dump_state(self)
