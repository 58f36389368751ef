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
raises :class:`SchedulerStuckError` (:mod:`unicache.engine.liveness`: waiting
on acks that will come, quarantined copies of a reset included, is not stuck;
``idle_steps`` counts steps with no ack, nothing running and no request
finished, for the bound: a request short enough to start and finish within
one step is progress too).
A ticket whose ack has not come ``ack_timeout`` steps after the loop first saw
it is timed out (``UniCache.time_out``): its request recomputes what the
load-back would have brought, and its rows stay quarantined until the late ack.

The loop owns the requests' slots, receipts and tickets. The bytes live in
:mod:`unicache.engine.datapath`, the ownership invariant in
:mod:`unicache.engine.ownership`; whoever wants to watch the cache operations
(the op log, the pin statistics) registers a
:class:`~unicache.engine.observer.SchedulerObserver`.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Protocol, runtime_checkable

from leases import Borrowed

from unicache.cache import UniCache
from unicache.markers import SWA, Full, Mamba
from unicache.engine.acktimer import AckTimer, lost_for_good
from unicache.engine.config import EngineConfig
from unicache.engine.datapath import DataPath
from unicache.engine.errors import EngineError, InvariantError
from unicache.engine.holdings import Holdings
from unicache.engine.liveness import check_not_stuck, drained, never_acked
from unicache.engine.observer import SchedulerObserver
from unicache.engine.oracle import DataOracle
from unicache.engine.ownership import check_ownership
from unicache.engine.pinstats import PinObserver, PinTracker
from unicache.engine.reference import ReferenceModel
from unicache.engine.request import EngineStats, Phase, Request
from unicache.engine.stepcheck import StepCheck
from unicache.engine.timeline import Timeline
from unicache.results import MatchResult, TicketStatus
from unicache.tickets import LockReceipt
from unicache.traces.request import TraceRequest
from unicache.tree.node import Node

__all__ = ["EngineStats", "Phase", "Request", "Scheduler", "Ticking"]


@runtime_checkable
class Ticking(Protocol):
    """A transfer engine with a step clock (the simulated engine)."""

    def tick(self) -> None: ...


