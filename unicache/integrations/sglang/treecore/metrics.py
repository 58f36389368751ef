"""The metrics of tree core ``"unicache"`` in SGLang's ``/metrics``, through `register_sglang_metrics`.

When SGLang builds the cache with metrics on (``CacheInitParams.enable_metrics``)
the core's ledger gets a clock (`time.monotonic`: lease ages and hold
times) and `register_core_metrics` registers `core_families` with SGLang's
own radix-cache labels (`radix_cache_metric_labels`: ``cache_type``
``UnicacheTreeCore`` and the tp/pp/dp ranks), as tree core ``"leases"``
does. The families are the shared ones (`unicache.metrics.families`): the
ledger's (live leases by component, ``full`` for the device tier and
``fullhost`` for the host tier, and by owner kind: ``device lock``, ``host
lock``, ``Full pin``, ``write-through``, ``load-back``; acquired, released,
revoked, stale, leaked; the hold-time histogram; the oldest lease), acks
by outcome, load-back refusals by reason (`record`), load-backs and
write-through backups in flight, and typed errors by class.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry

from unicache.integrations.sglang.metrics import SGLangMetrics, register_sglang_metrics
from unicache.integrations.sglang.treecore.corestate import CoreState
from unicache.metrics.families import Family, error_families, ledger_families

COMPONENTS = ("full", "fullhost")
"""The ledger's lease components, always present in ``unicache_leases_live`` (device tier, host tier)."""


def core_families(core: CoreState) -> list[Family]:
    """Every metric of one core (read on the thread that owns it; see `register_sglang_metrics`)."""
    record = core.record
    fams = ledger_families(core.ledger, components=COMPONENTS)
    acks = Family("unicache_acks", "counter", "Transfer acks by outcome (stale: no lease behind it, its mark "
                  "revoked by a reset).", ("outcome",))
    acks.add(("ok",), record.write_through_acks + record.load_back_acks)
    acks.add(("stale",), record.stale_acks)
    refusals = Family("unicache_refusals", "counter",
                      "Refusals by operation, reason and component (load-backs SGLang's cache gave up after the "
                      "core built their spec).", ("op", "reason", "component"))
    for reason in ("no_device_room", "threshold_or_quota", "nothing_to_move"):
        refusals.add(("load_back", reason, "full"), record.refused.get(reason, 0))
    ops = Family("unicache_operations", "counter", "Cache operations by kind.", ("op",))
    ops.add(("load_back",), record.load_backs)
    ops.add(("write_through_ack",), record.write_through_acks)
    in_flight = Family("unicache_transfers_in_flight", "gauge",
                       "Load-backs and write-through backups awaiting their ack.")
    in_flight.add((), len(core.write_marks) + sum(len(f) for f in list(core.load_backs.values())))
    return fams + [acks, refusals, ops, in_flight] + error_families()


def register_core_metrics(core: CoreState, *, start: bool = True,
                          registry: CollectorRegistry = REGISTRY) -> SGLangMetrics | None:
    """Put `core_families(core)` into SGLang's ``/metrics`` with its radix-cache labels (see the module docstring)."""
    from sglang.srt.layers.dp_attention import is_dp_attention_enabled
    from sglang.srt.observability.metrics_collector import radix_cache_metric_labels
    from sglang.srt.runtime_context import get_parallel

    raw = radix_cache_metric_labels(type(core).__name__, get_parallel(), is_dp_attention_enabled())
    labels = {str(k): str(v) for k, v in raw.items()}
    return register_sglang_metrics(lambda: core_families(core), labels, start=start, registry=registry)
