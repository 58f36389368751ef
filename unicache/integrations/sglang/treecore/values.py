"""Index values across the boundary: SGLang's int64 tensors in, unicache's int lists and arrays out and back.

The store keeps the values exactly as handed in (one per token); these are
the only conversions, and they are part of the measured cost. Host values
are kept as `array("q")` (int64, as SGLang's host indices are): a tensor
converts to one through its bytes (3.0 us for 300 values, where Python
ints cost 10.1) and back by sharing them (0.8 us, where an int32 round trip
cost 3.0); `benchmarks/bench_sglang_methods.py` times the methods that
convert.
"""

from __future__ import annotations

from array import array

import torch


def id_list(t: torch.Tensor) -> list[int]:
    """The values of a 1-D index tensor, as a list of ints."""
    out: list[int] = t.tolist()
    return out


def host_array(t: torch.Tensor) -> array[int]:
    """The values of a 1-D host index tensor, as a fresh int64 `array("q")` (a copy of its bytes)."""
    if t.dtype != torch.int64 or t.device.type != "cpu":
        t = t.to(device="cpu", dtype=torch.int64)
    return array("q", t.numpy().tobytes())


def device_tensor(values: list[int] | array[int], device: torch.device) -> torch.Tensor:
    """An int64 tensor of `values` on `device` (SGLang's device values are int64).

    Through a fresh `array("q")` the tensor owns (`torch.frombuffer`): about a
    third of `torch.tensor(list)`'s cost for a few hundred values.
    """
    if not len(values):
        return torch.empty((0,), dtype=torch.int64, device=device)
    t = torch.frombuffer(array("q", values), dtype=torch.int64)
    return t if device.type == "cpu" else t.to(device)


def host_tensor(values: array[int]) -> torch.Tensor:
    """An int64 CPU tensor over host `values` (an `array("q")`, see `host_array`), sharing its memory.

    For arrays that left the store (values handed back) or were made for the
    call (a load-back's gathered values): nothing writes them afterwards, and
    while the tensor lives the array cannot be resized.
    """
    if values.typecode != "q":
        raise TypeError(f"host_tensor: host values are array('q'), got array({values.typecode!r})")
    return torch.frombuffer(values, dtype=torch.int64) if len(values) else torch.empty((0,), dtype=torch.int64)
