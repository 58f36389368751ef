"""CPU stand-ins for SGLang 0.5.23's unit-test kit, and test-only inspected lease and "unicache" cores.

The kit builds caches on the accelerator with the ``kernel`` HiCache io
backend; here the device is the CPU, the io backend ``direct`` with the
``page_first_direct`` host layout, and the sgl_kernel copies are torch index
copies (`unicache.integrations.sglang.cpu`). The kit's `build_fixture` wants
a core implementing its inspection interface: `InspectedLeaseTreeCore`
combines the lease core with SGLang's own Python inspector. Every lease core
built in a test guards its lock counters (`strict_counters`), so a write
outside its lock operations fails the test at once. Tree core "unicache"
writes its dumps (on a failure, on SIGUSR1) under a temp dir of the test.
"""

from __future__ import annotations

import atexit
import logging
import warnings
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest

warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import sglang.test.kits.unified_radix_cache.fixtures as kit_fixtures  # noqa: E402
import sglang.test.kits.unified_radix_cache.mixins as kit_mixins  # noqa: E402
from sglang.srt.mem_cache.cache_init_params import CacheInitParams  # noqa: E402
from sglang.srt.mem_cache.unified_cache.components import ComponentType, TreeComponent  # noqa: E402
from sglang.srt.mem_cache.unified_cache.tree_core_registry import _TREE_CORE_REGISTRY  # noqa: E402
from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import (  # noqa: E402
    UnifiedTreeCoreInterface,
)
from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang.test.kits.unified_radix_cache.unified_tree_core_inspector import (  # noqa: E402
    UnifiedTreeCoreInspector,
)

import unicache.integrations.sglang  # noqa: E402,F401  (registers "leases")
from unicache.integrations.sglang.core import LeaseTreeCore  # noqa: E402
from unicache.integrations.sglang.lockcore import LockLeaseCore  # noqa: E402
from unicache.integrations.sglang.cpu import install_cpu_shims, server_args  # noqa: E402
from tests.integrations.sglang.treecore.inspector import InspectedUnicacheTreeCore  # noqa: E402


class InspectedLeaseTreeCore(LeaseTreeCore, UnifiedTreeCoreInspector):
    """The lease core plus SGLang's inspection interface, for the kit's fixtures only."""


def _inspected_lease_factory(
    params: CacheInitParams, components: dict[ComponentType, TreeComponent]
) -> UnifiedTreeCoreInterface:
    return InspectedLeaseTreeCore(params, components)


def _inspected_unicache_factory(
    params: CacheInitParams, components: dict[ComponentType, TreeComponent]
) -> UnifiedTreeCoreInterface:
    return InspectedUnicacheTreeCore(params, components)


def _cpu_server_args(**kwargs: object) -> ServerArgs:
    """The kit's `ServerArgs(...)` with the CPU HiCache io backend and host layout."""
    if kwargs.get("hicache_io_backend") == "kernel":
        kwargs["hicache_io_backend"] = "direct"
        kwargs.setdefault("hicache_mem_layout", "page_first_direct")
    return server_args(**kwargs)


@pytest.fixture(autouse=True)
def core_dump_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Tree core "unicache" writes its failure and SIGUSR1 dumps under the test's temp dir, never the work tree."""
    monkeypatch.setenv("UNICACHE_SGLANG_DUMP_DIR", str(tmp_path_factory.mktemp("core-dumps")))
    yield


@pytest.fixture(autouse=True)
def sglang_on_cpu() -> Iterator[None]:
    """Kit on CPU; backend "leases" built inspected, with strict lock counters; no atexit pins left behind."""
    install_cpu_shims()
    registered: list[Any] = []
    real_register = atexit.register

    def track(fn: Any, *a: Any, **k: Any) -> Any:
        registered.append(fn)
        return real_register(fn, *a, **k)

    with (
        mock.patch.object(kit_fixtures, "get_device", lambda: "cpu"),
        mock.patch.object(kit_mixins, "ServerArgs", _cpu_server_args),
        mock.patch.dict(_TREE_CORE_REGISTRY, {"leases": _inspected_lease_factory,
                                              "unicache": _inspected_unicache_factory}),
        mock.patch.object(atexit, "register", track),
        mock.patch.object(LockLeaseCore, "strict_counters", True),
    ):
        yield
    for fn in registered:
        atexit.unregister(fn)
