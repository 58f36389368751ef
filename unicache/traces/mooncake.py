"""Loader for the Mooncake trace format: prompts given as ``hash_ids`` of 512-token blocks.

Each block id maps to ``tokens_per_block`` deterministic tokens (a pure function
of the id), so equal ids give equal tokens and shared prefixes stay shared. A
request's prompt keeps ``input_length`` proportionally: ``ceil(input_length *
tokens_per_block / 512)`` tokens, the last block cut short like the original.
``output_length`` scales the same way. File order (arrival order) is kept.
"""

from __future__ import annotations

import gzip
import io
import math
from array import array
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import IO, cast

import torch

from unicache.traces.bounds import MAX_HASH_ID, TokenBudget, check_request_tokens, check_timestamp, is_int
from unicache.traces.lines import iter_records, open_trace
from unicache.traces.mix import mix32
from unicache.traces.request import Trace, TraceFormatError, TraceRequest

MOONCAKE_BLOCK_TOKENS = 512
BUNDLED_MOONCAKE = "mooncake_conversation.jsonl.gz"
_TOKEN_SALT = 0x68E31DA4


def block_tokens(block_ids: list[int], tokens_per_block: int) -> torch.Tensor:
    """Tokens of whole blocks, ``tokens_per_block`` per id, as one int64 tensor.

    Tokens are in ``1..2**31-1``; a block's tokens depend only on its id.
    """
    ids = torch.tensor(block_ids, dtype=torch.int64).unsqueeze(1)
    k = torch.arange(tokens_per_block, dtype=torch.int64).unsqueeze(0)
    base = mix32(ids ^ _TOKEN_SALT) ^ mix32(ids >> 32)
    toks = mix32(base ^ mix32(k + 0x9E3779B9)) & 0x7FFFFFFF
    return (toks | (toks == 0).to(torch.int64)).reshape(-1)


def open_bundled_mooncake() -> IO[bytes]:
    """The Mooncake conversation trace shipped as package data (gzipped JSONL)."""
    ref = resources.files("unicache").joinpath("data", BUNDLED_MOONCAKE)
    return cast(IO[bytes], gzip.open(io.BytesIO(ref.read_bytes())))


def _scaled(length: int, tokens_per_block: int) -> int:
    return math.ceil(length * tokens_per_block / MOONCAKE_BLOCK_TOKENS)


def parse_mooncake_record(record: object, *, rid: int, tokens_per_block: int, where: str,
                          budget: TokenBudget | None = None) -> TraceRequest:
    """One Mooncake JSON object -> a request (``where`` names file:line for errors).

    Refused, never clamped: booleans as numbers, block ids outside ``0..MAX_HASH_ID``,
    lengths that do not fit the blocks or exceed ``MAX_REQUEST_TOKENS`` once scaled,
    timestamps that are not finite and non-negative.
    """
    if not isinstance(record, dict):
        raise TraceFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    try:
        hash_ids = record["hash_ids"]
        input_length = record["input_length"]
    except KeyError as exc:
        raise TraceFormatError(f"{where}: missing field {exc.args[0]!r}") from None
    output_length = record.get("output_length", 0)
    timestamp = check_timestamp(record.get("timestamp", 0), where)
    if not isinstance(hash_ids, list) or not hash_ids or not all(is_int(b) for b in hash_ids):
        raise TraceFormatError(f"{where}: hash_ids must be a non-empty list of ints")
    bad = next((b for b in hash_ids if not 0 <= b <= MAX_HASH_ID), None)
    if bad is not None:
        raise TraceFormatError(f"{where}: hash id {bad} is outside 0..{MAX_HASH_ID} (int64)")
    if not is_int(input_length) or not is_int(output_length):
        raise TraceFormatError(f"{where}: input_length/output_length must be ints, got "
                               f"{input_length!r}/{output_length!r}")
    assert isinstance(input_length, int) and isinstance(output_length, int)
    blocks = len(hash_ids)
    if not MOONCAKE_BLOCK_TOKENS * (blocks - 1) < input_length <= MOONCAKE_BLOCK_TOKENS * blocks:
        raise TraceFormatError(
            f"{where}: input_length {input_length} does not fit {blocks} blocks of {MOONCAKE_BLOCK_TOKENS}")
    if output_length < 0:
        raise TraceFormatError(f"{where}: negative output_length {output_length}")
    n_tokens = check_request_tokens(_scaled(input_length, tokens_per_block), "input_length", where)
    n_output = check_request_tokens(_scaled(output_length, tokens_per_block), "output_length", where)
    if budget is not None:
        budget.take(n_tokens + n_output, where)
    toks = block_tokens(hash_ids, tokens_per_block)[:n_tokens]
    return TraceRequest(
        rid=rid,
        tokens=array("q", toks.tolist()),
        output_tokens=n_output,
        arrival_ms=timestamp,
    )


def iter_mooncake(stream: IO[bytes], *, name: str, tokens_per_block: int, start: int = 0,
                  count: int | None = None) -> Iterator[TraceRequest]:
    """Requests ``start .. start+count-1`` of a Mooncake JSONL stream, in file order."""
    if tokens_per_block < 1 or tokens_per_block > MOONCAKE_BLOCK_TOKENS:
        raise ValueError(f"tokens_per_block must be in 1..{MOONCAKE_BLOCK_TOKENS}, got {tokens_per_block}")
    budget = TokenBudget()
    for index, where, record in iter_records(stream, name=name, start=start, count=count):
        yield parse_mooncake_record(record, rid=index, tokens_per_block=tokens_per_block, where=where,
                                    budget=budget)


def load_mooncake(path: Path | None = None, *, tokens_per_block: int = 16, start: int = 0,
                  count: int | None = None) -> Trace:
    """Load a window of a Mooncake trace; ``path=None`` reads the bundled conversation trace."""
    if path is None:
        name = f"mooncake_conversation (bundled, {tokens_per_block} tokens/block)"
        with open_bundled_mooncake() as stream:
            reqs = list(iter_mooncake(stream, name=BUNDLED_MOONCAKE, tokens_per_block=tokens_per_block,
                                      start=start, count=count))
        return Trace(name, reqs, source=f"package:unicache/data/{BUNDLED_MOONCAKE}")
    with open_trace(path) as stream:
        reqs = list(iter_mooncake(stream, name=str(path), tokens_per_block=tokens_per_block,
                                  start=start, count=count))
    return Trace(f"{path.name} ({tokens_per_block} tokens/block)", reqs, source=str(path))
