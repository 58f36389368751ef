"""The replay timeline figure: every series told apart, an interrupted run says so."""

from __future__ import annotations

from pathlib import Path

from unicache.engine.plot import plot_timeline, timeline_figure
from unicache.engine.replay import ReplayOptions, run_replay
from unicache.engine.timeline import Timeline


def test_every_series_has_a_style_of_its_own_and_full_is_not_hidden(tmp_path: Path) -> None:
    timelines: list[Timeline] = []
    report = run_replay(ReplayOptions(requests=30, tokens_per_block=16, components=("full", "swa", "mamba")),
                        timeline_out=timelines)
    assert report["errors"] == 0
    fig = timeline_figure(timelines[0], title="t")
    device, host, _flight, leases = fig.axes
    for axis, names in ((device, ["full device", "swa device", "mamba device"]),
                        (host, ["full host", "swa host", "mamba host"]), (leases, ["full", "swa", "mamba"])):
        lines = {str(line.get_label()): line for line in axis.get_lines()}
        assert sorted(lines) == sorted(names)
        styles = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in lines.values()}
        assert len(styles) == 3
        full = lines[names[0]]
        assert all(full.get_linewidth() > line.get_linewidth() for line in lines.values() if line is not full)
    out = plot_timeline(timelines[0], tmp_path / "t.png", title="t")
    assert out.read_bytes().startswith(b"\x89PNG")


def test_an_interrupted_run_says_so() -> None:
    empty = timeline_figure(Timeline(), title="t", interrupted="interrupted by SIGINT after 0 of 10 requests")
    assert empty.axes == [] and any("nothing to plot: interrupted by SIGINT" in t.get_text() for t in empty.texts)
    timeline = Timeline()
    timeline.steps = [1, 2]
    timeline.finished = [0, 1]
    timeline.load_backs_in_flight = [0, 0]
    timeline.backups_in_flight = [0, 0]
    fig = timeline_figure(timeline, title="t", interrupted="interrupted by SIGTERM after 1 of 10 requests")
    assert "interrupted by SIGTERM after 1 of 10 requests" in fig.axes[0].get_title()
