"""Cost of the lease runtime beside plain integer pin counters, in one run.

    python benchmarks/bench_leases.py [--ops N] [--repeat R]

Prints ns per acquire+release pinning 0, 1 and 30 holders (best of R runs,
gc off, as SGLang's harness does), the same operation done with integer
counters on the holders, their ratio, the ratio of each ledger setting to
the cheapest one (the clock row is what metrics' hold times and the lease
watchdog cost: a clock read at acquire and release plus one histogram
bucket), and the bytes an unpinned holder pays for its pin-set slot. Targets on the 2-core dev box: one holder <= 1.5 us,
unpinned holder <= 16 bytes.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from leases import LeaseLedger, PinSet


class Full:
    """Component marker."""


class CountedHolder:
    """Baseline: a node with an integer lock counter."""

    __slots__ = ("lock_ref",)

    def __init__(self) -> None:
        self.lock_ref = 0


class LeasedHolder:
    """A node whose pin set is created on first pin: one slot while unpinned."""

    __slots__ = ("full_pins",)

    def __init__(self) -> None:
        self.full_pins: PinSet[Full] | None = None


def _best(fn: Callable[[int], None], ops: int, repeat: int) -> float:
    fn(ops // 10)  # warm up: specialise the bytecode, grow the allocator's arenas
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        gc.disable()
        t0 = time.perf_counter_ns()
        fn(ops)
        elapsed = time.perf_counter_ns() - t0
        gc.enable()
        best = min(best, elapsed / ops)
    return best


def lease_loop(width: int, ledger: LeaseLedger) -> Callable[[int], None]:
    pins = tuple(PinSet(Full, holder=i) for i in range(width))
    acquire = ledger.acquire

    def run(ops: int) -> None:
        for _ in range(ops):
            acquire(Full, owner="load-back", pins=pins).release()

    return run


def counter_loop(width: int) -> Callable[[int], None]:
    holders = tuple(CountedHolder() for _ in range(width))

    def run(ops: int) -> None:
        for _ in range(ops):
            for h in holders:
                h.lock_ref += 1
            for h in holders:
                h.lock_ref -= 1

    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    table = Table(title="acquire+release, ns/op (best of repeats)")
    for col in ("holders", "ledger setting", "leases", "int counters", "ratio", "vs cheapest"):
        table.add_column(col, justify="right")
    settings: dict[str, Callable[[], LeaseLedger]] = {
        "cheapest (history=0)": lambda: LeaseLedger("bench", history=0),
        "clock (history=0, hold times)": lambda: LeaseLedger("bench", history=0, clock=time.monotonic),
        "default (history=1024)": lambda: LeaseLedger("bench"),
        "debug (sites)": lambda: LeaseLedger("bench", debug=True),
    }
    for width in (0, 1, 30):
        base = _best(counter_loop(width), args.ops, args.repeat)
        cheapest = 0.0
        for label, make in settings.items():
            ours = _best(lease_loop(width, make()), args.ops, args.repeat)
            cheapest = cheapest or ours
            table.add_row(str(width), label, f"{ours:,.0f}", f"{base:,.0f}", f"{ours / max(base, 1):.1f}x",
                          f"{ours / cheapest:.2f}x")
    console = Console()
    console.print(table)

    unpinned_leased = sys.getsizeof(LeasedHolder()) - sys.getsizeof(_Empty())
    unpinned_counted = sys.getsizeof(CountedHolder()) - sys.getsizeof(_Empty())
    pinned = sys.getsizeof(PinSet(Full))
    mem = Table(title="bytes per holder")
    for col in ("what", "bytes", "baseline (int counter slot)", "ratio"):
        mem.add_column(col, justify="right")
    mem.add_row("unpinned holder: its pin-set slot", str(unpinned_leased), str(unpinned_counted),
                f"{unpinned_leased / unpinned_counted:.1f}x")
    mem.add_row("a pinned holder's PinSet object (before storage)", str(pinned), "-", "-")
    console.print(mem)


class _Empty:
    __slots__ = ()


if __name__ == "__main__":
    main()
