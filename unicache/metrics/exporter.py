"""Serving metric families with `prometheus_client`: a snapshot collector and an HTTP endpoint.

The cache is single-threaded and the HTTP server runs on its own thread, so
the scrape never reads the cache: the owner thread calls
`MetricsPublisher.publish()` at safe points (the replay loop after a step,
at most every `interval` seconds by its clock, and at the end), which builds
the families and swaps them in whole; `SnapshotCollector.collect()` (the
scrape) converts the latest snapshot. One scrape therefore always sees one
consistent instant (acquired = released + live + revoked + leaked holds
within it).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from unicache.metrics.families import Family

MetricsSource = Callable[[], list[Family]]
"""Builds the families of a cache now (on its owner thread)."""

MAX_PORT = 65535


class MetricsPortError(ValueError):
    """A `--metrics-port` that cannot be served: out of range, or the address refuses the bind (in use)."""


def prometheus_families(families: list[Family]) -> list[Metric]:
    """The prometheus_client form of `families` (a counter gets its ``_total``)."""
    out: list[Metric] = []
    for fam in families:
        labels = list(fam.labelnames)
        if fam.kind == "counter":
            counter = CounterMetricFamily(fam.name, fam.help, labels=labels)
            for values, value in fam.samples:
                counter.add_metric(list(values), value)
            out.append(counter)
        elif fam.kind == "gauge":
            gauge = GaugeMetricFamily(fam.name, fam.help, labels=labels)
            for values, value in fam.samples:
                gauge.add_metric(list(values), value)
            out.append(gauge)
        else:
            hist = HistogramMetricFamily(fam.name, fam.help, labels=labels)
            for sample in fam.histograms:
                buckets = [(_le(bound), float(n)) for bound, n in sample.buckets]
                hist.add_metric(list(sample.labels), buckets, sample.total)
            out.append(hist)
    return out


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class SnapshotCollector(Collector):
    """A prometheus collector serving the latest published snapshot (empty until the first)."""

    def __init__(self) -> None:
        self._families: list[Family] = []

    def replace(self, families: list[Family]) -> None:
        """Swap in a new snapshot (one reference assignment: atomic for the scraping thread)."""
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from prometheus_families(self._families)


class MetricsPublisher:
    """Builds snapshots from `source` on the owner thread, at most every `interval` seconds of `clock`."""

    __slots__ = ("source", "collector", "clock", "interval", "published", "_next")

    def __init__(self, source: MetricsSource, collector: SnapshotCollector, *,
                 clock: Callable[[], float], interval: float = 1.0) -> None:
        self.source = source
        self.collector = collector
        self.clock = clock
        self.interval = interval
        self.published = 0
        self._next = float("-inf")

    def maybe_publish(self) -> None:
        """Publish when `interval` has passed since the last snapshot (a clock read otherwise)."""
        now = self.clock()
        if now >= self._next:
            self._next = now + self.interval
            self.publish()

    def publish(self) -> None:
        """Build and swap in a snapshot now."""
        self.collector.replace(self.source())
        self.published += 1


class MetricsServer:
    """`/metrics` over HTTP on a thread of its own, serving one `SnapshotCollector`."""

    def __init__(self, collector: SnapshotCollector, server: WSGIServer, thread: threading.Thread) -> None:
        self.collector = collector
        self._server = server
        self._thread = thread

    @property
    def address(self) -> tuple[str, int]:
        """(host, port) actually bound (port 0 asks the system for a free one)."""
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{host}:{port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def check_port(port: int) -> int:
    """`port` if it is 0..65535 (0: any free port), else `MetricsPortError`."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise MetricsPortError(f"--metrics-port must be a port number in 0..{MAX_PORT} (0: any free port), "
                               f"got {port!r}")
    return port


def serve_metrics(port: int, addr: str = "127.0.0.1") -> MetricsServer:
    """Bind `addr:port` and serve an empty snapshot collector; refuse (MetricsPortError) what cannot bind."""
    check_port(port)
    collector = SnapshotCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        server, thread = start_http_server(port, addr=addr, registry=registry)
    except OSError as exc:
        why = exc.strerror or str(exc)
        raise MetricsPortError(f"--metrics-port {port}: cannot listen on {addr}:{port}: {why}") from None
    return MetricsServer(collector, server, thread)
