"""Tree core "unicache"'s metrics in SGLang's own ``/metrics``: the multiprocess registry SGLang's server reads.

As for tree core "leases" (`tests/integrations/sglang/test_metrics.py`): the
scheduler side runs in a subprocess with ``PROMETHEUS_MULTIPROC_DIR`` set
(it must be before prometheus_client is imported) and SGLang builds the
cache with ``enable_metrics``; the test reads the directory the way
SGLang's server does. A load-back in flight shows as live leases of both
tiers (``full``: its device lock; ``fullhost``: its load-back pin and host
lock), by owner kind; after its ack they are gone, each hold time observed;
a refused load-back is counted by reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[4]

SCHEDULER = """
import functools, json, logging, os, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from unicache.integrations.sglang.cpu import install_cpu_shims
install_cpu_shims()
from sglang.srt.runtime_context import get_parallel
get_parallel().override_permanently(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1)
import unicache.integrations.sglang.workload as workload
workload.CacheInitParams = functools.partial(workload.CacheInitParams, enable_metrics=True)
from sglang.srt.mem_cache.base_prefix_cache import EvictParams
from tests.integrations.sglang.chains import D, X, insert_tokens, start_load_back
from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families

def served():
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=os.environ["PROMETHEUS_MULTIPROC_DIR"])
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            if s.name == "unicache_leases_live" and s.value:
                key = s.labels["component"] + "/" + s.labels["owner_kind"]
                out[key] = out.get(key, 0) + s.value
    return out

setup = workload.build_cache(backend="unicache", mamba=False, device_tokens=256, max_context_len=512)
cache, core = setup.cache, setup.cache.tree_core
assert isinstance(core, UnicacheTreeCore) and core.metrics is not None and core.ledger.clock is not None
assert cache.metrics_collector is not None
cache.load_back_threshold = 1
insert_tokens(setup, X)
insert_tokens(setup, D)
cache.evict_for_alloc(EvictParams(num_tokens=256))
assert start_load_back(setup, D, 1)[3]
core.metrics.publish()
first = {"served_live": served(), "live": core.ledger.live_count}
cache.ready_to_load_host_cache()
cache.loading_check()
cache.load_back_threshold = 1000
insert_tokens(setup, list(range(900, 940)))
cache.evict_for_alloc(EvictParams(num_tokens=256))
assert start_load_back(setup, list(range(900, 940)), 2)[2] == 0
core.metrics.publish()
core.metrics.stop()
print(json.dumps({**first, "acquired": core.ledger.acquired, "released": core.ledger.released,
                  "acks": core.record.write_through_acks + core.record.load_back_acks}))
"""


def test_the_unicache_core_registers_in_sglangs_multiprocess_metrics(tmp_path: Path) -> None:
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prom"), PYTHONPATH=str(ROOT),
               UNICACHE_SGLANG_DUMP_DIR=str(tmp_path / "dumps"))
    (tmp_path / "prom").mkdir()
    proc = subprocess.run([sys.executable, "-c", SCHEDULER], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    core = json.loads(proc.stdout.strip().splitlines()[-1])
    assert core["served_live"] == {"full/device lock": 1, "fullhost/host lock": 1, "fullhost/load-back": 1}
    assert core["live"] == 3
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(tmp_path / "prom"))
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    base = (("cache_type", "UnicacheTreeCore"), ("dp_rank", "0"), ("pp_rank", "0"), ("tp_rank", "0"))

    def value(name: str, **labels: str) -> float:
        want = tuple(sorted((*base, *labels.items())))
        return samples[(name, want)]

    ledger = "sglang tree core 'unicache'"
    assert sum(v for (name, labels), v in samples.items() if name == "unicache_leases_live") == 0
    assert value("unicache_leases_acquired_total", ledger=ledger) == core["acquired"] == core["released"]
    held = sum(v for (name, labels), v in samples.items()
               if name == "unicache_lease_hold_seconds_count" and ("ledger", ledger) in labels)
    assert held == core["released"]
    assert value("unicache_acks_total", outcome="ok") == core["acks"] > 0
    assert value("unicache_refusals_total", op="load_back", reason="threshold_or_quota", component="full") == 1
    assert value("unicache_operations_total", op="load_back") == 1
    assert value("unicache_transfers_in_flight") == 0


def test_in_one_process_the_core_registers_a_collector_read_at_scrape_time() -> None:
    from sglang.srt.mem_cache.base_prefix_cache import EvictParams
    from sglang.srt.runtime_context import get_parallel

    from tests.integrations.sglang.chains import D, X, insert_tokens, start_load_back
    from unicache.integrations.sglang.treecore.core import UnicacheTreeCore
    from unicache.integrations.sglang.treecore.metrics import register_core_metrics
    from unicache.integrations.sglang.workload import build_cache

    assert not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    setup = build_cache(backend="unicache", mamba=False, device_tokens=256, max_context_len=512)
    cache, core = setup.cache, setup.cache.tree_core
    assert isinstance(core, UnicacheTreeCore) and core.metrics is None
    registry = CollectorRegistry()
    with get_parallel().override(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1):
        assert register_core_metrics(core, registry=registry) is None

    def live() -> dict[str, float]:
        out: dict[str, float] = {}
        for fam in text_string_to_metric_families(generate_latest(registry).decode()):
            for s in fam.samples:
                if s.name == "unicache_leases_live":
                    out[s.labels["component"]] = out.get(s.labels["component"], 0) + s.value
        return out

    assert live() == {"full": 0, "fullhost": 0}
    cache.load_back_threshold = 1
    insert_tokens(setup, X)
    insert_tokens(setup, D)
    cache.evict_for_alloc(EvictParams(num_tokens=256))
    assert start_load_back(setup, D, 1)[3]
    assert live() == {"full": 1, "fullhost": 2} and core.ledger.live_count == 3
    cache.ready_to_load_host_cache()
    cache.loading_check()
    assert live() == {"full": 0, "fullhost": 0} and core.ledger.live_count == 0
    cache.release_host_resources()
