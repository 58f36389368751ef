"""Pick a transfer engine by name: ``immediate``, ``simulated``, ``threaded``, ``cuda`` or ``auto``."""

from __future__ import annotations

from typing import Literal, get_args

from unicache.cache import UniCache
from unicache.transfer.base import TransferEngine
from unicache.transfer.cuda import CudaEngine, CudaUnavailableError, cuda_available
from unicache.transfer.immediate import ImmediateEngine
from unicache.transfer.simulated import FaultSpec, SimulatedEngine
from unicache.transfer.threaded import ThreadedEngine

TransferKind = Literal["auto", "immediate", "simulated", "threaded", "cuda"]
TRANSFER_KINDS: tuple[str, ...] = get_args(TransferKind)


def resolve_transfer(kind: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is present, else ``simulated``; others unchanged."""
    if kind not in TRANSFER_KINDS:
        raise ValueError(f"unknown transfer engine {kind!r} (choose from {', '.join(TRANSFER_KINDS)})")
    if kind == "auto":
        return "cuda" if cuda_available() else "simulated"
    return kind


def make_transfer(kind: str, *, faults: FaultSpec, seed: int, copy: bool = True) -> TransferEngine:
    """A fresh engine of ``kind`` (after :func:`resolve_transfer`); faults apply to ``simulated`` only.

    A ``threaded`` engine posts acks to the cache's inbox: bind it with :func:`bind_transfer`.
    """
    resolved = resolve_transfer(kind)
    if resolved == "immediate":
        return ImmediateEngine(copy=copy)
    if resolved == "simulated":
        return SimulatedEngine(faults, seed=seed)
    if resolved == "threaded":
        return ThreadedEngine()
    if not cuda_available():
        raise CudaUnavailableError("--transfer cuda needs a CUDA device; torch.cuda.is_available() is False")
    return CudaEngine()


def bind_transfer(cache: UniCache) -> None:
    """Connect an engine whose copies finish on other threads to ``cache.inbox`` (others need nothing)."""
    engine = cache.engine
    if isinstance(engine, ThreadedEngine):
        engine.bind(cache.inbox)
