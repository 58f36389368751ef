"""ProgressLog: plain progress lines at count milestones (the first item, every twentieth, the end)."""

from __future__ import annotations

import io

from unicache.engine.progress_log import ProgressLog


def _lines(total: int, dones: list[int]) -> list[str]:
    out = io.StringIO()
    log = ProgressLog("replay", "requests", total, out)
    for d in dones:
        log.update(d, f"at {d}")
    return out.getvalue().splitlines()


def test_first_item_every_twentieth_and_the_end() -> None:
    lines = _lines(100, list(range(101)))
    assert lines[0] == "replay: 1/100 requests · at 1"
    assert [int(x.split()[1].split("/")[0]) for x in lines] == [1, *range(5, 101, 5)]


def test_jumps_print_one_line_and_skip_passed_milestones() -> None:
    assert _lines(100, [0, 3, 37, 38, 40, 100, 100]) == [
        "replay: 3/100 requests · at 3", "replay: 37/100 requests · at 37", "replay: 40/100 requests · at 40",
        "replay: 100/100 requests · at 100"]


def test_small_totals_print_every_item_once() -> None:
    assert len(_lines(3, [1, 1, 2, 3, 3])) == 3
    out = io.StringIO()
    ProgressLog("simulate", "seeds", 5, out).update(1)
    assert out.getvalue() == "simulate: 1/5 seeds\n"
