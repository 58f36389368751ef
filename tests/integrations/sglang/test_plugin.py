"""The server path: SGLang's own plugin loader registers "leases" and "unicache", and the env var selects one."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import logging, warnings
    warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
    from sglang.srt.mem_cache.unified_cache.tree_core_registry import registered_tree_core_backends
    assert "leases" not in registered_tree_core_backends(), "registered before the plugins ran"
    from sglang.srt.plugins import load_plugins
    load_plugins()
    assert "leases" in registered_tree_core_backends(), registered_tree_core_backends()
    from sglang.srt.mem_cache.registry import registered_radix_cache_backends
    assert "leases" in registered_radix_cache_backends(), registered_radix_cache_backends()
    from unicache.integrations.sglang.workload import build_cache
    from unicache.integrations.sglang.core import LeaseTreeCore
    setup = build_cache(backend=None, mamba=False, device_tokens=64, max_context_len=32)
    assert type(setup.cache.tree_core) is LeaseTreeCore, type(setup.cache.tree_core)
    print("OK", type(setup.cache.tree_core).__name__)
    """
)


def test_entry_point_registers_and_env_var_selects_the_lease_core() -> None:
    env = dict(os.environ, SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND="leases")
    env.pop("SGLANG_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("OK LeaseTreeCore")


UNICACHE_SCRIPT = textwrap.dedent(
    """
    import logging, warnings
    warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
    from sglang.srt.mem_cache.unified_cache.tree_core_registry import registered_tree_core_backends
    assert "unicache" not in registered_tree_core_backends(), "registered before the plugins ran"
    from sglang.srt.plugins import load_plugins
    load_plugins()
    assert "unicache" in registered_tree_core_backends(), registered_tree_core_backends()
    from unicache.integrations.sglang.workload import build_cache
    from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
    setup = build_cache(backend=None, mamba=False, device_tokens=64, max_context_len=32)
    assert type(setup.cache.tree_core) is UnicacheTreeCore, type(setup.cache.tree_core)
    hybrid = build_cache(backend=None, mamba=True, device_tokens=64, max_context_len=32)
    assert type(hybrid.cache.tree_core) is UnicacheTreeCore, type(hybrid.cache.tree_core)
    swa = build_cache(backend=None, mamba=False, swa_window=8, device_tokens=64, max_context_len=32)
    assert type(swa.cache.tree_core) is UnicacheTreeCore, type(swa.cache.tree_core)
    print("OK", type(setup.cache.tree_core).__name__)
    """
)


def test_entry_point_registers_and_env_var_selects_the_unicache_core() -> None:
    env = dict(os.environ, SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND="unicache")
    env.pop("SGLANG_PLUGINS", None)
    done = subprocess.run([sys.executable, "-c", UNICACHE_SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "OK UnicacheTreeCore"
