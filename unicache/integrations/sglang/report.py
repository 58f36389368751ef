"""The reset report: before SGLang resets a cache, its own sanity check and the leases still live, as JSON.

With ``UNICACHE_SGLANG_RESET_REPORT=<path>`` in a server's environment, the
plugin (`plugin.register`) registers a BEFORE hook on
`UnifiedRadixCache.reset` through SGLang's plugin hook registry
(`sglang.srt.plugins.hook_registry.HookRegistry`, applied by
`load_plugins()` in every server process). So for every tree core (SGLang's
``rust`` and ``python`` as well as ``leases`` and ``unicache``) and both cache
classes, each reset first appends one JSON object on one line to `path`
(`reset_report`): the cache's `sanity_check()` outcome (``"clean"`` or the
error it raised, type and message), the leases still live in the tree core
(``null`` for a core without leases), the device tokens still protected
(locked) and evictable, and the load-backs and write-throughs still in flight.

SGLang resets a cache on ``POST /flush_cache`` (only once the scheduler is
idle; ``/flush_cache?timeout=s`` waits up to `s` seconds for idle) and after
weight updates that flush it. Why at reset and not at exit: SGLang's launcher
stops its scheduler processes with SIGKILL, so nothing runs in the process
that owns the cache when the server stops; a flush right before stopping
gives the same picture while the cache is still there. A sanity check that
fails is reported, not raised: the reset goes on as it would without the hook.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Final, Optional

if TYPE_CHECKING:
    from sglang.srt.mem_cache.unified_cache.unified_tree_core_interface import UnifiedTreeCoreInterface
    from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache

RESET_REPORT_ENV: Final = "UNICACHE_SGLANG_RESET_REPORT"
RESET_TARGET: Final = "sglang.srt.mem_cache.unified_radix_cache.UnifiedRadixCache.reset"

_installed: list[str] = []


def live_leases(core: UnifiedTreeCoreInterface) -> Optional[int]:
    """Leases live in `core`: both ledgers of ``leases``, the one of ``unicache``; None for other cores."""
    from unicache.integrations.sglang.core import LeaseTreeCore
    from unicache.integrations.sglang.treecore.core import UnicacheTreeCore

    if isinstance(core, LeaseTreeCore):
        return core.ledger.live_count + core.lock_ledger.live_count
    if isinstance(core, UnicacheTreeCore):
        return core.ledger.live_count
    return None


def reset_report(cache: UnifiedRadixCache) -> dict[str, object]:
    """The report on `cache` as it stands: its sanity check run now, its leases, locks and transfers."""
    try:
        cache.sanity_check()
        sanity = "clean"
    except Exception as exc:  # the report's subject: any check failure, whatever its type
        sanity = f"{type(exc).__name__}: {exc}"
    core = cache.tree_core
    return {
        "pid": os.getpid(),
        "cache": type(cache).__name__,
        "tree_core": type(core).__name__,
        "sanity_check": sanity,
        "live_leases": live_leases(core),
        "protected_tokens": int(cache.protected_size()),
        "evictable_tokens": int(cache.evictable_size()),
        "ongoing_load_back": len(cache.ongoing_load_back),
        "ongoing_write_through": len(cache.ongoing_write_through),
    }


def append_report(path: str, report: dict[str, object]) -> None:
    """Append `report` to `path` as one JSON line, in one write (lines of several processes stay whole)."""
    line = (json.dumps(report, sort_keys=True) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def report_before_reset(cache: UnifiedRadixCache, *args: object, **kwargs: object) -> None:
    """The BEFORE hook: append `reset_report(cache)` to the path the hook was installed with.

    The cache's first reset is part of its construction (``__init__`` ends
    with it, before the cache has any transfer state): nothing is reported.
    """
    if not hasattr(cache, "ongoing_write_through"):
        return
    append_report(_installed[0], reset_report(cache))


def install_reset_report() -> bool:
    """Register `report_before_reset` with SGLang's hook registry if ``UNICACHE_SGLANG_RESET_REPORT`` is set.

    Idempotent (once per process); returns whether the hook is registered.
    An empty value is refused (`ValueError`) rather than read as unset.
    SGLang applies registered hooks at the end of `load_plugins()`.
    """
    if _installed:
        return True
    path = os.environ.get(RESET_REPORT_ENV)
    if path is None:
        return False
    if not path:
        raise ValueError(f"{RESET_REPORT_ENV} is set but empty; give the report file's path")
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    _installed.append(path)
    HookRegistry.register(RESET_TARGET, report_before_reset, HookType.BEFORE)
    return True
