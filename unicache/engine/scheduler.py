"""The scheduler loop: drives a cache the way a serving engine does, many requests in flight.

Per request: admit -> match -> load back when the host hit is worth it -> wait
for the ack -> match again, lock -> check every reused byte against the
reference model -> compute the missing prompt tokens -> cache the prompt (as an
unfinished request; the lock moves to the new node) -> decode the output tokens
over several steps -> insert -> unlock.

One :meth:`Scheduler.step` is one engine iteration: advance the transfer
clock, poll acks, collect settled load-backs, admit what fits, decode. A
request that cannot get device memory waits at the head of the queue (the
order of the trace is kept); if nothing at all can make progress the loop
raises :class:`SchedulerStuckError` instead of spinning.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass, field, fields
from typing import Protocol, runtime_checkable

import torch

from leases import Borrowed

from unicache.cache import UniCache
from unicache.components.markers import SWA, Full, Mamba
from unicache.engine.config import EngineConfig
from unicache.engine.errors import EngineError, InvariantError, SchedulerStuckError
from unicache.engine.oplog import OpLog
from unicache.engine.oracle import DataOracle
from unicache.engine.pinstats import PinTracker
from unicache.engine.reference import PrefixHashes, ReferenceModel
from unicache.engine.timeline import Timeline
from unicache.results import MatchResult, TicketStatus
from unicache.tickets import LoadBackTicket, LockReceipt
from unicache.traces.request import TraceRequest
from unicache.tree.node import Node


@runtime_checkable
class Ticking(Protocol):
    """A transfer engine with a step clock (the simulated engine)."""

    def tick(self) -> None: ...


class Phase(enum.Enum):
    WAITING = "waiting"
    LOADING = "loading"
    READY = "ready"
    RUNNING = "running"
    DONE = "done"
    ABORTED = "aborted"


@dataclass(slots=True)
class Request:
    """A request's progress through the loop and every resource it owns."""

    src: TraceRequest
    tokens: tuple[int, ...]
    h: PrefixHashes | None
    phase: Phase = Phase.WAITING
    matched: bool = False
    first_device_len: int = 0
    load_backs: int = 0
    loaded_end: int = 0
    prefix: int = 0
    cached_end: int = 0
    ticket: LoadBackTicket | None = None  # lease: ignore[lease-owner]
    ticket_leases: tuple[int, ...] = ()
    receipt: LockReceipt | None = None  # lease: ignore[lease-owner]
    full_pages: list[int] = field(default_factory=list)
    swa_pages: list[int] = field(default_factory=list)
    mamba_slot: int | None = None
    decoded: int = 0

    @property
    def rid(self) -> int:
        return self.src.rid

    @property
    def prompt_len(self) -> int:
        return len(self.tokens)

    @property
    def total_len(self) -> int:
        return len(self.tokens) + self.src.output_tokens


