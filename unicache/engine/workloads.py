"""Seeded simulation workloads: synthetic multi-turn chats and mutated windows of the real Mooncake trace.

Both are pure functions of the seed and the page size, never of the step
limit (the shrinker cuts steps and must keep the same requests). They are long
enough that a 200-step run ends at its step limit, not because the workload ran
out; cache sizes are derived from the first :data:`SIZING_REQUESTS` requests
only, so the longer workload does not make the cache roomier.

The Mooncake-shaped workload takes a window of the bundled conversation trace
and mutates it by seed: block ids are remapped (so seeds do not share tokens),
some prompts are cut after a random block, some get a fresh suffix block (a
new branch), and output lengths are rescaled. Block sizes are a few pages, so
the real sharing structure survives in a tiny cache.
"""

from __future__ import annotations

import math
import random
from array import array
from functools import lru_cache

from unicache.traces.lines import iter_records
from unicache.traces.mooncake import BUNDLED_MOONCAKE, MOONCAKE_BLOCK_TOKENS, block_tokens, open_bundled_mooncake
from unicache.traces.request import Trace, TraceRequest
from unicache.traces.synthetic import MultiTurnSpec, generate_multiturn

WORKLOADS: tuple[str, ...] = ("multiturn", "mooncake")
SIZING_REQUESTS = 80
_MIX = 0x9E3779B97F4A7C15
_ID_MASK = (1 << 62) - 1

MooncakeRecord = tuple[tuple[int, ...], int, int]


@lru_cache(maxsize=1)
def bundled_records() -> tuple[MooncakeRecord, ...]:
    """``(hash_ids, input_length, output_length)`` of every bundled Mooncake request (read once a process)."""
    out: list[MooncakeRecord] = []
    with open_bundled_mooncake() as stream:
        for _, _, record in iter_records(stream, name=BUNDLED_MOONCAKE):
            assert isinstance(record, dict)
            ids = record["hash_ids"]
            assert isinstance(ids, list)
            out.append((tuple(int(i) for i in ids), int(record["input_length"]), int(record.get("output_length", 0))))
    return tuple(out)


def multiturn_workload(rng: random.Random, seed: int, page_size: int) -> Trace:
    """A synthetic multi-turn chat of 500..800 sessions on a 40-token vocabulary."""
    ps = page_size
    spec = MultiTurnSpec(sessions=rng.randint(500, 800), turns=rng.randint(3, 5), system_prompts=rng.randint(1, 3),
                         system_len=(8 * ps, 24 * ps), turn_len=(2 * ps, 10 * ps), active=rng.randint(3, 6),
                         page_size=ps, vocab=40, output_tokens=rng.choice((0, 2, 5)))
    return generate_multiturn(seed, spec)


def mooncake_workload(rng: random.Random, seed: int, page_size: int) -> Trace:
    """A mutated window of 2000..4000 bundled Mooncake requests, ``page_size`` x 1..2 tokens a block."""
    records = bundled_records()
    count = rng.randint(2000, 4000)
    start = rng.randrange(0, len(records) - count)
    tpb = page_size * rng.choice((1, 2))
    salt = (seed * _MIX + 1) & _ID_MASK
    cut_rate = rng.choice((0.0, 0.1, 0.3))
    fork_rate = rng.choice((0.0, 0.1, 0.2))
    out_scale = rng.choice((0.0, 0.5, 1.0))
    fresh = 0
    shapes: list[tuple[list[int], int, int]] = []
    for hash_ids, input_length, output_length in records[start:start + count]:
        ids = [(h * 2654435761 ^ salt) & _ID_MASK for h in hash_ids]
        blocks = len(ids)
        if blocks > 1 and rng.random() < cut_rate:
            blocks = rng.randint(1, blocks - 1)
            ids = ids[:blocks]
            input_length = blocks * MOONCAKE_BLOCK_TOKENS
        if rng.random() < fork_rate:
            fresh += 1
            ids[-1] = (salt ^ (fresh << 40) ^ 0x5EED) & _ID_MASK
        n = math.ceil(min(input_length, blocks * MOONCAKE_BLOCK_TOKENS) * tpb / MOONCAKE_BLOCK_TOKENS)
        output = min(8, math.ceil(output_length * out_scale * tpb / MOONCAKE_BLOCK_TOKENS))
        shapes.append((ids, n, output))
    flat = block_tokens([i for ids, _, _ in shapes for i in ids], tpb).tolist()
    requests: list[TraceRequest] = []
    offset = 0
    for ids, n, output in shapes:
        requests.append(TraceRequest(rid=len(requests), tokens=array("q", flat[offset:offset + n]),
                                     output_tokens=output))
        offset += len(ids) * tpb
    name = f"mooncake-window(seed={seed}, start={start}, n={count}, {tpb} tokens/block)"
    return Trace(name, requests, source="synthetic:bundled-mooncake")


def build_workload(kind: str, seed: int, page_size: int) -> Trace:
    """The workload ``kind`` (one of :data:`WORKLOADS`) for ``seed``."""
    rng = random.Random(seed * 104729 + 11)
    if kind == "mooncake":
        return mooncake_workload(rng, seed, page_size)
    return multiturn_workload(rng, seed, page_size)
