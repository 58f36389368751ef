"""The interactive loop: prompt_toolkit prompt with history, completion and auto-suggestion."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from unicache.repl.commands import REGISTRY
from unicache.repl.conditions import NAMES as CONDITION_NAMES
from unicache.repl.errors import CommandInterrupted
from unicache.repl.executor import execute
from unicache.repl.interrupt import catch_interrupt
from unicache.repl.commands.meta import TOPICS
from unicache.repl.session import Session

if TYPE_CHECKING:
    from unicache.repl.output import Output

_NODE_ARGS = {"lock", "backup", "load-back", "pins", "tree", "history"}
_FIXED: dict[str, tuple[str, ...]] = {
    "evict": ("device", "host", "mamba", "swa"),
    "run": ("until",),
    "ack": ("all",),
}


class ReplCompleter(Completer):
    """Completes command names, options, fixed words, and the ids that exist in the session now."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def _names(self, command: str, word: str) -> list[str]:
        s = self.session
        out: list[str] = []
        cmd = REGISTRY.get(command)
        if word.startswith("-") and cmd is not None:
            for action in cmd.parser._actions:
                out.extend(o for o in action.option_strings if o.startswith("--"))
            return out
        if command == "help":
            return [*REGISTRY, *TOPICS]
        if command in ("run", "assert"):
            out.extend(CONDITION_NAMES)
        out.extend(_FIXED.get(command, ()))
        try:
            view = s.view() if (s.cache is not None or s.dump is not None) else None
        except Exception:
            view = None
        if view is not None:
            if command in _NODE_ARGS or command in ("run", "assert") or word.startswith("#"):
                out.extend(f"#{n}" for n in view.nodes)
                out.extend(f"@{a}" for a in s.aliases)
            if command in ("lease", "history") or word.startswith("L"):
                out.extend(f"L{i}" for i in view.leases)
            if command in ("ack", "withhold", "history") or word.startswith("T"):
                out.extend(f"T{t.id}" for t in view.tickets)
        if command == "unlock" or word.startswith("R"):
            out.extend(f"R{i}" for i in s.receipts)
        return out

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterable[Completion]:
        text = document.text_before_cursor.lstrip().lstrip("!").lstrip()
        words = text.split()
        if not words or (len(words) == 1 and not text.endswith(" ")):
            prefix = words[0] if words else ""
            for name in REGISTRY:
                if name.startswith(prefix):
                    yield Completion(name, start_position=-len(prefix), display_meta=REGISTRY[name].summary)
            return
        word = "" if text.endswith(" ") else words[-1]
        seen: set[str] = set()
        for candidate in self._names(words[0], word):
            if candidate.startswith(word) and candidate not in seen:
                seen.add(candidate)
                yield Completion(candidate, start_position=-len(word))


def run_interactive(session: Session, out: Output, history: Path | None) -> int:
    """Prompt until 'quit' or end of input; errors are shown, never fatal. Returns 0.

    Ctrl-C at the prompt clears the line; while a command runs it stops a step
    loop between steps (its outcome says where) and lets any other command
    finish; either way the prompt comes back with the session intact.
    """
    hist: History
    try:
        if history is None:
            raise OSError("no history file")
        history.parent.mkdir(parents=True, exist_ok=True)
        hist = FileHistory(str(history))
    except OSError:
        hist = InMemoryHistory()
    prompt: PromptSession[str] = PromptSession(
        history=hist, completer=ReplCompleter(session), auto_suggest=AutoSuggestFromHistory(),
        complete_while_typing=False,
    )
    session.notify = out.notice
    while not session.quit:
        label = {"dump": "unicache(dump)> ", "trace": "unicache(trace)> "}.get(session.mode, "unicache> ")
        try:
            text = prompt.prompt(label)
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        try:
            with catch_interrupt(session) as stop:
                outcome = execute(session, text)
            if outcome is not None:
                out.outcome(outcome)
            if stop and not (outcome is not None and isinstance(outcome.error, CommandInterrupted)):
                out.notice(f"interrupted by {stop.signal_name}: the command completed before it could stop")
        except KeyboardInterrupt:  # between commands (while printing): the session was not touched
            out.notice("interrupted by SIGINT while printing; the session is intact")
    return 0
