"""Where the REPL's outcomes go: one JSON line each, or a rich view (echoing the command when scripted)."""

from __future__ import annotations

import json
import os
from typing import TextIO

from unicache.repl.executor import Outcome, error_json
from unicache.repl.session import Session


class Output:
    """Writes outcomes: JSON lines, or rich views (echoing each command when not interactive)."""

    def __init__(self, json_mode: bool, echo: bool, stream: TextIO) -> None:
        from rich.console import Console

        self.json_mode = json_mode
        self.echo = echo
        self.stream = stream
        width = None if stream.isatty() or os.environ.get("COLUMNS") else 140
        self.console = Console(file=stream, highlight=False, soft_wrap=False, width=width)

    def outcome(self, outcome: Outcome) -> None:
        if self.json_mode:
            self.stream.write(json.dumps(outcome.envelope) + "\n")
            self.stream.flush()
            return
        from unicache.repl.render import render

        if self.echo and outcome.line is not None:
            prefix = "! " if outcome.line.expect_error else ""
            self.console.print(f"[dim]unicache> {prefix}[/dim]", end="")
            self.console.print(outcome.line.text.removeprefix("!").strip(), markup=False, style="dim")
        view = render(outcome.envelope)
        if view is not None:
            self.console.print(view)

    def notice(self, text: str) -> None:
        """One dim line about the session itself (a long command still running, an interrupt)."""
        if self.json_mode:
            return
        self.console.print(text, markup=False, style="dim")

    def startup_error(self, exc: BaseException) -> None:
        if self.json_mode:
            self.stream.write(json.dumps({"cmd": "repl", "args": [], "ok": False, "error": error_json(exc)}) + "\n")
        else:
            self.console.print(f"[bold red]error[/bold red] [{type(exc).__name__}] ", end="")
            self.console.print(str(exc), markup=False)

    def banner(self, session: Session) -> None:
        if self.json_mode:
            return
        from rich.text import Text

        dump = session.dump
        if dump is None:
            self.console.print(Text(f"unicache repl — {session.source}. 'help' lists commands.", style="dim"))
            return
        err = dump.error
        lines = [f"crash dump {session.dump_path} (format v{dump.version}, written {dump.created_at})"]
        if err is not None:
            lines.append(f"error: {err.type}: {err.message.splitlines()[0] if err.message else ''}")
        seed = "-" if dump.seed is None else dump.seed
        lines.append(f"seed {seed}, step {dump.step}, epoch {dump.epoch}, {len(dump.nodes)} nodes, "
                     f"{len(dump.leases)} live leases, {len(dump.tickets)} live tickets")
        for c in dump.capture_errors:
            lines.append(f"not captured: {c.section} ({c.type}: {c.message})")
        if dump.extra.get("tree_core") == "unicache":
            lines.append("SGLang tree core 'unicache': node values are SGLang's KV indices (one per token); no tickets "
                         "or transfer engine: in-flight copies are write-through and load-back leases")
            refusals = dump.extra.get("load_back_refusals")
            if isinstance(refusals, list) and refusals and isinstance(refusals[-1], dict):
                lines.append(f"{len(refusals)} refused load-back(s), the last: {refusals[-1].get('detail')} "
                             "('events --kind note' lists them)")
        reproduce = dump.extra.get("reproduce")
        if isinstance(reproduce, str):
            lines.append(f"reproduce: {reproduce}")
        lines.append("read-only: tree, pins, leases, lease, history, tickets, events, stats, check, dot, dump, "
                     "assert. Commands that change a cache need a live one ('new').")
        self.console.print(Text("\n".join(lines)))
