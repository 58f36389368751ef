"""`--plot`: a PNG of pool occupancy, in-flight transfers and live leases per component over a run."""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING

from unicache.engine.timeline import Timeline
from unicache.outputs import write_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

_ORDER = ("full", "swa", "mamba")
_COLORS = {"full": "tab:blue", "swa": "tab:orange", "mamba": "tab:green"}
_MARKERS = {"full": "o", "swa": "s", "mamba": "^"}
_LINES = {"full": "-", "swa": "--", "mamba": ":"}
_WIDTHS = {"full": 3.5, "swa": 1.8, "mamba": 1.8}
_MARKS = 12
"""Markers per series. Full's line is drawn widest, the others dashed or dotted on top, and each
component's markers sit at its own offset, so a line that coincides with another stays visible."""


def _style(name: str, n: int) -> dict[str, object]:
    every = max(1, n // _MARKS)
    place = _ORDER.index(name) if name in _ORDER else len(_ORDER)
    return {"color": _COLORS.get(name, "tab:gray"), "marker": _MARKERS.get(name, "D"),
            "linestyle": _LINES.get(name, "-."), "linewidth": _WIDTHS.get(name, 1.8),
            "markevery": (place * every // len(_ORDER) % every, every), "markersize": 6}


def plot_timeline(timeline: Timeline, path: Path, *, title: str, option: str = "--plot",
                  interrupted: str | None = None) -> Path:
    """Draw the run (`timeline_figure`) and write it to ``path``.

    The image (in the format ``path``'s suffix names) is rendered in memory, then written with
    :func:`unicache.outputs.write_atomic`: matplotlib never opens the target itself.
    """
    return _write(timeline_figure(timeline, title=title, interrupted=interrupted), path, option)


def timeline_figure(timeline: Timeline, *, title: str, interrupted: str | None = None) -> Figure:
    """The run against the engine step, as a matplotlib figure.

    Panels: device pool use, host pool use, transfers in flight, live leases.
    Device and host get panels of their own and each component its colour
    and marker (Full's line used to hide under SWA's when both filled alike),
    so every series is visible. ``interrupted`` (why the run stopped) goes in
    the title; a run stopped before its first sample says so on the figure
    instead of drawing empty axes.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = timeline.steps
    n = len(steps)
    full_title = title if interrupted is None else f"{title}\n{interrupted}"
    if not steps:
        fig = plt.figure(figsize=(10, 3))
        fig.suptitle(title)
        why = interrupted or "the run recorded no step"
        fig.text(0.5, 0.5, f"nothing to plot: {why}", ha="center", va="center", fontsize="large")
        return fig
    fig, (device, host, flight, leases) = plt.subplots(4, 1, figsize=(10, 11), sharex=True)
    for axis, series, tier in ((device, timeline.device_used, "device"), (host, timeline.host_used, "host")):
        for name, values in series.items():
            axis.plot(steps, [100.0 * v for v in values], label=f"{name} {tier}", **_style(name, n))
        axis.set_ylabel(f"{tier} pool used (%)")
        axis.set_ylim(0, 105)
        if series:
            axis.legend(loc="lower right", fontsize="small", ncol=3)
    device.set_title(full_title)
    flight.plot(steps, timeline.load_backs_in_flight, label="load-backs in flight", color="tab:purple")
    flight.plot(steps, timeline.backups_in_flight, label="backups in flight", color="tab:brown", linestyle="--")
    flight.set_ylabel("transfers")
    flight.legend(loc="upper right", fontsize="small")
    for name, counts in timeline.live_leases.items():
        leases.plot(steps, counts, label=name, **_style(name, n))
    leases.set_ylabel("live leases")
    leases.set_xlabel("engine step")
    if timeline.live_leases:
        leases.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig


def _write(fig: Figure, path: Path, option: str) -> Path:
    import matplotlib.pyplot as plt

    image = io.BytesIO()
    try:
        fig.savefig(image, dpi=100, format=path.suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return write_atomic(path, image.getvalue(), option)
