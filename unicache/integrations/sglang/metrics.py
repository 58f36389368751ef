"""Our metrics inside SGLang's own ``/metrics``: a registration any tree-core backend can call.

SGLang 0.5.23 serves Prometheus in multiprocess mode: with ``--enable-metrics``
the launcher sets ``PROMETHEUS_MULTIPROC_DIR`` (``sglang.srt.utils.common.
set_prometheus_multiproc_dir``) before any process imports prometheus_client,
every process's metric objects write their values to files there, and the
HTTP server answers ``/metrics`` from a ``multiprocess.MultiProcessCollector``
over those files (``add_prometheus_middleware``). A custom collector in the
scheduler process is never read there, so `register_sglang_metrics` mirrors
our families into prometheus_client objects of the process that owns the
cache: counters by their increase (a series is made when first seen, so a
counter still at 0 is shown as 0, not left out), gauges as ``mostrecent`` (a labelled
series that left the snapshot, say no lock leases of one owner kind, is
set to 0: a multiprocess file cannot forget it), a histogram as
``_bucket`` (with ``le``), ``_sum`` and ``_count`` gauges that PromQL's
``histogram_quantile`` reads as usual. It publishes every `interval` seconds
on a daemon thread (reads only: lease registries are copied, counters are
ints) and on demand (`publish()`). Without ``PROMETHEUS_MULTIPROC_DIR`` (one
process) it registers a collector on prometheus_client's default registry
instead, read at scrape time.

`LeaseTreeCore` (backend ``"leases"``) calls it when SGLang builds the cache
with metrics on (``CacheInitParams.enable_metrics``); another backend passes
its own source (for one using our `UniCache`:
``lambda: unicache.metrics.cache_families(cache)``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Mapping

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from unicache.metrics.exporter import MetricsSource, prometheus_families
from unicache.metrics.families import Family

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


class _LiveCollector(Collector):
    """Single-process SGLang: our families, built when scraped."""

    def __init__(self, source: MetricsSource, labels: Mapping[str, str]) -> None:
        self.source = source
        self.labels = dict(labels)

    def collect(self) -> Iterator[Metric]:
        yield from prometheus_families(with_labels(self.source(), self.labels))


def with_labels(families: list[Family], labels: Mapping[str, str]) -> list[Family]:
    """`families` with SGLang's constant labels (cache type, ranks) added to every sample."""
    names = tuple(labels)
    values = tuple(str(v) for v in labels.values())
    out: list[Family] = []
    for fam in families:
        copy = Family(fam.name, fam.kind, fam.help, fam.labelnames + names)
        copy.samples = [(lv + values, v) for lv, v in fam.samples]
        copy.histograms = [type(h)(h.labels + values, h.buckets, h.total) for h in fam.histograms]
        out.append(copy)
    return out


class SGLangMetrics:
    """The mirror of one source into this process's prometheus_client objects (multiprocess mode)."""

    def __init__(self, source: MetricsSource, labels: Mapping[str, str]) -> None:
        self.source = source
        self.labels = dict(labels)
        self.published = 0
        self._counters: dict[str, Counter] = {}
        self._gauges: dict[str, Gauge] = {}
        self._last: dict[tuple[str, tuple[str, ...]], float] = {}
        self._shown: set[tuple[str, tuple[str, ...]]] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publish(self) -> None:
        """Mirror the source's families now."""
        with self._lock:
            shown: set[tuple[str, tuple[str, ...]]] = set()
            for fam in with_labels(self.source(), self.labels):
                if fam.kind == "counter":
                    self._counter(fam)
                elif fam.kind == "gauge":
                    gauge = self._gauge(fam.name, fam.help, fam.labelnames)
                    for values, value in fam.samples:
                        gauge.labels(*values).set(value)
                        shown.add((fam.name, values))
                else:
                    self._histogram(fam)
            for name, values in self._shown - shown:
                self._gauges[name].labels(*values).set(0.0)
            self._shown = shown
            self.published += 1

    def _counter(self, fam: Family) -> None:
        metric = self._counters.get(fam.name)
        if metric is None:
            metric = self._counters[fam.name] = Counter(fam.name, fam.help, fam.labelnames, registry=None)
        for values, value in fam.samples:
            key = (fam.name, values)
            child = metric.labels(*values)
            delta = value - self._last.get(key, 0.0)
            if delta > 0:
                child.inc(delta)
                self._last[key] = value

    def _gauge(self, name: str, text: str, labelnames: tuple[str, ...]) -> Gauge:
        metric = self._gauges.get(name)
        if metric is None:
            metric = self._gauges[name] = Gauge(name, text, labelnames, registry=None,
                                                multiprocess_mode="mostrecent")
        return metric

    def _histogram(self, fam: Family) -> None:
        buckets = self._gauge(f"{fam.name}_bucket", fam.help, fam.labelnames + ("le",))
        total = self._gauge(f"{fam.name}_sum", fam.help, fam.labelnames)
        count = self._gauge(f"{fam.name}_count", fam.help, fam.labelnames)
        for sample in fam.histograms:
            for bound, n in sample.buckets:
                le = "+Inf" if bound == float("inf") else repr(bound)
                buckets.labels(*sample.labels, le).set(n)
            total.labels(*sample.labels).set(sample.total)
            count.labels(*sample.labels).set(sample.buckets[-1][1] if sample.buckets else 0)

    def start(self, interval: float) -> None:
        """Publish every `interval` seconds on a daemon thread until `stop()`."""

        def run() -> None:
            while not self._stop.wait(interval):
                self.publish()

        self._thread = threading.Thread(target=run, name="unicache-metrics", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def register_sglang_metrics(source: MetricsSource, labels: Mapping[str, str], *,
                            interval: float = 1.0, start: bool = True,
                            registry: CollectorRegistry = REGISTRY) -> SGLangMetrics | None:
    """Make `source`'s families appear in SGLang's ``/metrics`` (see the module docstring).

    Returns the multiprocess mirror (already published once, and publishing
    every `interval` seconds when `start`), or None when a collector was
    registered on `registry` (default: prometheus_client's) instead: one process.
    """
    if not os.environ.get(MULTIPROC_ENV):
        registry.register(_LiveCollector(source, labels))
        return None
    mirror = SGLangMetrics(source, labels)
    mirror.publish()
    if start:
        mirror.start(interval)
    return mirror
