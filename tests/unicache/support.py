"""Test support: a hand-driven transfer engine, the byte oracle and a request driver."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import torch

from unicache import (
    SWA,
    Ack,
    CacheConfig,
    Full,
    InsertResult,
    LockReceipt,
    Mamba,
    Node,
    Tier,
    TransferEngine,
    TransferJob,
    UniCache,
)

_MOD = 16_777_213

SEQ = list(range(200, 232))
"""A token sequence the operation tests share."""


class ManualEngine(TransferEngine):
    """Holds every job until the test completes it; the copy happens at completion.

    Completing a job reads its source rows at that moment, like a late DMA:
    a slot freed and reused under an in-flight copy shows up as wrong bytes.
    """

    def __init__(self) -> None:
        self.jobs: dict[int, TransferJob] = {}
        self._acks: list[Ack] = []
        self.log: list[TransferJob] = []

    def submit(self, job: TransferJob) -> None:
        assert job.ticket not in self.jobs, job
        self.jobs[job.ticket] = job
        self.log.append(job)

    def held(self) -> list[int]:
        return list(self.jobs)

    def complete(self, ticket: int, ok: bool = True, *, copy: bool = True) -> Ack:
        """Finish one job (copying when `ok` and `copy`) and queue its ack for `poll`."""
        job = self.jobs.pop(ticket)
        if ok and copy:
            assert self.pools is not None
            for op in job.copies:
                self.pools.copy(op)
        ack = job.ack(ok)
        self._acks.append(ack)
        return ack

    def complete_all(self) -> None:
        for ticket in list(self.jobs):
            self.complete(ticket)

    def poll(self) -> list[Ack]:
        acks, self._acks = self._acks, []
        return acks

    def flush(self, tickets: Collection[int] | None = None) -> None:
        for ticket in list(self.jobs if tickets is None else tickets):
            if ticket in self.jobs:
                self.complete(ticket)

    @property
    def pending(self) -> int:
        return len(self.jobs) + len(self._acks)


def prefix_hashes(tokens: Sequence[int]) -> list[int]:
    """h[p] = rolling hash of tokens[:p+1]: the KV at p depends on the whole prefix."""
    out: list[int] = []
    h = 7
    for t in tokens:
        h = (h * 31 + t + 1) % _MOD
        out.append(h)
    return out


@dataclass
class Oracle:
    """Expected bytes: KV rows and Mamba states are pure functions of the token prefix."""

    page_size: int
    kv_width: int
    mamba_width: int

    @classmethod
    def of(cls, config: CacheConfig) -> Oracle:
        return cls(config.page_size, config.kv_width, config.mamba_width)

    def rows(self, tokens: Sequence[int], start: int, end: int, salt: int) -> torch.Tensor:
        h = prefix_hashes(tokens[:end])[start:end]
        base = (torch.tensor(h, dtype=torch.int64) + salt) % _MOD
        rows = base[:, None] + torch.arange(self.kv_width, dtype=torch.int64)[None, :]
        return rows.to(torch.int32).view(-1, self.page_size, self.kv_width)

    def full(self, tokens: Sequence[int], start: int, end: int) -> torch.Tensor:
        return self.rows(tokens, start, end, 0)

    def swa(self, tokens: Sequence[int], start: int, end: int) -> torch.Tensor:
        return self.rows(tokens, start, end, 5_000_000)

    def state(self, tokens: Sequence[int]) -> torch.Tensor:
        h = prefix_hashes(tokens)[-1] if tokens else 0
        base = (h * 3 + 11 + len(tokens)) % _MOD
        return (base + torch.arange(self.mamba_width, dtype=torch.int64)).to(torch.int32)[None, :]

    def check(self, cache: UniCache) -> list[str]:
        """Every slot the tree holds, on both tiers, against recomputation."""
        wants: dict[tuple[type, Tier], tuple[list[int], list[torch.Tensor], list[int]]] = {}

        def want(comp: type, tier: Tier, slots: list[int], rows: torch.Tensor, nid: int) -> None:
            entry = wants.setdefault((comp, tier), ([], [], []))
            entry[0].extend(slots)
            entry[1].append(rows)
            entry[2].extend([nid] * len(slots))

        stack: list[tuple[Node, tuple[int, ...]]] = [(cache.root, ())]
        while stack:
            node, prefix = stack.pop()
            toks = prefix + node.key
            if node.parent is not None:
                s, e = node.start, node.end
                for tier, pages in ((Tier.DEVICE, node.dev_full), (Tier.HOST, node.host_full)):
                    if pages is not None:
                        want(Full, tier, pages, self.full(toks, s, e), node.id)
                for tier, pages in ((Tier.DEVICE, node.dev_swa), (Tier.HOST, node.host_swa)):
                    if pages is not None:
                        want(SWA, tier, pages, self.swa(toks, s, e), node.id)
                for tier, slot in ((Tier.DEVICE, node.dev_mamba), (Tier.HOST, node.host_mamba)):
                    if slot is not None:
                        want(Mamba, tier, [slot], self.state(toks), node.id)
            for child in node.children.values():
                stack.append((child, toks))
        errors: list[str] = []
        for (comp, tier), (slots, rows, nids) in wants.items():
            got = cache.read_slots(comp, slots, tier)
            exp = torch.cat(rows)
            bad = (got != exp).flatten(1).any(dim=1).nonzero().flatten().tolist()
            for i in bad[:8]:
                errors.append(
                    f"{comp.__name__} {tier.value} slot {slots[i]} of node {nids[i]}: wrong bytes"
                )
        return errors


@dataclass
class Driver:
    """Plays requests the way a serving engine does, with the byte oracle."""

    cache: UniCache
    oracle: Oracle = field(init=False)

    def __post_init__(self) -> None:
        self.oracle = Oracle.of(self.cache.config)

    @property
    def engine(self) -> ManualEngine:
        engine = self.cache.engine
        assert isinstance(engine, ManualEngine)
        return engine

    def compute(
        self, tokens: Sequence[int], start: int = 0, *, mamba: bool = True, donate: bool = True
    ) -> InsertResult | None:
        """Allocate, "compute" (write oracle bytes) and insert tokens[start:]; None if no room."""
        cache = self.cache
        cfg = cache.config
        n = len(tokens)
        pages = (n - start) // cfg.page_size
        fs = cache.alloc_device(Full, pages)
        if fs is None:
            return None
        ss: list[int] | None = None
        if cfg.swa_window is not None:
            ss = cache.alloc_device(SWA, pages)
            if ss is None:
                cache.free_device(Full, fs)
                return None
        ms: list[int] | None = None
        if cfg.mamba and mamba:
            ms = cache.alloc_device(Mamba, 1)
            if ms is None:
                cache.free_device(Full, fs)
                if ss is not None:
                    cache.free_device(SWA, ss)
                return None
        if pages:
            cache.write_slots(Full, fs, self.oracle.full(tokens, start, n))
            if ss is not None:
                cache.write_slots(SWA, ss, self.oracle.swa(tokens, start, n))
        if ms is not None:
            cache.write_slots(Mamba, ms, self.oracle.state(tokens))
        res = cache.insert(
            tokens, fs, start=start, swa_slots=ss,
            mamba_slot=ms[0] if ms is not None else None, mamba_donate=donate,
        )
        if ms is not None and not donate:
            cache.free_device(Mamba, ms)
        return res

    def serve(self, tokens: Sequence[int]) -> InsertResult | None:
        """match -> lock -> compute the rest -> insert -> unlock (no load-back)."""
        cache = self.cache
        m = cache.match_prefix(tokens)
        receipt: LockReceipt = cache.lock(m.device_node)
        try:
            return self.compute(tokens, receipt.length)
        finally:
            cache.unlock(receipt)

    def settle(self) -> None:
        """Complete every held copy and poll the acks."""
        if isinstance(self.cache.engine, ManualEngine):
            self.engine.complete_all()
        self.cache.poll()

    def assert_ok(self) -> None:
        report = self.cache.sanity_check()
        assert report.ok, report.describe()
        errors = self.oracle.check(self.cache)
        assert not errors, "\n".join(errors)


def chain(cache: UniCache, driver: Driver, tokens: Sequence[int], cuts: Sequence[int]) -> list[Node]:
    """Insert `tokens` in steps ending at each cut, so the path has one node per step."""
    for cut in cuts:
        assert driver.serve(tokens[:cut]) is not None
    m = cache.match_prefix(tokens[: cuts[-1]])
    node = m.anchor
    path = node.path()
    assert [x.end for x in path] == list(cuts), [x.end for x in path]
    return path


def dev_full_of(node: Node) -> list[int] | None:
    """Read through a call, so mypy does not keep a narrowing across cache operations."""
    return node.dev_full


def host_full_of(node: Node) -> list[int] | None:
    return node.host_full


def dev_aux_of(node: Node) -> tuple[list[int] | None, int | None]:
    return node.dev_swa, node.dev_mamba


def states_of(node: Node) -> tuple[int | None, int | None]:
    return node.dev_mamba, node.host_mamba


def is_alive(node: Node) -> bool:
    return node.alive
