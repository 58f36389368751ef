"""`unicache explore`: its options, and running the search once per write policy.

Importing this module stays light (the `unicache` parser registers the
subcommand from here); the search and the REPL load when the command runs.

Prints, per write policy, the states explored (each reached by an action and
checked), the distinct states, the depth fully explored and the states per
second (each depth as it completes on stderr). A violation stops the run: it writes the shortest path to it as a
REPL script (`--script-out`, default under `--crash-dir`), prints the command
that reproduces it and exits 1; bad options exit 2 with one line on stderr.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from unicache.arguments import in_range, positive, positive_number
from unicache.engine.interrupt import StopFlag
from unicache.outputs import OutputPathError, OutputSet, OutputWriteError, write_atomic
from unicache.explore.scope import COMPONENTS, WRITE_POLICIES, Scope, ScopeError

if TYPE_CHECKING:
    from unicache.explore.search import ExploreStats

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
MAX_DEPTH = 64


def _depth(text: str) -> int:
    return in_range(text, 1, MAX_DEPTH)


def _components(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(","))
    if names not in (("full",), ("full", "mamba")):
        raise argparse.ArgumentTypeError(f"expected full or full,mamba, got {text!r}")
    return names


def add_explore_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the `explore` subcommand on the `unicache` command's subparsers."""
    p = sub.add_parser(
        "explore", help="exhaustive small-scope checking: every interleaving over a tiny cache",
        description="Breadth-first search over every sequence of inserts, locks, backups, evictions, "
                    "load-backs, acks (in any order, failed, duplicated, stale after a reset), resets and "
                    "allocation refusals on a tiny cache, deduplicating states by a canonical form; the "
                    "sanity check (pin sets recomputed from live leases) and the byte oracle run at every "
                    "state. A violation is written as a REPL script that reproduces it.")
    p.add_argument("--depth", type=_depth, default=6, metavar="N", help="actions per path (default 6)")
    p.add_argument("--components", type=_components, default=COMPONENTS, metavar="LIST",
                   help="full or full,mamba (default full,mamba)")
    p.add_argument("--write-policy", choices=(*WRITE_POLICIES, "both"), default="both",
                   help="explore one write policy, or both one after the other (default both)")
    p.add_argument("--max-states", type=positive, default=None, metavar="K",
                   help="stop after K distinct states per write policy (default: no limit)")
    p.add_argument("--minutes", type=positive_number, default=None, metavar="M",
                   help="stop after M minutes per write policy (default: no limit)")
    p.add_argument("--no-faults", action="store_true", help="leave allocation refusals out of the alphabet")
    p.add_argument("--script-out", type=Path, default=None, metavar="PATH",
                   help="where a violation's REPL script goes (default CRASH_DIR/unicache-explore-POLICY.repl)")
    p.add_argument("--crash-dir", type=Path, default=Path("unicache-crash"), metavar="DIR",
                   help="default directory of the script (default ./unicache-crash)")


def _policies(choice: str) -> tuple[str, ...]:
    return WRITE_POLICIES if choice == "both" else (choice,)


def _script_path(args: argparse.Namespace, policy: str) -> Path:
    if args.script_out is not None:
        path: Path = args.script_out
        return path
    crash_dir: Path = args.crash_dir
    return crash_dir / f"unicache-explore-{policy}.repl"


def format_stats(policy: str, stats: ExploreStats) -> str:
    complete = {"exhausted": "every reachable state", "depth": "complete"}.get(stats.stopped, f"stopped: {stats.stopped}")
    return (f"{policy}: {stats.transitions} states explored, {stats.distinct} distinct, depth {stats.depth} "
            f"({complete}; deepest state {stats.deepest}), {stats.seconds:.1f} s, "
            f"{stats.per_second:.0f} states/s; distinct per depth {stats.levels}")


def explore_command(args: argparse.Namespace, stop: StopFlag | None = None, out: TextIO | None = None) -> int:
    """Run `unicache explore` with parsed `args`; the exit status (a stop signal ends it after the
    current state, printing what was explored)."""
    from unicache.explore.replay import ReplayDivergedError
    from unicache.explore.search import explore

    stdout = out if out is not None else sys.stdout
    try:
        scopes = [Scope(components=args.components, write_policy=p, faults=not args.no_faults)
                  for p in _policies(args.write_policy)]
        outputs = OutputSet()
        for scope in scopes:
            outputs.file(_script_path(args, scope.write_policy), "--script-out")
    except (ScopeError, OutputPathError) as exc:
        print(f"unicache explore: {exc}", file=sys.stderr)
        return EXIT_USAGE
    seconds = args.minutes * 60 if args.minutes is not None else None
    for scope in scopes:
        policy = scope.write_policy
        try:
            result = explore(
                scope, args.depth, max_states=args.max_states, seconds=seconds,
                on_level=lambda st: print(f"{policy}: depth {st.depth} done, {st.transitions} states explored, "
                                          f"{st.distinct} distinct, {st.seconds:.1f} s", file=sys.stderr,
                                          flush=True),
                should_stop=(lambda: bool(stop)) if stop is not None else None,
            )
        except ReplayDivergedError as exc:
            print(f"unicache {exc} (the cache or the REPL is not deterministic)", file=sys.stderr)
            return EXIT_VIOLATION
        print(format_stats(scope.write_policy, result.stats), file=stdout, flush=True)
        v = result.violation
        if v is None:
            if result.stats.stopped == "interrupted":
                return EXIT_INTERRUPTED
            continue
        path = _script_path(args, scope.write_policy)
        script = v.script(scope, result.stats)
        try:
            write_atomic(path, script.encode(), "--script-out")
        except (OutputPathError, OutputWriteError) as exc:
            print(script, end="", file=stdout)
            print(f"unicache explore: {exc}", file=sys.stderr)
            return EXIT_VIOLATION
        print(f"{scope.write_policy}: {v.kind} violation at depth {len(v.path)}: {v.detail.splitlines()[0]}",
              file=stdout)
        print(script, end="", file=stdout)
        print(f"shortest path written to {path}; reproduce: unicache repl --script {path}", file=stdout,
              flush=True)
        return EXIT_VIOLATION
    return EXIT_OK
