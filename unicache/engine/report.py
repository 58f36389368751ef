"""The replay report: one flat JSON object of counts (plus nested detail) and its rich rendering.

`refusals` counts the cache's typed refusal and no-op reasons
(`unicache.reasons`) per `op:kind[:component]`; `duplicates` the copies
freed because the data was already there, per component.
"""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from unicache.outputs import write_atomic

TIMING_KEYS: frozenset[str] = frozenset({"requests_per_second", "wall_seconds", "timings"})
"""Report keys that vary between identical runs; everything else is a pure function of the inputs."""

REQUIRED_KEYS: tuple[str, ...] = (
    "requests", "input_tokens", "device_hit_tokens", "host_hit_tokens", "load_backs", "evictions",
    "host_evictions", "reclaims", "leases_acquired", "leases_released", "max_leases_on_one_node",
    "nodes_pinned_by_two_components", "stale_acks", "failed_transfers", "leaked_leases", "corruptions",
    "errors", "requests_per_second", "wall_seconds",
)

Report = dict[str, object]


def without_timings(report: Report) -> Report:
    """The report minus the keys that depend on wall-clock time (for determinism checks)."""
    return {k: v for k, v in report.items() if k not in TIMING_KEYS}


def healthy(report: Report) -> bool:
    """No corruption, no error, no leaked lease."""
    return report.get("corruptions") == 0 and report.get("errors") == 0 and report.get("leaked_leases") == 0


def write_report(report: Report, path: Path, option: str = "--report") -> None:
    """Write the report as JSON, atomically (:func:`unicache.outputs.write_atomic`, which names ``option``)."""
    write_atomic(path, (json.dumps(report, indent=2, sort_keys=False) + "\n").encode("utf-8"), option)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if value < 100 else f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _pct(part: object, whole: object) -> str:
    if isinstance(part, int) and isinstance(whole, int) and whole:
        return f"{100.0 * part / whole:.1f}%"
    return ""


def render_report(report: Report, console: Console) -> None:
    """The human summary printed at the end of a replay."""
    title = f"unicache replay — {report.get('trace', '?')}"
    table = Table(title=title, show_header=True, header_style="bold")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("", justify="right", style="dim")
    inp = report.get("input_tokens")
    rows: list[tuple[str, object, str]] = [
        ("configuration", report.get("configuration", ""), ""),
        ("requests", report.get("requests"), ""),
        ("input tokens", inp, ""),
        ("device-hit tokens", report.get("device_hit_tokens"), _pct(report.get("device_hit_tokens"), inp)),
        ("host-hit tokens (loaded back)", report.get("host_hit_tokens"), _pct(report.get("host_hit_tokens"), inp)),
        ("load-backs", report.get("load_backs"), ""),
        ("  ... that joined a copy in flight", report.get("load_back_joins"), ""),
        ("device evictions", report.get("evictions"), ""),
        ("host evictions", report.get("host_evictions"), ""),
        ("reclaimed host pages", report.get("reclaims"), ""),
        ("leases acquired / released",
         f"{_fmt(report.get('leases_acquired'))} / {_fmt(report.get('leases_released'))}", ""),
        ("most leases on one node", report.get("max_leases_on_one_node"), ""),
        ("nodes pinned by two components", report.get("nodes_pinned_by_two_components"), ""),
        ("  ... by two load-backs", report.get("load_back_cross_component_nodes"), ""),
        ("  times an overlap was seen", report.get("overlap_observations"), ""),
        ("stale / duplicate acks", f"{_fmt(report.get('stale_acks'))} / {_fmt(report.get('duplicate_acks'))}", ""),
        ("failed transfers", report.get("failed_transfers"), ""),
        ("leaked leases", report.get("leaked_leases"), ""),
        ("corruptions", report.get("corruptions"), ""),
        ("errors", report.get("errors"), ""),
        ("requests/s", report.get("requests_per_second"), ""),
        ("wall seconds", report.get("wall_seconds"), ""),
    ]
    refusals = report.get("refusals")
    if isinstance(refusals, dict):
        rows[-2:-2] = [(f"  {key}", n, "") for key, n in refusals.items()]
        rows.insert(len(rows) - 2 - len(refusals), ("refusals and no-ops (op:reason:component)", "", ""))
    for name, value, extra in rows:
        style = None
        if name in ("leaked leases", "corruptions", "errors") and value != 0:
            style = "bold red"
        table.add_row(name, _fmt(value), extra, style=style)
    console.print(table)
    if report.get("interrupted"):
        console.print(f"[bold yellow]interrupted[/] by {report.get('interrupted_by')} after "
                      f"{report.get('steps')} steps: the figures cover the requests finished so far")
    error = report.get("error")
    if error:
        console.print(f"[bold red]error:[/] {escape(str(error))}")
    dump = report.get("crash_dump")
    if dump:
        console.print(f"crash dump: {dump}  (open it with: unicache repl --dump {dump})")
    not_written = report.get("crash_dump_error")
    if not_written:
        console.print(f"[bold red]crash dump not written:[/] {escape(str(not_written))}")
