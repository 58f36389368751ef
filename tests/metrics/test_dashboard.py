"""docs/grafana/unicache.json queries only metrics a cache exports (the dashboard stays true to the code)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from leases import LeaseWatchdog
from unicache import CacheConfig, UniCache
from unicache.metrics import cache_families

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "unicache.json"


def _exported() -> set[str]:
    cache = UniCache(CacheConfig(device_tokens=16, mamba=True), clock=lambda: 0.0)
    names: set[str] = set()
    for fam in cache_families(cache, watchdog=LeaseWatchdog(cache.ledger, 1.0)):
        if fam.kind == "counter":
            names.add(f"{fam.name}_total")
        elif fam.kind == "histogram":
            names.update(f"{fam.name}_{part}" for part in ("bucket", "sum", "count"))
        else:
            names.add(fam.name)
    return names


def test_every_dashboard_query_names_an_exported_metric() -> None:
    doc = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"\bunicache_[a-z_]+", e)}
    assert used and used <= _exported(), used - _exported()
