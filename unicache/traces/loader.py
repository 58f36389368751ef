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
from unicache.traces.lines import iter_records, open_trace
from unicache.traces.mooncake import load_mooncake
from unicache.traces.request import Trace, TraceFormatError
from unicache.traces.synthetic import generate_multiturn

BUNDLED = "mooncake"
MULTITURN_PREFIX = "multiturn:"


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
                return "mooncake"
            if isinstance(record, dict) and "tokens" in record:
                return "tokens"
            raise TraceFormatError(f"{where}: record has neither 'hash_ids' nor 'tokens'")
    raise TraceFormatError(f"{path}: empty trace")


def load_trace(spec: TraceSpec) -> Trace:
    """Load the trace ``spec`` names (see the module docstring for the accepted sources)."""
    if spec.source == BUNDLED:
        return load_mooncake(None, tokens_per_block=spec.tokens_per_block, start=spec.start, count=spec.count)
    if spec.source.startswith(MULTITURN_PREFIX):
        seed_text = spec.source[len(MULTITURN_PREFIX):]
        try:
            seed = int(seed_text)
        except ValueError:
            raise TraceFormatError(f"trace {spec.source!r}: seed {seed_text!r} is not an int") from None
        full = generate_multiturn(seed)
        end = None if spec.count is None else spec.start + spec.count
        return Trace(full.name, full.requests[spec.start:end], source=full.source)
    path = Path(spec.source)
    if not path.is_file():
        raise FileNotFoundError(f"trace file {path} does not exist")
    if detect_format(path) == "mooncake":
        return load_mooncake(path, tokens_per_block=spec.tokens_per_block, start=spec.start, count=spec.count)
    return load_token_jsonl(path, start=spec.start, count=spec.count)
