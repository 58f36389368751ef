"""Prometheus metrics of a cache, from the counters its core keeps anyway (see docs/observability.md).

`families` builds metric snapshots (no prometheus import); `exporter`
serves them with `prometheus_client`.
"""

from unicache.metrics.families import Family, HistogramSample, cache_families, error_families, ledger_families, merge

__all__ = ["Family", "HistogramSample", "cache_families", "error_families", "ledger_families", "merge"]
