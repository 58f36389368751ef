"""`--plot`: a PNG of pool occupancy, in-flight load-backs and live leases per component over a run."""

from __future__ import annotations

import io
from pathlib import Path

from unicache.engine.timeline import Timeline
from unicache.outputs import write_atomic


def plot_timeline(timeline: Timeline, path: Path, *, title: str, option: str = "--plot") -> Path:
    """Draw three stacked panels against the engine step and write them to ``path``.

    The image (in the format ``path``'s suffix names) is rendered in memory, then written with
    :func:`unicache.outputs.write_atomic`: matplotlib never opens the target itself.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = timeline.steps
    fig, (occ, flight, leases) = plt.subplots(3, 1, figsize=(10, 9), sharex=True)
    for name, series in timeline.device_used.items():
        occ.plot(steps, [100.0 * v for v in series], label=f"{name} device")
    for name, series in timeline.host_used.items():
        occ.plot(steps, [100.0 * v for v in series], linestyle="--", label=f"{name} host")
    occ.set_ylabel("pool used (%)")
    occ.set_ylim(0, 105)
    occ.legend(loc="lower right", fontsize="small", ncol=2)
    occ.set_title(title)
    flight.plot(steps, timeline.load_backs_in_flight, label="load-backs in flight")
    flight.plot(steps, timeline.backups_in_flight, label="backups in flight", alpha=0.7)
    flight.set_ylabel("transfers")
    flight.legend(loc="upper right", fontsize="small")
    for name, counts in timeline.live_leases.items():
        leases.plot(steps, counts, label=name)
    leases.set_ylabel("live leases")
    leases.set_xlabel("engine step")
    leases.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    image = io.BytesIO()
    try:
        fig.savefig(image, dpi=100, format=path.suffix.lstrip(".").lower())
    finally:
        plt.close(fig)
    return write_atomic(path, image.getvalue(), option)