class Scheduler:
    """Runs a list of requests through a cache (see the module docstring)."""

    def __init__(self, cache: UniCache, requests: list[TraceRequest], *, model: ReferenceModel,
                 config: EngineConfig | None = None, timeline: Timeline | None = None) -> None:
        self.cache = cache
        self.model = model
        self.config = config or EngineConfig()
        self.oracle = DataOracle(cache, model)
        self._step_check = StepCheck(cache, self.oracle if self.config.data else None)
        self.pins = PinTracker()
        self.timeline = timeline
        self.stats = EngineStats()
        self.step_no = 0
        self.idle_steps = 0
        self._finished_seen = 0
        self.data = DataPath(cache, model, self.oracle, self.config, self.stats)
        self.observers: list[SchedulerObserver] = [PinObserver(self.pins, cache)]
        self._ps = cache.config.page_size
        chunk = self.config.cache_chunk or self._ps
        self._chunk = chunk * self._ps // math.gcd(chunk, self._ps)
        self._swa = cache.config.swa_window is not None
        self._mamba = cache.config.mamba
        self._data = self.config.data
        self._ticking = cache.engine if isinstance(cache.engine, Ticking) else None
        self._pending: deque[TraceRequest] = deque(requests)
        self.total = len(requests)
        self.waiting: deque[Request] = deque()
        self.ready: deque[Request] = deque()
        self.loading: list[Request] = []
        self.running: list[Request] = []
        self.current: Request | None = None
        self.holdings = Holdings()
        self._ack_timer = AckTimer(self.config.ack_timeout)
        self._allocators = [p.alloc for p in cache.pools.pools()]
        self._open: set[int] = set()

    def observe(self, observer: SchedulerObserver) -> None:
        """Tell ``observer`` about every cache operation from now on."""
        self.observers.append(observer)

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
        acked = cache.poll()
        finished = self.stats.finished
        progressed = acked or self.running or finished != self._finished_seen
        self._finished_seen = finished
        self.idle_steps = 0 if progressed else self.idle_steps + 1
        self._time_out_overdue()
        self._collect_load_backs()
        self._admit()
        self._decode()
        self.current = None
        cfg = self.config
        full = bool(cfg.check_every) and self.step_no % cfg.check_every == 0
        tree = self._data and bool(cfg.tree_check_every) and self.step_no % cfg.tree_check_every == 0
        if full:
            self.check_cache()
        if tree:
            self.check_tree()
        if cfg.step_checks and not (full and tree):
            self.check_step()
        if self.timeline is not None:
            self.timeline.sample(self.step_no, self.stats.finished, cache, len(self.loading))

    def check_cache(self) -> None:
        """The cache's sanity check plus the engine's ownership invariants."""
        self.stats.sanity_checks += 1
        self.cache.check()
        self.check_ownership()

    def check_step(self) -> None:
        """The incremental checks of what this step touched (`unicache.engine.stepcheck`), ownership included."""
        self.stats.step_checks += 1
        self._step_check.run(self.step_no)
        self.check_ownership()

    def check_tree(self) -> None:
        """The whole-tree data oracle."""
        self.stats.tree_checks += 1
        self.oracle.verify_tree()

    def check_ownership(self) -> None:
        """Every live lease is owned by a ticket or receipt someone holds; request slots match the cache's;
        every admitted request is finished, aborted or in exactly one queue (none lost with a dropped handle).
        """
        in_flight = self.in_flight_requests()
        check_ownership(self.cache, in_flight, self.holdings, self.step_no)
        rids = [r.rid for r in in_flight]
        if len(rids) != len(self._open) or self._open.difference(rids):
            lost = sorted(self._open.difference(rids))
            twice = sorted({rid for rid in rids if rids.count(rid) > 1})
            raise InvariantError(self.step_no, f"admitted requests {lost[:8]} are in no queue and neither "
                                               f"finished nor aborted (a dropped lock or load-back ticket?)"
                                 if lost else f"requests {twice[:8]} are in two queues at once")

    def _new_request(self, src: TraceRequest) -> Request:
        h = self.model.hashes(src.token_tensor()) if self._data else None
        return Request(src, tuple(src.tokens), h)

    def _collect_load_backs(self) -> None:
        still: list[Request] = []
        for req in self.loading:
            held = self.holdings.ticket(req.rid)
            assert held is not None, req.rid
            if held.status is TicketStatus.IN_FLIGHT:
                still.append(req)
                continue
            t = self.holdings.take_ticket(req.rid)
            assert t is not None, req.rid
            self._load_back_ended(req)
            res = t.result()
            if res.ok:
                self.stats.load_backs_ok += 1
                req.loaded_end = max(req.loaded_end, res.anchor.end)
            elif res.status is TicketStatus.STALE:
                self.stats.load_backs_stale += 1
            elif res.status is TicketStatus.TIMED_OUT:
                self.stats.load_backs_timed_out += 1
            else:
                self.stats.load_backs_failed += 1
            req.phase = Phase.READY
            self.ready.append(req)
        self.loading = still

    def _time_out_overdue(self) -> None:
        """Time out every ticket that has waited ``ack_timeout`` steps for its ack (`AckTimer`)."""
        for tid in self._ack_timer.overdue(self.cache, self.step_no):
            for obs in self.observers:
                obs.on_time_out(tid)
            self.cache.time_out(tid)
            self.stats.tickets_timed_out += 1

    def _load_back_ended(self, req: Request) -> None:
        ids, req.ticket_leases = req.ticket_leases, ()
        for obs in self.observers:
            obs.on_load_back_end(ids)

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
                    req = self._new_request(self._pending.popleft())
                    self.waiting.append(req)
                    self._open.add(req.rid)
                    self.stats.admitted += 1
                if self.active >= max_running:
                    return
                queue = self.waiting
            req = queue[0]
            self.current = req
            refused = self._injected_refusals()
            if not self._begin(req):
                self.stats.start_retries += 1
                if check_not_stuck(self.cache, req, self.step_no, loading=len(self.loading),
                                   running=len(self.running), idle_steps=self.idle_steps,
                                   ack_timeout=self.config.ack_timeout,
                                   injected_refusal=self._injected_refusals() != refused):
                    self.stats.lost_ack_waits += 1
                return
            queue.popleft()

    def _injected_refusals(self) -> int:
        """Allocations refused on purpose so far (`SlotAllocator.refuse`: the simulator's ``allocfail``)."""
        return sum(a.injected_refusals for a in self._allocators)

    def _begin(self, req: Request) -> bool:
        """Match and either start a load-back or start computing; False if memory is short."""
        cache = self.cache
        for obs in self.observers:
            obs.on_match(req.tokens)
        m = cache.match_prefix(req.tokens)
        if not req.matched:
            req.matched = True
            req.first_device_len = m.device_len
        cfg = self.config
        if cfg.load_back and m.worth_load_back and req.load_backs < cfg.max_load_backs:
            t = cache.load_back(m.anchor)
            if t is not None:
                req.load_backs += 1
                self.stats.load_backs_started += 1
                ids = tuple(t.lease_ids().values())
                req.ticket_leases = ids
                for obs in self.observers:
                    obs.on_load_back(m.anchor, t.id, ids)
                self.holdings.put_ticket(req.rid, t)
                req.phase = Phase.LOADING
                self.loading.append(req)
                return True
            # No room for the load-back: the eviction it ran to make some may have taken part of the
            # device prefix `m` reported (an SWA window node's pages), so match again.
            for obs in self.observers:
                obs.on_match(req.tokens)
            m = cache.match_prefix(req.tokens)
        return self._start(req, m)

    def _lock(self, node: Node) -> LockReceipt:
        receipt = self.cache.lock(node)
        ids = tuple(receipt.lease_ids())
        for obs in self.observers:
            obs.on_lock(node, receipt.id, ids)
        return receipt

    def _unlock(self, receipt: LockReceipt) -> None:
        ids = tuple(receipt.lease_ids())
        for obs in self.observers:
            obs.on_unlock(receipt.id, ids)
        self.cache.unlock(receipt)

    def _insert(self, tokens: tuple[int, ...], slots: list[int], *, start: int, swa_slots: list[int] | None,
                mamba_slot: int | None, mamba_donate: bool = True) -> Node | None:
        """Insert through the cache; the node the insert ended at, or None if its prefix was missing."""
        for obs in self.observers:
            obs.on_insert(tokens, start)
        res = self.cache.insert(tokens, slots, start=start, swa_slots=swa_slots, mamba_slot=mamba_slot,
                                mamba_donate=mamba_donate)
        return None if res.prefix_missing else res.node

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
        old = self.holdings.put_receipt(req.rid, receipt)
        if old is not None:
            old_id = old.id
            self._unlock(old)
            raise EngineError(f"request {req.rid} was still holding lock receipt #{old_id} when it started")
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
        self.data.verify_prefix(req, m.device_node, prefix)
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

    def _prefill(self, req: Request) -> None:
        self.data.prefill(req)
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
                    self.data.write_state(req.h, got, cut)
        node = self._insert(req.tokens[:cut], req.full_pages[:k], start=req.cached_end,
                            swa_slots=req.swa_pages[:k] if self._swa else None,
                            mamba_slot=slot, mamba_donate=donate)
        self.stats.prompt_inserts += 1
        req.full_pages = req.full_pages[k:]
        if self._swa:
            req.swa_pages = req.swa_pages[k:]
        req.cached_end = cut
        if node is None:
            return
        receipt = self._lock(node)
        if receipt.length != cut:
            got_len = receipt.length
            self._unlock(receipt)
            raise EngineError(f"request {req.rid}: lock after caching its prompt covers {got_len} "
                              f"tokens, expected {cut}")
        old = self.holdings.put_receipt(req.rid, receipt)
        if old is not None:
            self._unlock(old)
        if self._mamba and self.config.branch_states:
            self._cache_branch_states(req, node)

    def _cache_branch_states(self, req: Request, node: Node) -> None:
        """Give every stateless, chunk-aligned branch point above ``node`` its Mamba state.

        The path is locked (the request's receipt), so attaching a state is a
        pure insert of the prefix with no new pages.
        """
        cache = self.cache
        mamba = cache.components.mamba
        x = node.parent
        while x is not None and x.parent is not None:
            if (not mamba.state_present(x) and len(x.children) >= 2
                    and x.end % self._chunk == 0):
                got = cache.alloc_device(Mamba, 1)
                if got is None:
                    return
                self.data.write_state(req.h, got, x.end)
                self._insert(req.tokens[:x.end], [], start=x.end, swa_slots=[] if self._swa else None,
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
        ps = self._ps
        tokens, h = self.data.decode(req)
        total = len(tokens)
        end = total - total % ps
        slot = req.mamba_slot
        req.mamba_slot = None
        if end > req.cached_end:
            k = (end - req.cached_end) // ps
            if slot is not None:
                self.data.write_state(h, [slot], end)
            self._insert(tokens[:end], req.full_pages[:k], start=req.cached_end,
                         swa_slots=req.swa_pages[:k] if self._swa else None, mamba_slot=slot)
            self.stats.final_inserts += 1
            req.full_pages = req.full_pages[k:]
            if self._swa:
                req.swa_pages = req.swa_pages[k:]
        elif slot is not None:
            cache.free_device(Mamba, [slot])
        self._release(req)
        req.phase = Phase.DONE
        self._open.discard(req.rid)
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
        receipt = self.holdings.take_receipt(req.rid)
        if receipt is not None:
            self._unlock(receipt)

    def abort(self, req: Request) -> None:
        """Drop an admitted request: abandon its load-back or release what it holds."""
        if req.phase is Phase.LOADING:
            t = self.holdings.take_ticket(req.rid)
            assert t is not None, req.rid
            for obs in self.observers:
                obs.on_abandon(t.id)
            t.abandon()
            self._load_back_ended(req)
            self.loading.remove(req)
        elif req.phase is Phase.RUNNING:
            self._release(req)
            self.running.remove(req)
        elif req in self.ready:
            self.ready.remove(req)
        elif req in self.waiting:
            self.waiting.remove(req)
        req.phase = Phase.ABORTED
        self._open.discard(req.rid)
        self.stats.aborted += 1

    def drain(self, max_steps: int = 10_000) -> None:
        """Step (no new work) until every transfer has been acked, stale ones of old epochs included.

        A reset's quarantined ticket whose ack the engine lost for good is timed out at the end
        (its revoked leases released; its rows stay quarantined, counted).
        """
        cache = self.cache
        for _ in range(max_steps):
            if drained(cache, loading=len(self.loading)):
                for tid in lost_for_good(cache):
                    cache.time_out(tid)
                return
            self.step_no += 1
            cache.ledger.step = self.step_no
            if self._ticking is not None:
                self._ticking.tick()
            else:
                cache.engine.flush()
            cache.poll()
            self._time_out_overdue()
            self._collect_load_backs()
        raise never_acked(cache, self.step_no)
