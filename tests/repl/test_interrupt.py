"""Ctrl-C (a real SIGINT to this process) stops a step loop between steps and a script cleanly."""

from __future__ import annotations

import io
import json
import os
import signal
from collections.abc import Iterator

import pytest

from unicache.repl.app import run_lines
from unicache.repl.executor import execute
from unicache.repl.errors import CommandInterrupted
from unicache.repl.interrupt import EXIT_INTERRUPTED, catch_interrupt
from unicache.repl.output import Output
from unicache.repl.session import FreshDriver, Session, StepReport

# Six backups held by the manual engine: each fresh-mode step delivers one of their acks.
SIX_HELD = ["new --transfer manual --device-tokens 64"] + [
    line for k in range(1, 7) for line in (f"insert {10 * k}..{10 * k + 3}", f"backup t:{10 * k}..{10 * k + 3}")
]


class InterruptingDriver(FreshDriver):
    """The fresh driver (it delivers real acks), sending this process SIGINT right after its step `at`."""

    def __init__(self, session: Session, at: int) -> None:
        super().__init__(session)
        self.at = at
        self.steps = 0

    def step(self) -> StepReport | None:
        report = super().step()
        self.steps += 1
        if self.steps == self.at:
            os.kill(os.getpid(), signal.SIGINT)
        return report


@pytest.fixture(autouse=True)
def sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt here, and a child started here gets its default action.

    A shell without job control starts background jobs with SIGINT ignored
    (`make test &`); Python then installs no handler, and a child exec'd from
    it inherits the ignore. The tests need the interactive disposition.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _session(at: int) -> Session:
    s = Session()
    for line in SIX_HELD:
        outcome = execute(s, line)
        assert outcome is not None and outcome.ok, outcome
    s.driver = InterruptingDriver(s, at)
    return s


def _script(s: Session, lines: list[str] | Iterator[str], capsys: pytest.CaptureFixture[str]
            ) -> tuple[int, list[dict[str, object]], str]:
    stream = io.StringIO()
    capsys.readouterr()
    status = run_lines(s, lines, Output(True, echo=False, stream=stream), keep_going=False, name="s.repl")
    return status, [json.loads(x) for x in stream.getvalue().splitlines()], capsys.readouterr().err


def test_step_n_stops_between_steps_and_the_script_exits_130(capsys: pytest.CaptureFixture[str]) -> None:
    s = _session(at=2)
    try:
        status, out, err = _script(s, ["assert counter tickets == 6", "step 6", "stats"], capsys)
        assert status == EXIT_INTERRUPTED
        assert [e["cmd"] for e in out] == ["assert", "step"]  # 'stats' never ran
        error = out[1]["error"]
        assert isinstance(error, dict) and error["type"] == "CommandInterrupted"
        assert str(error["message"]).startswith("step: interrupted by SIGINT after 2 step(s) (now at step ")
        assert "4 of 6 not run; stopped between steps, the session is intact" in str(error["message"])
        assert err.count("\n") == 1
        assert err == ("unicache repl: script s.repl interrupted by SIGINT at line 2 ('step 6'; stopped between "
                       "steps); the rest was not run\n")
        for line in ("assert counter tickets == 4", "assert clean", "step 6", "assert counter tickets == 0",
                     "assert clean"):
            outcome = execute(s, line)  # the session carries on where the interrupted command stopped
            assert outcome is not None and outcome.ok, outcome
            if line == "step 6":
                assert outcome.envelope["steps"] == 4 and outcome.envelope["idle"] is True
    finally:
        s.close()


def test_run_until_stops_between_steps(capsys: pytest.CaptureFixture[str]) -> None:
    s = _session(at=3)
    try:
        status, out, err = _script(s, ["run until idle", "stats"], capsys)
        assert status == EXIT_INTERRUPTED and [e["cmd"] for e in out] == ["run"]
        error = out[0]["error"]
        assert isinstance(error, dict) and error["type"] == "CommandInterrupted"
        assert "run: interrupted by SIGINT after 3 step(s)" in str(error["message"])
        assert "'idle' still false" in str(error["message"])
        assert "at line 1 ('run until idle'; stopped between steps)" in err
        outcome = execute(s, "assert counter tickets == 3")
        assert outcome is not None and outcome.ok
        outcome = execute(s, "run until idle")
        assert outcome is not None and outcome.ok and outcome.envelope["steps"] == 3
    finally:
        s.close()


def test_no_interrupt_no_change(capsys: pytest.CaptureFixture[str]) -> None:
    s = _session(at=100)
    try:
        status, out, err = _script(s, ["step 6", "assert idle"], capsys)
        assert status == 0 and err == "" and out[0]["steps"] == 6
    finally:
        s.close()


def test_sigint_between_commands_stops_the_script_at_that_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The signal arrives while the next line is read (as from a pipe): no command is cut; 130."""
    s = _session(at=100)

    def lines() -> Iterator[str]:
        yield "step 1"
        yield "assert counter tickets == 5"
        os.kill(os.getpid(), signal.SIGINT)  # the default handler: KeyboardInterrupt here, in the reader
        yield "step 1"

    try:
        status, out, err = _script(s, lines(), capsys)
        assert status == EXIT_INTERRUPTED and [e["cmd"] for e in out] == ["step", "assert"]
        assert err == ("unicache repl: script s.repl interrupted by SIGINT at line 2 ('assert counter tickets == 5'; "
                       "that command completed); the rest was not run\n")
        outcome = execute(s, "assert counter tickets == 5")
        assert outcome is not None and outcome.ok
    finally:
        s.close()


def test_a_piped_session_interrupted_while_it_waits_for_input_exits_130() -> None:
    """`unicache repl` reading commands from a pipe: after the first command's answer, SIGINT while it
    waits for the next line ends it with one stderr line naming line 1, and exit status 130."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "unicache.repl", "--json"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        proc.stdin.write(b"insert 1..4\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())  # the marker: line 1 ran and was answered
        assert answer["cmd"] == "insert" and answer["ok"]
        proc.send_signal(signal.SIGINT)  # stdin stays open: it is waiting for line 2
        assert proc.wait(timeout=60) == EXIT_INTERRUPTED
        err = proc.stderr.read().decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
        proc.stdout.close()
        proc.stderr.close()
    assert err == ("unicache repl: script <stdin> interrupted by SIGINT at line 1 ('insert 1..4'; that command "
                   "completed); the rest was not run\n")



def test_ack_all_stops_between_acks(capsys: pytest.CaptureFixture[str]) -> None:
    """`ack all` delivers one held ack after another: a SIGINT that came while it runs (here: just
    before it started, inside the same guard) stops it after the first, between two acks."""
    s = _session(at=100)
    try:
        with catch_interrupt(s) as stop:
            os.kill(os.getpid(), signal.SIGINT)
            outcome = execute(s, "ack all")
        assert stop.signal_name == "SIGINT"
        assert outcome is not None and not outcome.ok and isinstance(outcome.error, CommandInterrupted)
        assert str(outcome.error).startswith("ack: interrupted by SIGINT after 1 ack(s) (now at step ")
        assert "stopped between acks, the session is intact" in str(outcome.error)
        for line in ("assert counter tickets == 5", "assert clean", "ack all", "assert idle"):
            outcome = execute(s, line)
            assert outcome is not None and outcome.ok, outcome
    finally:
        s.close()
