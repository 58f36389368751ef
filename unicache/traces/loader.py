"""Pick a trace source from one string: the bundled Mooncake trace, a file, or a generator.

``mooncake`` (the default) is the bundled Mooncake conversation trace;
``multiturn:SEED`` is the synthetic multi-turn generator (harness-equivalent);
anything else is a path whose format is detected from its first record
(``hash_ids`` -> Mooncake, ``tokens`` -> explicit-token JSONL).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from unicache.traces.jsonl import load_token_jsonl
from unicache.traces.lines import count_records, iter_records, open_trace
from unicache.traces.mooncake import load_mooncake, open_bundled_mooncake
from unicache.traces.request import Trace, TraceFormatError
from unicache.traces.synthetic import generate_multiturn

BUNDLED = "mooncake"
MULTITURN_PREFIX = "multiturn:"
MOONCAKE = "mooncake"
TOKENS = "tokens"
MULTITURN = "multiturn"


class EmptyWindowError(TraceFormatError):
    """The requested window of a trace holds no request (``--start`` past its end)."""


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """Which trace to load and which window of it: requests ``start .. start+count-1``."""

    source: str = BUNDLED
    tokens_per_block: int = 16
    start: int = 0
    count: int | None = None

    def describe(self) -> str:
        window = f"[{self.start}:{'' if self.count is None else self.start + self.count}]"
        return f"{self.source}{window}"


def detect_format(path: Path) -> str:
    """``"mooncake"`` or ``"tokens"``, from the first non-empty line of ``path``."""
    with open_trace(path) as stream:
        for _, where, record in iter_records(stream, name=str(path)):
            if isinstance(record, dict) and "hash_ids" in record:
                return MOONCAKE
            if isinstance(record, dict) and "tokens" in record:
                return TOKENS
            raise TraceFormatError(f"{where}: record has neither 'hash_ids' nor 'tokens'")
    raise TraceFormatError(f"{path}: empty trace")


def trace_format(source: str) -> str:
    """The format ``source`` is in: ``"mooncake"``, ``"tokens"`` or ``"multiturn"``.

    Defaults that depend on the trace (decode speed, cache chunk) follow this,
    not whether the trace is the bundled one. Raises like :func:`load_trace`.
    """
    if source == BUNDLED:
        return MOONCAKE
    if source.startswith(MULTITURN_PREFIX):
        return MULTITURN
    return detect_format(_existing(source))


def _existing(source: str) -> Path:
    path = Path(source)
    if path.exists() and not path.is_file():
        raise TraceFormatError(f"trace {path} is not a regular file")
    if not path.is_file():
        raise FileNotFoundError(f"trace file {path} does not exist")
    return path


def _count(source: str) -> int:
    """Requests in ``source`` (only called to explain an empty window)."""
    if source == BUNDLED:
        with open_bundled_mooncake() as stream:
            return count_records(stream, name=source)
    if source.startswith(MULTITURN_PREFIX):
        return len(_multiturn(source))
    with open_trace(_existing(source)) as stream:
        return count_records(stream, name=source)


def _multiturn(source: str) -> Trace:
    seed_text = source[len(MULTITURN_PREFIX):]
    try:
        seed = int(seed_text)
    except ValueError:
        raise TraceFormatError(f"trace {source!r}: seed {seed_text!r} is not an int") from None
    return generate_multiturn(seed)


def load_trace(spec: TraceSpec) -> Trace:
    """Load the trace ``spec`` names (see the module docstring for the accepted sources).

    A window that holds no request (``start`` past the end) is refused with
    :class:`EmptyWindowError`, which says how many requests the trace has.
    """
    trace = _load(spec)
    if not trace.requests:
        total = _count(spec.source)
        raise EmptyWindowError(f"trace {spec.source} has {total} request(s); the window starting at request "
                               f"{spec.start} holds none (--start must be < {total})")
    return trace


def _load(spec: TraceSpec) -> Trace:
    if spec.source == BUNDLED:
        return load_mooncake(None, tokens_per_block=spec.tokens_per_block, start=spec.start, count=spec.count)
    if spec.source.startswith(MULTITURN_PREFIX):
        full = _multiturn(spec.source)
        end = None if spec.count is None else spec.start + spec.count
        return Trace(full.name, full.requests[spec.start:end], source=full.source)
    path = _existing(spec.source)
    if detect_format(path) == MOONCAKE:
        return load_mooncake(path, tokens_per_block=spec.tokens_per_block, start=spec.start, count=spec.count)
    return load_token_jsonl(path, start=spec.start, count=spec.count)
