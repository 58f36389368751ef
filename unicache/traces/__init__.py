"""Trace sources: the Mooncake format, explicit-token JSONL, and a synthetic multi-turn generator."""

from unicache.traces.jsonl import dump_token_jsonl, load_token_jsonl
from unicache.traces.loader import TraceSpec, load_trace
from unicache.traces.mooncake import load_mooncake
from unicache.traces.request import Trace, TraceFormatError, TraceRequest
from unicache.traces.synthetic import MultiTurnSpec, generate_multiturn

__all__ = [
    "MultiTurnSpec",
    "Trace",
    "TraceFormatError",
    "TraceRequest",
    "TraceSpec",
    "dump_token_jsonl",
    "generate_multiturn",
    "load_mooncake",
    "load_token_jsonl",
    "load_trace",
]
