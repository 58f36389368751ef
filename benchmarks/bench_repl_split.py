"""Splitting and parsing one long REPL token line: how the cost grows with the number of tokens.

Run: `.venv/bin/python benchmarks/bench_repl_split.py [--sizes 2000,20000,200000,400000] [--repeats 5]`.

For each size N it times (best of `--repeats`) `split_line` + `parse_tokens`
of `match 0,1,...,N-1` (one word: the form that was quadratic under
`shlex.split`) and of `match 0 1 ... N-1` (N words), and `shlex.split` of the
one-word form up to 20,000 tokens as the old baseline. Printed: ms per line
and ns per token at each size (flat: linear), and the cost's growth from
each size to the next next to the size ratio (equal: linear; shlex's grows
with the square). Below ~200,000 tokens the cost per token still rises as
the line's strings and ints outgrow the CPU caches (plain `str.split` and
`int` do the same); from there on it is flat.
"""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Callable

from unicache.repl.parser import split_line
from unicache.repl.refs import parse_tokens


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def parse(text: str) -> list[int]:
    line = split_line(text)
    assert line is not None
    return parse_tokens(line.argv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,20000,200000,400000")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    rows: dict[str, dict[int, float]] = {"one word": {}, "N words": {}, "shlex one word (old)": {}}
    for n in sizes:
        comma = "match " + ",".join(str(i) for i in range(n))
        spaced = "match " + " ".join(str(i) for i in range(n))
        assert parse(comma) == list(range(n)) == parse(spaced)
        rows["one word"][n] = best(lambda: parse(comma), args.repeats)
        rows["N words"][n] = best(lambda: parse(spaced), args.repeats)
        if n <= 20_000:
            rows["shlex one word (old)"][n] = best(lambda: shlex.split(comma), max(1, args.repeats // 2))
    print(f"{'':24}" + "".join(f"{n:>22,}" for n in sizes) + "   growth per step (size ratio)")
    for name, by_size in rows.items():
        cells = "".join(f"{by_size[n] * 1e3:>10.2f}ms {by_size[n] * 1e9 / n:>6.0f}ns/tok" if n in by_size
                        else f"{'-':>22}" for n in sizes)
        done = sorted(by_size)
        growth = ", ".join(f"{by_size[b] / by_size[a]:.1f}x ({b / a:.0f}x)" for a, b in zip(done, done[1:]))
        print(f"{name:24}{cells}   {growth}")


if __name__ == "__main__":
    main()
