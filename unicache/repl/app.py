"""`unicache repl`: the command line, session start-up, and the script / stdin / interactive loops."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from unicache.repl.executor import execute
from unicache.repl.options import add_cache_options, config_from
from unicache.repl.output import Output
from unicache.repl.parser import Args
from unicache.repl.session import Session

DESCRIPTION = """\
The lease debugging REPL. Opens a crash dump (read-only), a trace replay at a
step, or a fresh cache; 'help' lists the commands. Non-interactive with
--script FILE or when standard input is not a terminal; --json prints one JSON
object per command, so a session can be turned into a test.
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="unicache repl", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    src = p.add_argument_group("what to open (default: a fresh cache)")
    what = src.add_mutually_exclusive_group()
    what.add_argument("--dump", metavar="FILE", help="inspect a crash dump read-only")
    what.add_argument("--trace", metavar="FILE",
                      help="replay a trace (a JSONL/Mooncake file, or 'mooncake' for the bundled one)")
    src.add_argument("--step", type=int, default=0, metavar="N", help="with --trace: run N engine steps first")
    run = p.add_argument_group("how to run")
    run.add_argument("--script", metavar="FILE", help="read commands from FILE ('-' = standard input)")
    run.add_argument("--json", action="store_true", help="print one JSON object per command")
    run.add_argument("--keep-going", action="store_true",
                     help="scripts: carry on after a command that failed unexpectedly (exit status still 1)")
    run.add_argument("--history-file", metavar="FILE", default=None,
                     help="interactive history (default $UNICACHE_REPL_HISTORY or ~/.unicache_repl_history)")
    run.add_argument("--seed", type=int, default=None, help="recorded in dumps; the trace replay's seed")
    add_cache_options(p)
    trace = p.add_argument_group("trace replay (with --trace)")
    trace.add_argument("--requests", type=int, default=200, metavar="N", help="requests to replay (default 200)")
    trace.add_argument("--start", type=int, default=0, metavar="N", help="first request of the trace")
    trace.add_argument("--tokens-per-block", type=int, default=16, metavar="B",
                       help="Mooncake tokens per 512-token block (default 16)")
    trace.add_argument("--faults", default="delay,reorder", metavar="LIST",
                       help="simulated transfer faults: delay,reorder,duplicate,fail or none")
    trace.add_argument("--max-running", type=int, default=16, metavar="N")
    trace.add_argument("--decode-per-step", type=int, default=4, metavar="N")
    trace.add_argument("--trace-transfer", default="simulated", choices=("immediate", "simulated", "auto", "cuda"),
                       help="transfer engine of the replay (default simulated)")
    return p


def _start(session: Session, args: Args) -> None:
    dump = args.opt_str("dump")
    trace = args.opt_str("trace")
    script = args.opt_str("script")
    session.seed = args.opt_int("seed")
    session.inputs.extend((option, path) for option, path in (("--dump", dump), ("--script", script))
                          if path is not None and path != "-")
    if trace is not None and trace != "mooncake" and not trace.startswith("multiturn:"):
        session.inputs.append(("--trace", trace))
    if dump is not None:
        session.open_dump(dump)
        return
    if trace is not None:
        from unicache.repl.trace import open_trace

        open_trace(session, trace, args)
        return
    if args.get_int("step"):
        raise ValueError("--step needs --trace")
    config, transfer = config_from(args)
    session.start_fresh(config, transfer)


def run_lines(session: Session, lines: Iterable[str], out: Output, *, keep_going: bool) -> int:
    """Execute lines in order; 1 if any did not do what it should (stopping there unless keep_going)."""
    status = 0
    for text in lines:
        outcome = execute(session, text)
        if outcome is None:
            continue
        out.outcome(outcome)
        if not outcome.met:
            status = 1
            if not keep_going:
                break
        if session.quit:
            break
    return status


def history_path(args: Args) -> Path:
    given = args.opt_str("history_file") or os.environ.get("UNICACHE_REPL_HISTORY")
    return Path(given) if given else Path.home() / ".unicache_repl_history"


def main(argv: Sequence[str] | None = None) -> int:
    """Run `unicache repl` with `argv` (without the program name); returns the exit status.

    0: every command did what it should; 1: a script command failed
    unexpectedly; 2: bad command line or the dump/trace could not be opened.
    """
    parser = build_parser()
    try:
        ns = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 2
    args = Args(ns)
    script = args.opt_str("script")
    interactive = script is None and sys.stdin.isatty() and sys.stdout.isatty()
    out = Output(args.flag("json"), echo=not interactive, stream=sys.stdout)
    session = Session()
    try:
        _start(session, args)
    except Exception as exc:
        out.startup_error(exc)
        session.close()
        return 2
    try:
        return _run(session, args, out, script, interactive)
    except BrokenPipeError:
        _silence_stdout()
        return 1
    finally:
        session.close()


def _silence_stdout() -> None:
    """The reader of our output went away (`... | head -1`): stop quietly, without a traceback here or
    when the interpreter flushes standard output at exit."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _run(session: Session, args: Args, out: Output, script: str | None, interactive: bool) -> int:
    """The banner, `--step N`, then the interactive loop or the script."""
    if interactive or args.opt_str("dump") is not None:
        out.banner(session)
    steps = args.get_int("step")
    if steps and session.mode == "trace":
        first = execute(session, f"step {steps}")
        if first is not None:
            out.outcome(first)
    if interactive:
        from unicache.repl.interactive import run_interactive

        return run_interactive(session, out, history_path(args))
    if script is None or script == "-":
        return run_lines(session, sys.stdin, out, keep_going=args.flag("keep_going"))
    try:
        text = Path(script).read_text(encoding="utf-8")
    except OSError as exc:
        out.startup_error(exc)
        return 2
    return run_lines(session, text.splitlines(), out, keep_going=args.flag("keep_going"))
