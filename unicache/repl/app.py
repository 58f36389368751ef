"""`unicache repl`: the command line, session start-up, and the script / stdin / interactive loops."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from unicache.repl.errors import CommandInterrupted, OptionRangeError
from unicache.repl.executor import Outcome, execute
from unicache.repl.interrupt import EXIT_INTERRUPTED, catch_interrupt
from unicache.repl.options import add_cache_options, config_from
from unicache.repl.output import Output
from unicache.repl.parser import Args
from unicache.repl.script_input import STDIN_NAME, ScriptInputError, read_script, stream_lines
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
    if args.opt_str("history_file") == "":
        raise OptionRangeError("repl", "--history-file", "", "a file path (leave the option out for the default)")
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
    config, transfer = config_from(args, "repl")
    session.start_fresh(config, transfer)


def run_lines(session: Session, lines: Iterable[str], out: Output, *, keep_going: bool,
              name: str = STDIN_NAME) -> int:
    """Execute lines in order; 1 if any did not do what it should (stopping there unless keep_going).

    Ctrl-C stops the script: a step loop stops between steps (its outcome
    says so), anything else finishes its command; then one line on stderr
    names the line, and the status is `EXIT_INTERRUPTED` (130). Reading the
    lines may raise `ScriptInputError`.
    """
    status = 0
    number = 0
    done = 0
    text = ""
    try:
        for number, text in enumerate(lines, start=1):
            with catch_interrupt(session) as stop:
                outcome = execute(session, text)
            done = number
            if outcome is not None:
                out.outcome(outcome)
            if stop:
                _script_interrupted(name, number, text, stop.signal_name or "SIGINT", outcome, ran=True)
                return EXIT_INTERRUPTED
            if outcome is None:
                continue
            if not outcome.met:
                status = 1
                if not keep_going:
                    break
            if session.quit:
                break
    except KeyboardInterrupt:  # outside a command: reading the next line, printing, or just before one
        _script_interrupted(name, number, text, "SIGINT", None, ran=done == number)
        return EXIT_INTERRUPTED
    return status


def _script_interrupted(name: str, number: int, text: str, signal_name: str, outcome: Outcome | None, *,
                        ran: bool) -> None:
    """The one line (on stderr) saying where a script stopped; `ran`: line `number` was executed."""
    shown = text.strip()
    if len(shown) > 60:
        shown = shown[:57] + "..."
    if number == 0:
        where = "before its first line"
    elif not ran:
        where = f"before line {number} ({shown!r}) ran"
    else:
        error = outcome.error if outcome is not None else None
        how = (f"stopped between {error.unit}s" if isinstance(error, CommandInterrupted)
               else "that command completed")
        where = f"at line {number} ({shown!r}; {how})"
    print(f"unicache repl: script {name} interrupted by {signal_name} {where}; the rest was not run",
          file=sys.stderr, flush=True)


def history_path(args: Args) -> Path:
    """--history-file, else $UNICACHE_REPL_HISTORY (when set and not empty), else ~/.unicache_repl_history."""
    given = args.opt_str("history_file")
    if given is None:
        given = os.environ.get("UNICACHE_REPL_HISTORY") or None
    return Path(given) if given is not None else Path.home() / ".unicache_repl_history"


def main(argv: Sequence[str] | None = None) -> int:
    """Run `unicache repl` with `argv` (without the program name); returns the exit status.

    0: every command did what it should; 1: a script command failed
    unexpectedly; 2: bad command line, the dump/trace could not be opened, or
    the script could not be read (`ScriptInputError`); 130: a script (or the
    start-up) was interrupted by Ctrl-C.
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
        try:
            _start(session, args)
            history = history_path(args) if interactive else None
        except Exception as exc:
            out.startup_error(exc)
            session.close()
            return 2
        try:
            if interactive:
                from unicache.repl.interactive import run_interactive

                out.banner(session)
                _first_steps(session, args, out)
                status = run_interactive(session, out, history)
            else:
                status = _run(session, args, out, script)
        except BrokenPipeError:
            _silence_stdout()
            status = 1
        except BaseException:
            session.close()
            raise
        return max(status, _close(session))
    except KeyboardInterrupt:
        print("unicache repl: interrupted by SIGINT before the session started (or while it closed)",
              file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _close(session: Session) -> int:
    """Close the session; a cache too broken to close (a script that reproduces a corruption leaves one)
    is reported in one line on stderr and exit status 1, not a traceback."""
    try:
        session.close()
    except Exception as exc:
        print(f"unicache repl: closing the cache failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


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


def _first_steps(session: Session, args: Args, out: Output) -> int:
    """`--step N` on a trace: run N engine steps first (Ctrl-C stops them between steps); 130 if it did."""
    steps = args.get_int("step")
    if not steps or session.mode != "trace":
        return 0
    with catch_interrupt(session) as stop:
        first = execute(session, f"step {steps}")
    if first is not None:
        out.outcome(first)
    return EXIT_INTERRUPTED if stop else 0


def _run(session: Session, args: Args, out: Output, script: str | None) -> int:
    """A script (a file, or standard input): the banner of a dump, `--step N`, then its lines.

    A script file is read and checked whole before `--step N` or any of its
    lines run; standard input line by line.
    """
    keep_going = args.flag("keep_going")
    lines: Iterable[str]
    name = STDIN_NAME
    try:
        if script is None or script == "-":
            lines = stream_lines(sys.stdin.buffer)
        else:
            name = script
            lines = read_script(script)
        if args.opt_str("dump") is not None:
            out.banner(session)
        if _first_steps(session, args, out):
            print("unicache repl: --step interrupted by SIGINT; the script was not run", file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        return run_lines(session, lines, out, keep_going=keep_going, name=name)
    except ScriptInputError as exc:
        out.startup_error(exc)
        return 2