@dataclass(slots=True)
class EngineStats:
    """What the loop itself counts (the cache and ledger count the rest)."""

    steps: int = 0
    admitted: int = 0
    finished: int = 0
    aborted: int = 0
    device_hit_tokens: int = 0
    host_hit_tokens: int = 0
    computed_tokens: int = 0
    decoded_tokens: int = 0
    load_backs_started: int = 0
    load_backs_ok: int = 0
    load_backs_failed: int = 0
    load_backs_stale: int = 0
    start_retries: int = 0
    prompt_inserts: int = 0
    branch_states: int = 0
    final_inserts: int = 0
    verified_tokens: int = 0
    verified_states: int = 0
    tree_checks: int = 0
    sanity_checks: int = 0

    def to_json(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


class Scheduler:
    """Runs a list of requests through a cache (see the module docstring)."""

    def __init__(self, cache: UniCache, requests: list[TraceRequest], *, model: ReferenceModel,
                 config: EngineConfig | None = None, timeline: Timeline | None = None) -> None:
        self.cache = cache
        self.model = model
        self.config = config or EngineConfig()
        self.oracle = DataOracle(cache, model)
        self.pins = PinTracker()
        self.timeline = timeline
        self.stats = EngineStats()
        self.step_no = 0
        self._ps = cache.config.page_size
        chunk = self.config.cache_chunk or self._ps
        self._chunk = chunk * self._ps // math.gcd(chunk, self._ps)
        self._swa = cache.config.swa_window is not None
        self._mamba = cache.config.mamba
        self._data = self.config.data
        self._verify = self._data and self.config.verify
        self._ticking = cache.engine if isinstance(cache.engine, Ticking) else None
        self._pending: deque[TraceRequest] = deque(requests)
        self.total = len(requests)
        self.waiting: deque[Request] = deque()
        self.ready: deque[Request] = deque()
        self.loading: list[Request] = []
        self.running: list[Request] = []
        self.current: Request | None = None
        self.oplog: OpLog | None = None

    @property
    def done(self) -> bool:
        return not (self._pending or self.waiting or self.ready or self.loading or self.running)

    @property
    def active(self) -> int:
        """Requests holding a place: loading back, settled and about to start, or running."""
        return len(self.loading) + len(self.ready) + len(self.running)

    def in_flight_requests(self) -> list[Request]:
        """Every request admitted and not finished (for dumps and the simulator)."""
        return [*self.ready, *self.waiting, *self.loading, *self.running]

    def step(self) -> None:
        """One engine iteration."""
        self.step_no += 1
        self.stats.steps += 1
        cache = self.cache
        cache.ledger.step = self.step_no
        if self._ticking is not None:
            self._ticking.tick()
        cache.poll()
        self._collect_load_backs()
        self._admit()
        self._decode()
        self.current = None
        cfg = self.config
        if cfg.check_every and self.step_no % cfg.check_every == 0:
            self.check_cache()
        if self._data and cfg.tree_check_every and self.step_no % cfg.tree_check_every == 0:
            self.check_tree()
        if self.timeline is not None:
            self.timeline.sample(self.step_no, self.stats.finished, cache, len(self.loading))

    def check_cache(self) -> None:
        """The cache's sanity check plus the engine's ownership invariants."""
        self.stats.sanity_checks += 1
        self.cache.check()
        self.check_ownership()

    def check_tree(self) -> None:
        """The whole-tree data oracle."""
        self.stats.tree_checks += 1
        self.oracle.verify_tree()

    def check_ownership(self) -> None:
        """Every live lease is owned by a ticket or receipt someone holds; request slots match the cache's."""
        cache = self.cache
        if cache.ledger.leaked:
            raise InvariantError(self.step_no, f"{cache.ledger.leaked} lease(s) leaked: {cache.ledger.leaks()}")
        owned: set[int] = set()
        for t in cache.live_tickets():
            owned.update(t.lease_ids().values())
        for q in cache.quarantine_records():
            owned.update(q.ticket.lease_ids().values())
        lent_full: set[int] = set()
        lent_swa: set[int] = set()
        lent_mamba: set[int] = set()
        for req in self.in_flight_requests():
            if req.receipt is not None:
                owned.update(req.receipt.lease_ids())
            if req.ticket is not None:
                owned.update(req.ticket.lease_ids().values())
            lent_full.update(req.full_pages)
            lent_swa.update(req.swa_pages)
            if req.mamba_slot is not None:
                lent_mamba.add(req.mamba_slot)
        live = {lease.id for lease in cache.ledger.live()}
        stray = sorted(live - owned)
        if stray:
            raise InvariantError(self.step_no, f"live leases {stray} are owned by no ticket or receipt")
        for component, mine in ((Full, lent_full), (SWA, lent_swa), (Mamba, lent_mamba)):
            if component not in cache.config.components:
                continue
            theirs = cache.lent_slots(component)
            if theirs != mine:
                raise InvariantError(
                    self.step_no, f"{component.__name__} request-owned slots disagree: cache lends "
                    f"{sorted(theirs - mine)[:8]} not held by any request, requests hold "
                    f"{sorted(mine - theirs)[:8]} the cache does not lend")

    def _new_request(self, src: TraceRequest) -> Request:
        h = self.model.hashes(src.token_tensor()) if self._data else None
        return Request(src, tuple(src.tokens), h)

    def _collect_load_backs(self) -> None:
        still: list[Request] = []
        for req in self.loading:
            t = req.ticket
            assert t is not None
            if t.status is TicketStatus.IN_FLIGHT:
                still.append(req)
                continue
            req.ticket = None
            self.pins.load_back_leases.difference_update(req.ticket_leases)
            req.ticket_leases = ()
            res = t.result()
            if res.ok:
                self.stats.load_backs_ok += 1
                req.loaded_end = max(req.loaded_end, res.anchor.end)
            elif res.status is TicketStatus.STALE:
                self.stats.load_backs_stale += 1
            else:
                self.stats.load_backs_failed += 1
            req.phase = Phase.READY
            self.ready.append(req)
        self.loading = still

    def _admit(self) -> None:
        """Start settled load-backs' requests first (in settle order), then new ones in trace order."""
        max_running = self.config.max_running
        while True:
            if self.ready:
                queue = self.ready
            else:
                if not self.waiting:
                    if not self._pending:
                        return
                    self.waiting.append(self._new_request(self._pending.popleft()))
                    self.stats.admitted += 1
                if self.active >= max_running:
                    return
                queue = self.waiting
            req = queue[0]
            self.current = req
            if not self._begin(req):
                self.stats.start_retries += 1
                if not self.loading and not self.running and self.cache.in_flight() == 0:
                    raise SchedulerStuckError(
                        req.rid, self.step_no,
                        f"needs {req.total_len - req.prefix} tokens of device memory "
                        f"(device holds {self.cache.config.device_tokens})")
                return
            queue.popleft()

    def _begin(self, req: Request) -> bool:
        """Match and either start a load-back or start computing; False if memory is short."""
        cache = self.cache
        log = self.oplog
        if log is not None:
            log.add("match", req.tokens)
        m = cache.match_prefix(req.tokens)
        if not req.matched:
            req.matched = True
            req.first_device_len = m.device_len
        cfg = self.config
        if cfg.load_back and m.worth_load_back and req.load_backs < cfg.max_load_backs:
            t = cache.load_back(m.anchor)
            if t is not None:
                if log is not None:
                    log.add("load_back", OpLog.path_tokens(m.anchor), t.id)
                req.load_backs += 1
                self.stats.load_backs_started += 1
                ids = tuple(t.lease_ids().values())
                req.ticket_leases = ids
                self.pins.load_back_leases.update(ids)
                for lease_id in ids:
                    scope = cache.lease_scope(lease_id)
                    if scope:
                        self.pins.observe(scope)
                assert req.ticket is None, "a request holds at most one load-back ticket"
                req.ticket = t
                req.phase = Phase.LOADING
                self.loading.append(req)
                return True
        return self._start(req, m)

    def _lock(self, node: Node) -> LockReceipt:
        receipt = self.cache.lock(node)
        if self.oplog is not None:
            self.oplog.add("lock", OpLog.path_tokens(node), receipt.id)
        ids = receipt.lease_ids()
        self.pins.lock_leases.update(ids)
        for lease_id in ids:
            scope = self.cache.lease_scope(lease_id)
            if scope:
                self.pins.observe(scope)
        return receipt

    def _unlock(self, receipt: LockReceipt) -> None:
        if self.oplog is not None:
            self.oplog.add("unlock", receipt.id)
        self.pins.lock_leases.difference_update(receipt.lease_ids())
        self.cache.unlock(receipt)

    def _start(self, req: Request, m: MatchResult) -> bool:
        """Lock the device prefix, check it, take memory, prefill; False (nothing held) if memory is short."""
        receipt = self._lock(m.device_node)
        try:
            slots = self._reserve(req, m, receipt)
        except BaseException:
            self._unlock(receipt)
            raise
        if slots is None:
            self._unlock(receipt)
            return False
        full, swa, slot = slots
        prefix = m.device_len
        host_hit = max(0, min(prefix, req.loaded_end) - req.first_device_len)
        self.stats.device_hit_tokens += prefix - host_hit
        self.stats.host_hit_tokens += host_hit
        self.stats.computed_tokens += req.prompt_len - prefix
        req.prefix = req.cached_end = prefix
        assert req.receipt is None, "a request holds at most one lock"
        req.receipt = receipt
        req.full_pages = full
        req.swa_pages = swa
        req.mamba_slot = slot
        req.phase = Phase.RUNNING
        self.running.append(req)
        self._prefill(req)
        return True

    def _reserve(self, req: Request, m: MatchResult,
                 receipt: Borrowed[LockReceipt]) -> tuple[list[int], list[int], int | None] | None:
        """Check the locked prefix and allocate the request's pages and state slot (None: not now)."""
        cache = self.cache
        prefix = m.device_len
        if receipt.length != prefix:
            raise EngineError(f"request {req.rid}: lock covers {receipt.length} tokens but match reported "
                              f"{prefix} on device")
        if self._verify:
            assert req.h is not None
            self.oracle.verify_prefix(req.rid, req.h, m.device_node, prefix)
            self.stats.verified_tokens += prefix
            self.stats.verified_states += int(self._mamba and prefix > 0)
        pages = -(-(req.total_len - prefix) // self._ps)
        full = cache.alloc_device(Full, pages)
        if full is None:
            return None
        swa: list[int] = []
        if self._swa:
            got_swa = cache.alloc_device(SWA, pages)
            if got_swa is None:
                cache.free_device(Full, full)
                return None
            swa = got_swa
        slot: int | None = None
        if self._mamba:
            got_slot = cache.alloc_device(Mamba, 1)
            if got_slot is None:
                cache.free_device(Full, full)
                if swa:
                    cache.free_device(SWA, swa)
                return None
            slot = got_slot[0]
        return full, swa, slot

    def _rows(self, rows: torch.Tensor, pages: int) -> torch.Tensor:
        """Pad token rows to whole pages: ``[pages, page_size, width]``."""
        ps = self._ps
        n = rows.shape[0]
        if n < pages * ps:
            rows = torch.cat([rows, rows.new_zeros((pages * ps - n, rows.shape[1]))])
        return rows.reshape(pages, ps, rows.shape[1])

    def _write(self, req: Request, h: PrefixHashes, begin: int, end: int) -> None:
        """Compute and store KV of tokens ``begin..end`` into the request's own pages."""
        if end <= begin:
            return
        ps = self._ps
        first = (begin - req.cached_end) // ps
        last = -(-(end - req.cached_end) // ps)
        lo = req.cached_end + first * ps
        cache = self.cache
        model = self.model
        cache.write_slots(Full, req.full_pages[first:last],
                          self._rows(model.kv(h, lo, end), last - first))
        if self._swa:
            cache.write_slots(SWA, req.swa_pages[first:last],
                              self._rows(model.swa_kv(h, lo, end), last - first))

    def _prefill(self, req: Request) -> None:
        h = req.h
        if h is not None:
            self._write(req, h, req.prefix, req.prompt_len)
            if req.mamba_slot is not None:
                self.cache.write_slots(Mamba, [req.mamba_slot],
                                       self.model.mamba_state(h, req.prompt_len).unsqueeze(0))
        cut = req.prompt_len - req.prompt_len % self._chunk
        if cut > req.prefix:
            self._cache_prompt(req, cut)

    def _cache_prompt(self, req: Request, cut: int) -> None:
        """Insert ``tokens[:cut]`` as an unfinished request would, and move the lock onto it."""
        cache = self.cache
        k = (cut - req.cached_end) // self._ps
        slot: int | None = None
        donate = True
        if self._mamba:
            if cut == req.prompt_len:
                slot, donate = req.mamba_slot, False
            else:
                got = cache.alloc_device(Mamba, 1)
                if got is not None:
                    slot = got[0]
                    if req.h is not None:
                        cache.write_slots(Mamba, got, self.model.mamba_state(req.h, cut).unsqueeze(0))
        if self.oplog is not None:
            self.oplog.add("insert", req.tokens[:cut], req.cached_end)
        res = cache.insert(req.tokens[:cut], req.full_pages[:k], start=req.cached_end,
                           swa_slots=req.swa_pages[:k] if self._swa else None,
                           mamba_slot=slot, mamba_donate=donate)
        self.stats.prompt_inserts += 1
        req.full_pages = req.full_pages[k:]
        if self._swa:
            req.swa_pages = req.swa_pages[k:]
        req.cached_end = cut
        if res.prefix_missing:
            return
        receipt = self._lock(res.node)
        if receipt.length != cut:
            got_len = receipt.length
            self._unlock(receipt)
            raise EngineError(f"request {req.rid}: lock after caching its prompt covers {got_len} "
                              f"tokens, expected {cut}")
        old = req.receipt
        req.receipt = receipt
        if old is not None:
            self._unlock(old)
        if self._mamba and self.config.branch_states:
            self._cache_branch_states(req, res.node)

    def _cache_branch_states(self, req: Request, node: Node) -> None:
        """Give every stateless, chunk-aligned branch point above ``node`` its Mamba state.

        The path is locked (the request's receipt), so attaching a state is a
        pure insert of the prefix with no new pages.
        """
        cache = self.cache
        x = node.parent
        while x is not None and x.parent is not None:
            if (x.dev_mamba is None and x.host_mamba is None and len(x.children) >= 2
                    and x.end % self._chunk == 0):
                got = cache.alloc_device(Mamba, 1)
                if got is None:
                    return
                if req.h is not None:
                    cache.write_slots(Mamba, got, self.model.mamba_state(req.h, x.end).unsqueeze(0))
                if self.oplog is not None:
                    self.oplog.add("insert", req.tokens[:x.end], x.end)
                cache.insert(req.tokens[:x.end], [], start=x.end, swa_slots=[] if self._swa else None,
                             mamba_slot=got[0])
                self.stats.branch_states += 1
            x = x.parent

    def _decode(self) -> None:
        per_step = self.config.decode_per_step
        still: list[Request] = []
        for req in self.running:
            out = req.src.output_tokens
            n = min(per_step, out - req.decoded)
            req.decoded += n
            self.stats.decoded_tokens += n
            if req.decoded >= out:
                self.current = req
                self._finish(req)
            else:
                still.append(req)
        self.running = still

    def _finish(self, req: Request) -> None:
        cache = self.cache
        model = self.model
        ps = self._ps
        h = req.h
        out = req.src.output_tokens
        tokens = req.tokens
        if h is None:
            vocab = self.config.vocab
            tokens += tuple(1 + (req.rid * 7919 + i) % (vocab - 1) for i in range(out))
        else:
            if self._verify:
                self._verify_own(req)
            if out:
                h = model.decode(h, out, self.config.vocab)
                tokens = tuple(h.tokens.tolist())
            self._write(req, h, req.prompt_len, len(tokens))
        total = len(tokens)
        end = total - total % ps
        slot = req.mamba_slot
        req.mamba_slot = None
        if end > req.cached_end:
            k = (end - req.cached_end) // ps
            if slot is not None and h is not None:
                cache.write_slots(Mamba, [slot], model.mamba_state(h, end).unsqueeze(0))
            if self.oplog is not None:
                self.oplog.add("insert", tokens[:end], req.cached_end)
            cache.insert(tokens[:end], req.full_pages[:k], start=req.cached_end,
                         swa_slots=req.swa_pages[:k] if self._swa else None, mamba_slot=slot)
            self.stats.final_inserts += 1
            req.full_pages = req.full_pages[k:]
            if self._swa:
                req.swa_pages = req.swa_pages[k:]
        elif slot is not None:
            cache.free_device(Mamba, [slot])
        self._release(req)
        req.phase = Phase.DONE
        self.stats.finished += 1

    def _release(self, req: Request) -> None:
        """Hand back every slot the request still owns and unlock it."""
        cache = self.cache
        if req.full_pages:
            cache.free_device(Full, req.full_pages)
            req.full_pages = []
        if req.swa_pages:
            cache.free_device(SWA, req.swa_pages)
            req.swa_pages = []
        if req.mamba_slot is not None:
            cache.free_device(Mamba, [req.mamba_slot])
            req.mamba_slot = None
        receipt = req.receipt
        req.receipt = None
        if receipt is not None:
            self._unlock(receipt)

    def _verify_own(self, req: Request) -> None:
        """The request's own pages still hold the prompt KV it wrote at prefill."""
        h = req.h
        assert h is not None
        begin, end = req.cached_end, req.prompt_len
        if end > begin:
            self.oracle.verify_rows(req.rid, Full, req.full_pages, self.model.kv(h, begin, end), begin,
                                    "request-owned Full pages")
            if self._swa:
                self.oracle.verify_rows(req.rid, SWA, req.swa_pages, self.model.swa_kv(h, begin, end),
                                        begin, "request-owned SWA pages")
        if req.mamba_slot is not None:
            self.oracle.verify_state(req.rid, req.mamba_slot, self.model.mamba_state(h, req.prompt_len),
                                     req.prompt_len, "request-owned Mamba slot")

    def abort(self, req: Request) -> None:
        """Drop an admitted request: abandon its load-back or release what it holds."""
        if req.phase is Phase.LOADING:
            t = req.ticket
            req.ticket = None
            assert t is not None
            if self.oplog is not None:
                self.oplog.add("abandon", t.id)
            t.abandon()
            self.pins.load_back_leases.difference_update(req.ticket_leases)
            req.ticket_leases = ()
            self.loading.remove(req)
        elif req.phase is Phase.RUNNING:
            self._release(req)
            self.running.remove(req)
        elif req in self.ready:
            self.ready.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        req.phase = Phase.ABORTED
        self.stats.aborted += 1

    def drain(self, max_steps: int = 10_000) -> None:
        """Step (no new work) until every transfer has been acked, stale ones of old epochs included."""
        cache = self.cache
        engine = cache.engine
        for _ in range(max_steps):
            if cache.in_flight() == 0 and not self.loading and not cache.quarantine_records() \
                    and engine.pending == 0:
                return
            self.step_no += 1
            cache.ledger.step = self.step_no
            if self._ticking is not None:
                self._ticking.tick()
            else:
                engine.flush()
            cache.poll()
            self._collect_load_backs()
        raise InvariantError(self.step_no, f"{cache.in_flight()} transfer(s) of this epoch and "
                                           f"{len(cache.quarantine_records())} of older epochs never acked")
