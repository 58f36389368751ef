"""Lock counters as a guarded view: only the lease core's lock operations write them.

On the real 0.5.23 cache (Full+Mamba chain root -> X -> D), strict mode (on
for every test, see conftest): SGLang's readers still read plain ints; a
write from anywhere else raises `LockCounterWriteError` naming node and
component and leaves the counter as it was; after a whole harness replay,
every counter equals what the live leases stand for. Default mode keeps
SGLang's plain `ComponentData`.
"""

from __future__ import annotations

import pytest
from sglang.srt.mem_cache.unified_cache.components import ComponentType
from sglang.srt.mem_cache.unified_cache.components.base import ComponentData

from tests.integrations.sglang.chains import D, X, lease_core, lock_counters, node_of, warm_chain
from unicache.integrations.sglang.errors import LockCounterWriteError
from unicache.integrations.sglang.lockcore import LockLeaseCore
from unicache.integrations.sglang.workload import build_cache, gen_workload, pool_sizes, replay

FULL, MAMBA = ComponentType.FULL, ComponentType.MAMBA


def test_reads_are_ints_and_stray_writes_raise_naming_node_and_component() -> None:
    setup = warm_chain("leases")
    core, cache = lease_core(setup), setup.cache
    d, x = node_of(setup, D), node_of(setup, X)
    receipt = cache.inc_lock_ref(d).to_dec_params()
    before = lock_counters(core)
    cd = core.node_by_id(x).component_data[FULL]
    assert type(cd.lock_ref) is int and cd.lock_ref == 1
    with pytest.raises(LockCounterWriteError, match=rf"node {x} component 0: lock_ref 1 -> 0"):
        cd.lock_ref -= 1
    with pytest.raises(LockCounterWriteError, match=rf"node {d} component 2: host_lock_ref 0 -> 1"):
        core.node_by_id(d).component_data[MAMBA].host_lock_ref = 1
    with pytest.raises(LockCounterWriteError, match=rf"node {core.root_node.id} component 0"):
        core.root_node.component_data[FULL].lock_ref = 0
    assert lock_counters(core) == before, "a refused write moves nothing"
    cache.sanity_check()
    cache.dec_lock_ref(d, receipt)
    cache.sanity_check()


@pytest.mark.parametrize("mamba", [False, True], ids=["full", "full+mamba"])
def test_no_drift_after_a_replay(mamba: bool) -> None:
    """Every lock, host lock, split and reset of a harness replay went through the gate."""
    reqs, unique = gen_workload(1, sessions=24)
    device, ctx = pool_sizes(reqs, unique)
    setup = build_cache(backend="leases", mamba=mamba, device_tokens=device, max_context_len=ctx)
    core = lease_core(setup)
    replay(setup, reqs, check_every=10, ack_every=3)
    assert core.counter_gate.open == 0
    assert not core.lock_problems()
    guarded = type(core.root_node.component_data[FULL])
    assert guarded is not type(core.root_node.component_data[ComponentType.SWA])
    assert all(type(n.component_data[FULL]) is guarded for n in core._collect_all_nodes())
    setup.cache.reset()
    assert core.counter_gate.open == 0 and type(core.root_node.component_data[FULL]) is guarded
    setup.cache.sanity_check()


def test_default_mode_keeps_sglang_component_data(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LockLeaseCore, "strict_counters", False)
    setup = warm_chain("leases")
    core = lease_core(setup)
    assert all(type(cd) is ComponentData for n in core._collect_all_nodes() for cd in n.component_data)
    monkeypatch.setenv("UNICACHE_SGLANG_STRICT_LOCK_COUNTERS", "1")
    strict = lease_core(warm_chain("leases"))
    assert type(strict.root_node.component_data[FULL]) is not ComponentData
