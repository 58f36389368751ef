"""Pure-torch stand-ins for what SGLang 0.5.23's server only has on an accelerator, for a CPU-only run.

SGLang's whole serving stack runs on a CPU with ``--device cpu`` and the
``torch_native`` attention backend, except for three things that exist only
as CUDA kernels or driver calls (and a host-RAM reserve sized for GPU
servers, `_patch_host_base`). Each is replaced right after its module is
imported, by an import hook (`install`, run from the ``sitecustomize`` next
to this module, which the server test puts on the server's PYTHONPATH).
Nothing is replaced where CUDA is available: there the real kernels run.
SGLang's CPU engine (``SGLANG_USE_CPU_ENGINE=1``) is not an alternative: it
needs a CPU build of ``sgl_kernel``, which no package index here offers.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Callable, Sequence
from typing import Final

import torch

ROTARY_MODULE: Final = "vllm._custom_ops"


def rotary_embedding(positions: torch.Tensor, query: torch.Tensor, key: torch.Tensor, head_size: int,
                     cos_sin_cache: torch.Tensor, is_neox: bool) -> None:
    """Rotate `query` and `key` in place by the cached cos/sin of `positions` (vLLM's op, in torch).

    Replaces ``vllm._custom_ops.rotary_embedding``, which SGLang's
    `RotaryEmbedding.__init__` imports when the platform is neither CUDA nor
    its CPU engine (``layers/rotary_embedding/base.py``) and calls from its
    forward. The arithmetic is SGLang's own `forward_native`: the first
    ``rotary_dim`` (the cache's width) features of each head rotate, Neox
    style (halves) or GPT-J style (even/odd pairs), the rest pass through.
    """
    rotary_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache.index_select(0, positions.flatten()).chunk(2, dim=-1)
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    for x in (query, key):
        heads = x.view(positions.numel(), -1, head_size)
        rot = heads[..., :rotary_dim]
        if is_neox:
            x1, x2 = rot.chunk(2, dim=-1)
        else:
            x1, x2 = rot[..., ::2], rot[..., 1::2]
        o1, o2 = x1 * cos - x2 * sin, x2 * cos + x1 * sin
        out = torch.cat((o1, o2), dim=-1) if is_neox else torch.stack((o1, o2), dim=-1).flatten(-2)
        rot.copy_(out)


def transfer_kv_direct(src_layers: Sequence[torch.Tensor], dst_layers: Sequence[torch.Tensor],
                       src_indices: torch.Tensor, dst_indices: torch.Tensor, page_size: int = 1) -> None:
    """``dst[dst_indices] = src[src_indices]`` for each layer buffer: HiCache's copy between tiers.

    Replaces ``transfer_kv_direct`` in ``mem_cache/pool_host/mha.py``, which
    0.5.23 imports only from ``sgl_kernel.kvcacheio`` (CUDA/ROCm) or the XPU
    wheel: on a CPU the name is never bound and the first backup raises
    `NameError`. With ``--hicache-io-backend direct --hicache-mem-layout
    layer_first`` this op is the only transfer the host pool makes, in both
    directions (device to host on backup, host to device on load-back).
    """
    for src, dst in zip(src_layers, dst_layers, strict=True):
        dst[dst_indices.to(dst.device)] = src[src_indices.to(src.device)]


def skip_host_register(buffer: torch.Tensor, registration_granularity_bytes: int | None = None) -> None:
    """Leave a host-pool buffer unregistered (it stays plain pageable memory).

    Replaces ``_cuda_host_register`` in ``mem_cache/pool_host/common.py``,
    which HiCache's host-pool allocator calls to pin the buffer with
    ``cudaHostRegister``; without an NVIDIA driver that call fails ("Found no
    NVIDIA driver"). Pinning only speeds up DMA, which a CPU run has none of.
    """


def stream_synchronize(stream: torch.cpu.Stream) -> None:
    """Nothing to wait for: CPU work on a `torch.cpu.Stream` is done when its call returns.

    Added as ``torch.cpu.Stream.synchronize``, which 0.5.23's
    ``mem_cache/l2_transfer.py`` calls on its error path and which torch's
    CPU stream stub lacks, so a failing transfer would raise `AttributeError`
    instead of its own error.
    """


TEST_HOST_RESERVE_BYTES: Final = 1 << 30


def _patch_host_base(module: types.ModuleType) -> None:
    """Reserve 1 GiB of host RAM beside a HiCache pool instead of 0.5.23's 10 GiB.

    Not an accelerator stand-in: ``mem_cache/pool_host/base.py`` refuses any
    host pool unless the machine's available RAM exceeds the pool plus
    ``HICACHE_HOST_MEMORY_RESERVE_BYTES`` (10 GiB), sized for GPU servers. The
    test's pool is a few MB; on a small CI machine whose other jobs use RAM
    the 10 GiB reserve alone made the launch fail ("Not enough host memory
    available ... -1.03 GB free").
    """
    setattr(module, "HICACHE_HOST_MEMORY_RESERVE_BYTES", TEST_HOST_RESERVE_BYTES)


def _patch_host_common(module: types.ModuleType) -> None:
    setattr(module, "_cuda_host_register", skip_host_register)


def _patch_host_mha(module: types.ModuleType) -> None:
    setattr(module, "transfer_kv_direct", transfer_kv_direct)


def _patch_l2_transfer(module: types.ModuleType) -> None:
    setattr(torch.cpu.Stream, "synchronize", stream_synchronize)


AFTER_IMPORT: Final[dict[str, Callable[[types.ModuleType], None]]] = {
    "sglang.srt.mem_cache.pool_host.base": _patch_host_base,
    "sglang.srt.mem_cache.pool_host.common": _patch_host_common,
    "sglang.srt.mem_cache.pool_host.mha": _patch_host_mha,
    "sglang.srt.mem_cache.l2_transfer": _patch_l2_transfer,
}


class _PatchingLoader(importlib.abc.Loader):
    """Runs the real loader, then the module's patch."""

    def __init__(self, real: importlib.abc.Loader, patch: Callable[[types.ModuleType], None]) -> None:
        self.real = real
        self.patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.real.exec_module(module)
        self.patch(module)


class _RotaryLoader(importlib.abc.Loader):
    """Makes ``vllm._custom_ops`` (and an empty ``vllm``) holding `rotary_embedding` only."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == "vllm":
            module.__path__ = []
        else:
            setattr(module, "rotary_embedding", rotary_embedding)


class StandInFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder applying the stand-ins as their modules load (only where CUDA is absent).

    ``vllm._custom_ops`` is provided only where no ``vllm`` is installed.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in ("vllm", ROTARY_MODULE):
            if torch.cuda.is_available() or importlib.machinery.PathFinder.find_spec("vllm") is not None:
                return None
            return importlib.machinery.ModuleSpec(fullname, _RotaryLoader(), is_package=fullname == "vllm")
        patch = AFTER_IMPORT.get(fullname)
        if patch is None or torch.cuda.is_available():
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


def install() -> None:
    """Put `StandInFinder` first on `sys.meta_path` (idempotent; inert where CUDA is available)."""
    if not any(isinstance(f, StandInFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, StandInFinder())
