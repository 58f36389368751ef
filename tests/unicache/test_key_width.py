"""The key width changes bytes, not behaviour: caches keying 4- and 8-byte ids stay identical under random ops.

Hypothesis drives two caches that differ only in `token_bytes` (Full,
Full+SWA, Full+Mamba; page sizes 1 and 4) through the same random
requests, inserts without a match first, matches, locks, load-backs,
backups, evictions (splits happen on partial matches, in the walk and in
the insert) and resets, with token ids up to 2**31 - 1 so every
key byte is used. After every step both must have returned the same
results (node ids, lengths, outcomes) and hold the same tree: node for
node the same ids, links, positions, decoded keys, recency and per-component
residency, and the same counters. Each width's keys are exactly
`token_bytes` bytes a token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unicache.support import Driver, residency
from unicache import CacheConfig, Full, LockReceipt, Node, UniCache

CONFIGS: dict[str, dict[str, object]] = {
    "full-ps1": {"page_size": 1},
    "swa-ps4": {"page_size": 4, "swa_window": 8, "write_policy": "write_through"},
    "mamba-ps1": {"page_size": 1, "mamba": True, "mamba_device_slots": 6},
}
ACTIONS = ("serve", "serve", "serve", "insert", "match", "lock", "unlock", "load_back", "backup", "evict", "evict_host",
           "reset")
TOP = 2**31 - 1
FAMILIES = (0, 5, 2**16, TOP - 80)
"""Base ids of the request families: small, 16-bit and next to the 4-byte limit."""


def _build(name: str, token_bytes: int) -> UniCache:
    params: dict[str, object] = {
        "device_tokens": 48, "host_tokens": 64, "dtype": "int32", "device": "cpu", "kv_width": 2,
        "mamba_width": 2, "history": 0, "token_bytes": token_bytes,
    }
    params.update(CONFIGS[name])
    return UniCache(CacheConfig(**params))  # type: ignore[arg-type]


def _tokens(family: int, branch: int, pages: int, ps: int) -> list[int]:
    """A request of `pages` pages: a family's shared prefix, then a branch from its third page on."""
    base = FAMILIES[family % len(FAMILIES)]
    out = [base + i for i in range(pages * ps)]
    cut = 2 * ps
    return out[:cut] + [base + 32 + branch * 7 + i for i in range(len(out) - cut)]


def _tree(cache: UniCache) -> list[tuple[object, ...]]:
    rows: list[tuple[object, ...]] = []
    for x in cache.nodes():
        r = residency(x)
        rows.append((x.id, x.parent.id if x.parent is not None else None, x.start, x.end, x.key, x.last_access,
                     x.hits, x.dev_children, x.lru, tuple(c.id for c in x.children.values()),
                     r.full_device, r.full_host, r.swa_device, r.swa_host, r.mamba_device, r.mamba_host))
        assert len(x.kb) == cache.config.token_bytes * (x.end - x.start)
    return rows


@dataclass
class Side:
    """One cache and what the drive holds on it."""

    cache: UniCache
    driver: Driver
    receipts: list[LockReceipt] = field(default_factory=list)

    def step(self, action: str, a: int, b: int) -> object:
        cache = self.cache
        ps = cache.config.page_size
        tokens = _tokens(a, (b // 7) % 3, 1 + b % 7, ps)
        if action == "serve":
            res = self.driver.serve(tokens)
            cache.poll()
            return None if res is None else (res.node.id, res.new_tokens, res.unevicted_tokens, res.duplicate_pages_freed,
                                             res.mamba, res.prefix_missing)
        if action == "insert":
            res = self.driver.compute(tokens)
            cache.poll()
            return None if res is None else (res.node.id, res.new_tokens, res.unevicted_tokens, res.duplicate_pages_freed,
                                             res.mamba, res.prefix_missing)
        if action == "match":
            m = cache.match_prefix(tokens + [a] * (b % ps))
            return (m.matched_len, m.device_node.id, m.device_len, m.anchor.id, m.anchor_len, m.full_host_tokens,
                    m.swa_host_tokens, m.mamba_host, m.worth_load_back)
        if action == "lock":
            receipt = cache.lock(cache.match_prefix(tokens).device_node)
            length = receipt.length
            self.receipts.append(receipt)
            return length
        if action == "unlock" and self.receipts:
            cache.unlock(self.receipts.pop(b % len(self.receipts)))
        elif action == "load_back":
            m = cache.match_prefix(tokens)
            t = cache.load_back(m.anchor) if m.needs_load_back else None
            if t is not None:
                cache.poll()
                return t.result().ok
        elif action == "backup":
            nodes = [x for x in cache.nodes() if x.parent is not None]
            if nodes:
                got = cache.backup(nodes[b % len(nodes)])
                cache.poll()
                return got is not None
        elif action == "evict":
            comp = cache.config.components[b % len(cache.config.components)]
            return cache.evict_device(comp, 1 + a % 8)
        elif action == "evict_host":
            comp = cache.config.components[b % len(cache.config.components)]
            return cache.evict_host(comp, 1 + a % 8)
        elif action == "reset" and a % 4 == 0:
            cache.reset()
            for r in self.receipts:  # a reset revokes the receipts' leases; their holder still releases them
                cache.unlock(r)
            self.receipts = []
        return None

    def close(self) -> None:
        for r in self.receipts:
            self.cache.unlock(r)
        self.receipts = []
        self.cache.poll()
        self.driver.assert_ok()


@pytest.mark.parametrize("config", sorted(CONFIGS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions=st.lists(st.tuples(st.sampled_from(ACTIONS), st.integers(0, 99), st.integers(0, 99)),
                        min_size=1, max_size=40))
def test_both_widths_behave_the_same(config: str, actions: list[tuple[str, int, int]]) -> None:
    sides = [Side(c, Driver(c)) for c in (_build(config, 4), _build(config, 8))]
    narrow, wide = sides
    for i, (action, a, b) in enumerate(actions):
        got = [s.step(action, a, b) for s in sides]
        assert got[0] == got[1], f"step {i} {action}: 4-byte keys gave {got[0]}, 8-byte keys {got[1]}"
        assert _tree(narrow.cache) == _tree(wide.cache), f"step {i} {action}: the trees differ"
        assert narrow.cache.counters == wide.cache.counters, f"step {i} {action}: the counters differ"
    for s in sides:
        s.close()


def test_key_bytes_halve_at_width_4() -> None:
    sizes = {}
    for tw in (4, 8):
        cache = _build("full-ps1", tw)
        Driver(cache).serve(list(range(TOP - 20, TOP + 1)))
        (leaf,) = [x for x in cache.nodes() if x.parent is not None]
        assert leaf.key == tuple(range(TOP - 20, TOP + 1)) and leaf.tokens() == leaf.key
        sizes[tw] = len(leaf.kb)
    assert sizes == {4: 21 * 4, 8: 21 * 8}


def test_the_tree_carries_the_configured_width() -> None:
    for tw in (4, 8):
        cache = _build("swa-ps4", tw)
        root: Node = cache.root
        assert root.tree.token_bytes == tw
        assert cache.dump_state()["config"]["token_bytes"] == tw  # type: ignore[index]
    assert _build("full-ps1", 4).sanity_check().ok
    assert Full in _build("full-ps1", 8).config.components
