"""CPU stand-ins that let SGLang 0.5.23's cache and HiCache controller run without a GPU.

Adapted from the project's SGLang CPU harness (shared/bench/sglang_harness.py,
``_install_cpu_shims``): host-pool pinning is a no-op and the sgl_kernel
transfer ops become torch index copies. Used by the tests and the benchmark;
never by a server (which has the real kernels).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from sglang.srt.server_args import ServerArgs

_COPY_BYTES = [True]


def transfer_kv_direct(
    src_layers: Sequence[torch.Tensor],
    dst_layers: Sequence[torch.Tensor],
    src_indices: torch.Tensor,
    dst_indices: torch.Tensor,
    page_size: int = 1,
    **_: object,
) -> None:
    """dst[dst_indices] = src[src_indices], layer by layer."""
    if not _COPY_BYTES[0]:
        return
    for s, d in zip(src_layers, dst_layers):
        d[dst_indices.to(d.device)] = s[src_indices.to(s.device)]


def transfer_kv_all_layer_direct_lf_pf(
    src_ptrs: Sequence[torch.Tensor],
    dst_ptrs: Sequence[torch.Tensor],
    src_indices: torch.Tensor,
    dst_indices: torch.Tensor,
    page_size: int = 1,
    **_: object,
) -> None:
    """Layer-first device tensors -> page-first host buffers (pages, layers, page_size, ...)."""
    if not _COPY_BYTES[0]:
        return
    hi = dst_indices.to(dst_ptrs[0].device)
    pages, offsets = hi // page_size, hi % page_size
    layers = dst_ptrs[0].shape[1]
    for j, host in enumerate(dst_ptrs):
        for layer in range(layers):
            src = src_ptrs[j * layers + layer]
            host[pages, layer, offsets] = src[src_indices.to(src.device)].to(host.device)


def transfer_kv_per_layer_direct_pf_lf(
    src_ptrs: Sequence[torch.Tensor],
    dst_ptrs: Sequence[torch.Tensor],
    src_indices: torch.Tensor,
    dst_indices: torch.Tensor,
    layer_id: int,
    page_size: int = 1,
    **_: object,
) -> None:
    """One layer of page-first host buffers -> layer-first device tensors."""
    if not _COPY_BYTES[0]:
        return
    hi = src_indices.to(src_ptrs[0].device)
    pages, offsets = hi // page_size, hi % page_size
    for host, dev in zip(src_ptrs, dst_ptrs):
        dev[dst_indices.to(dev.device)] = host[pages, layer_id, offsets].to(dev.device)


def _no_host_register(*_: object, **__: object) -> None:
    return None


def install_cpu_shims(*, copy_bytes: bool = True) -> None:
    """Patch SGLang's host pools for CPU (idempotent).

    `copy_bytes=False` makes the transfers move nothing (the harness's
    `--transfer noop`): timings are then bookkeeping only.
    """
    _COPY_BYTES[0] = copy_bytes
    import sglang.srt.mem_cache.pool_host.common as common
    import sglang.srt.mem_cache.pool_host.mamba as host_mamba
    import sglang.srt.mem_cache.pool_host.mha as host_mha

    setattr(common, "_cuda_host_register", _no_host_register)
    for mod in (host_mha, host_mamba):
        setattr(mod, "transfer_kv_direct", transfer_kv_direct)
        setattr(mod, "transfer_kv_all_layer_direct_lf_pf", transfer_kv_all_layer_direct_lf_pf)
        setattr(mod, "transfer_kv_per_layer_direct_pf_lf", transfer_kv_per_layer_direct_pf_lf)


def server_args(**fields: object) -> ServerArgs:
    """`ServerArgs(**fields)`, typed.

    SGLang assembles `ServerArgs`' constructor from field namespaces at import
    time, so mypy sees a class without parameters; this one call site is
    where that dynamic signature is accepted.
    """
    make: Callable[..., ServerArgs] = ServerArgs
    return make(**fields)
