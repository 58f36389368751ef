"""`PoolSet`: every pool of one cache (component x tier) and the row copies between them."""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from unicache.config import CacheConfig
from unicache.errors import InvalidArgumentError
from unicache.markers import Mamba, component_name
from unicache.pools.copy import CopyOp, Tier
from unicache.pools.pool import KVPool, Pool, StatePool


@dataclass(slots=True)
class PoolStats:
    """Occupancy of one pool, in rows (pages or slots)."""

    capacity: int
    free: int
    used: int
    quarantined: int

    def to_json(self) -> dict[str, int]:
        return {
            "capacity": self.capacity,
            "free": self.free,
            "used": self.used,
            "quarantined": self.quarantined,
        }


def resolve_device(spec: str) -> torch.device:
    """"auto" picks CUDA when available; "cuda" without a GPU raises `InvalidArgumentError`."""
    if spec == "auto":
        return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidArgumentError(f"config device {spec!r} requested but CUDA is not available")
    return torch.device(spec)


class PoolSet:
    """Device pools (CUDA when present, else CPU) and host pools (CPU, pinned with CUDA)."""

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.host_device = torch.device("cpu")
        pin = self.device.type == "cuda"
        dtype = getattr(torch, config.dtype)
        if not isinstance(dtype, torch.dtype):
            raise InvalidArgumentError(f"config dtype {config.dtype!r} is not a torch dtype")
        self.dtype = dtype
        self._by_key: dict[tuple[type, Tier], Pool] = {}
        ps = config.page_size
        for comp in config.components:
            name = component_name(comp)
            dev_cap = config.device_capacity(comp)
            host_cap = config.host_capacity(comp)
            dev: Pool
            host: Pool
            if comp is Mamba:
                dev = StatePool(f"{name}.device", dev_cap, config.mamba_width, dtype, self.device)
                host = StatePool(
                    f"{name}.host", host_cap, config.mamba_width, dtype, self.host_device, pin,
                    compact=True,
                )
            else:
                dev = KVPool(f"{name}.device", dev_cap, ps, config.kv_width, dtype, self.device)
                host = KVPool(
                    f"{name}.host", host_cap, ps, config.kv_width, dtype, self.host_device, pin,
                    compact=True,
                )
            self._by_key[(comp, Tier.DEVICE)] = dev
            self._by_key[(comp, Tier.HOST)] = host

    def add(self, component: type, device: Pool, host: Pool) -> None:
        """Add the pools of a component beyond the config's (`ComponentSet.register` adds its store)."""
        if (component, Tier.DEVICE) in self._by_key:
            raise InvalidArgumentError(f"component {component.__name__} already has pools in this cache")
        self._by_key[(component, Tier.DEVICE)] = device
        self._by_key[(component, Tier.HOST)] = host

    def pool(self, component: type, tier: Tier) -> Pool:
        try:
            return self._by_key[(component, tier)]
        except KeyError:
            raise InvalidArgumentError(
                f"component {component.__name__} has no {tier.value} pool in this cache "
                f"(enabled: {[c.__name__ for c in self.config.components]})"
            ) from None

    def device_pool(self, component: type) -> Pool:
        return self.pool(component, Tier.DEVICE)

    def host_pool(self, component: type) -> Pool:
        return self.pool(component, Tier.HOST)

    def pools(self) -> list[Pool]:
        return list(self._by_key.values())

    def _index(self, slots: Sequence[int], device: torch.device) -> torch.Tensor:
        if isinstance(slots, array) and slots:
            return torch.frombuffer(slots, dtype=torch.int32).to(device, torch.long)
        if slots and type(slots) is list:
            return torch.frombuffer(array("q", slots), dtype=torch.long).to(device)
        return torch.tensor(slots, dtype=torch.long, device=device)

    def copy(self, op: CopyOp) -> None:
        """Perform one copy now, reading the source rows as they are at this moment."""
        if not op.src:
            return
        src = self.pool(op.component, op.src_tier).data
        dst = self.pool(op.component, op.dst_tier).data
        rows = src.index_select(0, self._index(op.src, src.device))
        if rows.device != dst.device:
            rows = rows.to(dst.device)
        dst.index_copy_(0, self._index(op.dst, dst.device), rows)

    def copy_async(self, op: CopyOp, stream: torch.cuda.Stream) -> Callable[[], None]:
        """Enqueue one copy on a CUDA side stream; return its finisher.

        Record an event on `stream` after this call; once the event completes,
        call the finisher (it scatters device->host rows into the host pool and
        drops the pinned staging buffer) and only then ack the job.
        """
        src = self.pool(op.component, op.src_tier).data
        dst = self.pool(op.component, op.dst_tier).data
        if not op.src:
            return _nothing
        if src.device == dst.device:
            with torch.cuda.stream(stream):
                rows = src.index_select(0, self._index(op.src, src.device))
                dst.index_copy_(0, self._index(op.dst, dst.device), rows)
            return _nothing
        if src.device.type == "cpu":
            staged = src.index_select(0, self._index(op.src, src.device)).pin_memory()
            with torch.cuda.stream(stream):
                moved = staged.to(dst.device, non_blocking=True)
                dst.index_copy_(0, self._index(op.dst, dst.device), moved)

            def keep_alive() -> None:
                del staged_ref[:]

            staged_ref = [staged, moved]
            return keep_alive
        with torch.cuda.stream(stream):
            gathered = src.index_select(0, self._index(op.src, src.device))
            host_rows = torch.empty(
                gathered.shape, dtype=gathered.dtype, device="cpu", pin_memory=True
            )
            host_rows.copy_(gathered, non_blocking=True)
        dst_index = self._index(op.dst, dst.device)

        def scatter() -> None:
            dst.index_copy_(0, dst_index, host_rows)
            del gathered_ref[:]

        gathered_ref = [gathered]
        return scatter

    def write(self, component: type, tier: Tier, slots: Sequence[int], data: torch.Tensor) -> None:
        """Store rows (shape `[len(slots), *row_shape]`) into the given slots."""
        pool = self.pool(component, tier)
        expected = (len(slots), *pool.row_shape)
        if tuple(data.shape) != expected:
            raise InvalidArgumentError(
                f"pool {pool.name}: data shape {tuple(data.shape)} != {expected}"
            )
        pool.data.index_copy_(
            0, self._index(slots, pool.data.device), data.to(pool.data.device, pool.data.dtype)
        )

    def read(self, component: type, tier: Tier, slots: Sequence[int]) -> torch.Tensor:
        """A CPU copy of the rows in `slots`."""
        pool = self.pool(component, tier)
        return pool.data.index_select(0, self._index(slots, pool.data.device)).cpu()

    def stats(self) -> dict[str, PoolStats]:
        out: dict[str, PoolStats] = {}
        for pool in self._by_key.values():
            a = pool.alloc
            out[pool.name] = PoolStats(a.capacity, a.free_count, a.used_count, a.quarantined_count)
        return out




def _nothing() -> None:
    return None
