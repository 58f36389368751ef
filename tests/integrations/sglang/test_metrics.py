"""Our metrics in SGLang's own ``/metrics``: the multiprocess registry SGLang's HTTP server reads.

SGLang serves metrics from ``PROMETHEUS_MULTIPROC_DIR`` through
``multiprocess.MultiProcessCollector`` (``add_prometheus_middleware``), which
must be set before prometheus_client is imported: so the scheduler side runs
in a subprocess with the variable set, and the test reads the directory the
way SGLang's server does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[3]

SCHEDULER = """
import functools, json, logging, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from unicache.integrations.sglang.cpu import install_cpu_shims
install_cpu_shims()
from sglang.srt.runtime_context import get_parallel
get_parallel().override_permanently(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)
import unicache.integrations.sglang.workload as workload
workload.CacheInitParams = functools.partial(workload.CacheInitParams, enable_metrics=True)
from tests.integrations.sglang.chains import D, start_load_back, warm_chain
from unicache.integrations.sglang.cache import LeaseUnifiedRadixCache
from unicache.integrations.sglang.core import LeaseTreeCore
setup = warm_chain("leases", LeaseUnifiedRadixCache)
core = setup.cache.tree_core
assert isinstance(core, LeaseTreeCore) and core.metrics is not None
assert setup.cache.metrics_collector is not None
start_load_back(setup, D, 1)
core.metrics.publish()
first = {"live": core.ledger.live_count, "locks": core.lock_ledger.live_count, "acquired": core.ledger.acquired}
assert first["live"] > 0 and first["locks"] > 0
import os
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families
registry = CollectorRegistry()
multiprocess.MultiProcessCollector(registry, path=os.environ["PROMETHEUS_MULTIPROC_DIR"])
first["served_live"] = {ledger: sum(s.value for fam in text_string_to_metric_families(generate_latest(registry).decode())
                                    for s in fam.samples if s.name == "unicache_leases_live"
                                    and s.labels["ledger"] == ledger)
                        for ledger in ("sglang-tree-core", "sglang-tree-locks")}
setup.cache.ready_to_load_host_cache()
setup.cache.loading_check()
core.metrics.publish()
core.metrics.stop()
print(json.dumps({**first, "released": core.ledger.released}))
"""


def test_the_lease_core_registers_in_sglangs_multiprocess_metrics(tmp_path: Path) -> None:
    """Built by SGLang's own cache with ``enable_metrics`` (next to SGLang's RadixCacheMetricsCollector):
    the core registers itself; what the directory says after the ack is checked against the core."""
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", SCHEDULER], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    core = json.loads(proc.stdout.strip().splitlines()[-1])
    assert core["live"] > 0
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path))
    text = generate_latest(registry).decode()
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    base = (("cache_type", "LeaseTreeCore"), ("dp_rank", "0"), ("pp_rank", "0"), ("tp_rank", "0"))

    def live(ledger: str) -> float:
        return sum(v for (name, labels), v in samples.items()
                   if name == "unicache_leases_live" and ("ledger", ledger) in labels
                   and all(item in labels for item in base))

    assert core["served_live"] == {"sglang-tree-core": core["live"], "sglang-tree-locks": core["locks"]}
    core_labels = tuple(sorted((("ledger", "sglang-tree-core"), *base)))
    assert live("sglang-tree-core") == live("sglang-tree-locks") == 0
    assert samples[("unicache_leases_acquired_total", core_labels)] == core["acquired"] == core["released"]
    assert samples[("unicache_leases_released_total", core_labels)] == core["released"]
    for zero in ("revoked", "leaked", "stale_settled"):  # counters never increased are shown, at 0
        assert samples[(f"unicache_leases_{zero}_total", core_labels)] == 0
    held = sum(v for (name, labels), v in samples.items()
               if name == "unicache_lease_hold_seconds_count" and ("ledger", "sglang-tree-core") in labels)
    assert held == core["released"]
    assert any(name == "unicache_transfers_in_flight" and v == 0 for (name, _), v in samples.items())


def test_in_one_process_the_core_registers_a_collector_read_at_scrape_time() -> None:
    from sglang.srt.runtime_context import get_parallel

    from tests.integrations.sglang.chains import D, start_load_back, warm_chain
    from unicache.integrations.sglang.cache import LeaseUnifiedRadixCache
    from unicache.integrations.sglang.core import LeaseTreeCore

    assert not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    setup = warm_chain("leases", LeaseUnifiedRadixCache)
    core = setup.cache.tree_core
    assert isinstance(core, LeaseTreeCore)
    registry = CollectorRegistry()
    with get_parallel().override(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1):
        assert core.register_metrics(registry=registry) is None

    def live() -> float:
        text = generate_latest(registry).decode()
        return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                   if s.name == "unicache_leases_live" and s.labels["ledger"] == "sglang-tree-core")

    assert live() == 0
    start_load_back(setup, D, 1)
    assert live() == core.ledger.live_count > 0
    setup.cache.ready_to_load_host_cache()
    setup.cache.loading_check()
    assert live() == core.ledger.live_count == core.lock_ledger.live_count == 0
