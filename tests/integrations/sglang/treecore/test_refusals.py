"""What tree core "unicache" does not cover is refused with one line naming it and pointing to "leases"."""

from __future__ import annotations

import dataclasses
import re
from array import array

import pytest
from sglang.srt.mem_cache.base_prefix_cache import MatchPrefixParams
from sglang.srt.mem_cache.radix_cache import RadixKey
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_radix_cache import COMPONENT_REGISTRY
from sglang.srt.runtime_context import get_exec
from sglang.test.kits.unified_radix_cache.config import CONFIGS, CacheConfig
from sglang.test.kits.unified_radix_cache.fixtures import build_fixture

from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from unicache.integrations.sglang.treecore.errors import NamespacedKeyError, RefusedFeatureError
from unicache.integrations.sglang.treecore.refusals import refusal

FULL = next(c for c in CONFIGS if c.label == "FULL_ps1")
MAMBA = next(c for c in CONFIGS if c.label == "FULL_MAMBA_ps1")
SWA = next(c for c in CONFIGS if c.label == "FULL_SWA_ps1_sw4")
HYBRID = [c for c in CONFIGS if c.components == (ComponentType.FULL, ComponentType.SWA, ComponentType.MAMBA)][:1]


def _refused(match: str, cfg: CacheConfig = FULL, **kw: object) -> None:
    with pytest.raises(ValueError, match=match) as err:
        build_fixture(cfg, tree_core_backend="unicache", **kw)  # type: ignore[arg-type]
    msg = str(err.value)
    assert "\n" not in msg and msg.endswith("use tree core 'leases' (SGLANG_UNIFIED_RADIX_TREE_CORE_BACKEND=leases)")


@pytest.mark.parametrize("cfg", HYBRID, ids=[c.label for c in HYBRID])
def test_hybrid_components_are_refused_at_construction(cfg: CacheConfig) -> None:
    names = re.escape("+".join(c.name for c in cfg.components))
    _refused(rf"tree core 'unicache' does not support components {names} ", cfg)


def test_full_swa_is_covered_and_a_request_ring_refused() -> None:
    cache, _, _ = build_fixture(SWA, tree_core_backend="unicache")
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and core.swa is not None and core.swa.window == 4
    params = cache.cache_init_params
    assert refusal(params, {}) is None
    ring = dataclasses.replace(params, swa_gates_prefix_match=False)
    assert refusal(ring, {}) == "an SWA request ring (swa_gates_prefix_match=False)"
    with pytest.raises(ValueError, match=re.escape("an SWA request ring (swa_gates_prefix_match=False); use tree core")):
        UnicacheTreeCore(ring, {})


def test_full_mamba_is_covered_and_a_mamba_path_cap_refused() -> None:
    cache, _, _ = build_fixture(MAMBA, tree_core_backend="unicache")
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and core.mamba is not None
    params = cache.cache_init_params
    assert refusal(params, {}) is None
    with get_exec().mamba.override(mamba_max_states_per_path=2):
        assert refusal(params, {}) == "a Mamba path cap (--mamba-max-states-per-path)"
        with pytest.raises(ValueError, match=re.escape("a Mamba path cap (--mamba-max-states-per-path); use tree core")):
            UnicacheTreeCore(params, {})


def test_session_cache_custom_components_kv_events_and_policies_are_refused() -> None:
    _refused("--enable-session-radix-cache", enable_session_radix_cache=True)
    _refused("component_registry_override",
             component_registry_override={ComponentType.FULL: COMPONENT_REGISTRY[ComponentType.FULL]})
    _refused("KV cache events", enable_kv_cache_events=True)
    _refused("eviction policy 'lfu'", dataclasses.replace(FULL, eviction_policy="lfu"))


def test_features_switched_on_later_and_namespaced_keys_are_refused() -> None:
    cache, _, _ = build_fixture(FULL, tree_core_backend="unicache")
    core = cache.tree_core
    assert isinstance(core, UnicacheTreeCore)
    core.enable_storage = False  # SGLang's reset writes False: accepted
    with pytest.raises(RefusedFeatureError, match="a HiCache storage backend"):
        core.enable_storage = True
    with pytest.raises(RefusedFeatureError, match="the external cache linker"):
        core.enable_external_cache_linker = True
    with pytest.raises(RefusedFeatureError, match="buffer-only host memory"):
        core.set_host_memory_buffer_only()
    with pytest.raises(NamespacedKeyError, match="an extra_key or cache_salt namespace"):
        cache.match_prefix(MatchPrefixParams(key=RadixKey(array("q", [1, 2]), extra_key="lora-a")))
    assert not core.enable_storage and core.ledger.live_count == 0
