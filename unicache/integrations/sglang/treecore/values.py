"""Index values across the boundary: SGLang's int64 tensors in, unicache's int lists and arrays out and back.

The store keeps the values exactly as handed in (one per token); these are
the only conversions, and they are part of the measured cost.
"""

from __future__ import annotations

from array import array

import torch


def id_list(t: torch.Tensor) -> list[int]:
    """The values of a 1-D index tensor, as a list of ints."""
    out: list[int] = t.tolist()
    return out


def host_array(t: torch.Tensor) -> array[int]:
    """The values of a 1-D host index tensor, compact."""
    return array("i", t.tolist())


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
    """An int64 CPU tensor of host `values` (SGLang's host indices live on the CPU)."""
    return torch.frombuffer(values, dtype=torch.int32).to(torch.int64) if len(values) else torch.empty(
        (0,), dtype=torch.int64)
