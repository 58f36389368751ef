"""Our own JSONL trace format: one request per line with an explicit ``tokens`` list.

This is exactly what ``sglang_harness.py --dump-workload`` writes:
``{"id": int, "session": int, "turn": int, "tokens": [int, ...]}``. Optional
fields: ``output_tokens`` (tokens to decode, default 0) and ``timestamp``
(milliseconds). A ``.gz`` suffix is read (and written) gzipped. A record
without ``id`` takes its position in the file (0-based, blank lines not
counted); two requests of a loaded window with one id are refused, naming
both lines (the engine keys everything a request holds by its id).
"""

from __future__ import annotations

import gzip
import json
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO

from unicache.traces.bounds import MAX_TOKEN_ID, TokenBudget, check_request_tokens, check_timestamp, is_int
from unicache.traces.lines import iter_records, open_trace
from unicache.traces.request import Trace, TraceFormatError, TraceRequest


def _opt_int(record: dict[str, object], key: str, where: str) -> int | None:
    value = record.get(key)
    if value is None:
        return None
    if not is_int(value):
        raise TraceFormatError(f"{where}: {key} must be an int, got {value!r}")
    assert isinstance(value, int)
    if not -MAX_TOKEN_ID <= value <= MAX_TOKEN_ID:
        raise TraceFormatError(f"{where}: {key} {value} does not fit in 64 bits")
    return value


def parse_token_record(record: object, *, index: int, where: str,
                       budget: TokenBudget | None = None) -> TraceRequest:
    """One explicit-token JSON object -> a request (``where`` names file:line for errors).

    Refused, never clamped: booleans as numbers, token ids outside ``0..MAX_TOKEN_ID``,
    more than ``MAX_REQUEST_TOKENS`` prompt or output tokens, timestamps that are
    not finite and non-negative.
    """
    if not isinstance(record, dict):
        raise TraceFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    tokens = record.get("tokens")
    if not isinstance(tokens, list) or not tokens:
        raise TraceFormatError(f"{where}: tokens must be a non-empty list")
    check_request_tokens(len(tokens), "prompt", where)
    if not all(is_int(t) and t >= 0 for t in tokens):
        raise TraceFormatError(f"{where}: tokens must be non-negative ints")
    rid = _opt_int(record, "id", where)
    output = _opt_int(record, "output_tokens", where) or 0
    if output < 0:
        raise TraceFormatError(f"{where}: negative output_tokens {output}")
    check_request_tokens(output, "output_tokens", where)
    timestamp = check_timestamp(record.get("timestamp", 0), where)
    try:
        toks = array("q", tokens)
    except OverflowError:
        raise TraceFormatError(f"{where}: a token does not fit in 64 bits") from None
    if budget is not None:
        budget.take(len(toks) + output, where)
    return TraceRequest(
        rid=index if rid is None else rid,
        tokens=toks,
        output_tokens=output,
        arrival_ms=timestamp,
        session=_opt_int(record, "session", where),
        turn=_opt_int(record, "turn", where),
    )


def _implicit(explicit: bool) -> str:
    return "" if explicit else " (its position: the record has no id)"


def iter_token_jsonl(stream: IO[bytes], *, name: str, start: int = 0,
                     count: int | None = None) -> Iterator[TraceRequest]:
    """Requests ``start .. start+count-1`` of an explicit-token JSONL stream, in file order.

    A request whose id an earlier request of the window has is refused
    (TraceFormatError naming the id and both lines).
    """
    budget = TokenBudget()
    first: dict[int, tuple[str, bool]] = {}
    for index, where, record in iter_records(stream, name=name, start=start, count=count):
        req = parse_token_record(record, index=index, where=where, budget=budget)
        line = where.rpartition(":")[2]
        explicit = isinstance(record, dict) and record.get("id") is not None
        seen_line, seen_explicit = first.setdefault(req.rid, (line, explicit))
        if seen_line != line:
            raise TraceFormatError(
                f"{where}: request id {req.rid}{_implicit(explicit)} is already the id of line "
                f"{seen_line}{_implicit(seen_explicit)}; give every record of the trace its own id")
        yield req


def load_token_jsonl(path: Path, *, start: int = 0, count: int | None = None) -> Trace:
    """Load a window of an explicit-token JSONL trace."""
    with open_trace(path) as stream:
        reqs = list(iter_token_jsonl(stream, name=str(path), start=start, count=count))
    return Trace(path.name, reqs, source=str(path))


def dump_token_jsonl(requests: Iterable[TraceRequest], path: Path) -> None:
    """Write requests in the explicit-token format (readable by :func:`load_token_jsonl`)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt") as out:
        for req in requests:
            record: dict[str, object] = {"id": req.rid, "tokens": req.tokens.tolist()}
            if req.session is not None:
                record["session"] = req.session
            if req.turn is not None:
                record["turn"] = req.turn
            if req.output_tokens:
                record["output_tokens"] = req.output_tokens
            if req.arrival_ms:
                record["timestamp"] = req.arrival_ms
            out.write(json.dumps(record) + "\n")
