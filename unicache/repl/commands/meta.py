"""Session commands: help, assert, quit."""

from __future__ import annotations

from unicache.dump.schema import JSON, JSONObject
from unicache.repl.commands.base import REGISTRY, Needs, command
from unicache.repl.conditions import HELP as CONDITIONS_HELP
from unicache.repl.conditions import Probe, parse_condition
from unicache.repl.errors import CommandSyntaxError, ConditionError
from unicache.repl.parser import ALIASES, Args, ReplArgumentParser
from unicache.repl.refs import __doc__ as NAMES_DOC
from unicache.repl.session import Session

TOPICS = {
    "conditions": CONDITIONS_HELP,
    "names": (NAMES_DOC or "").split("\n\n", 1)[-1].strip(),
    "scripts": (
        "Scripts: one command per line; a line starting with '#' is a comment (there are no\n"
        "trailing comments: #12 names node 12); a line starting with '!' must fail\n"
        "(the script stops at the first command that does not do what it should, unless\n"
        "--keep-going). With --json every command prints one JSON object:\n"
        '  {"cmd": NAME, "args": [...], "ok": true, ...result}  or\n'
        '  {"cmd": NAME, "args": [...], "ok": false, "error": {"type": ..., "message": ...}}\n'
        "Exit status: 0 every line did what it should, 1 one did not, 2 a bad option or a script\n"
        "that cannot be read (a regular UTF-8 file of at most 64 MiB, lines of at most 8 MiB),\n"
        "130 Ctrl-C (a step loop stops between two steps; the script stops at that line)."
    ),
}


def _p_help(p: ReplArgumentParser) -> None:
    p.add_argument("topic", nargs="?", default=None, help="a command, or: conditions, names, scripts")


@command("help", "list commands, or explain one", Needs.NOTHING, "session", _p_help)
def cmd_help(s: Session, a: Args) -> JSONObject:
    """List every command (marking those that need a live cache), or show one command's usage and
    help; 'help conditions', 'help names' and 'help scripts' explain those topics."""
    topic = a.opt_str("topic")
    if topic is None:
        rows: list[JSON] = [
            {"name": c.name, "summary": c.summary, "group": c.group, "needs": c.needs.value}
            for c in REGISTRY.values()
        ]
        return {"commands": rows, "mode": s.mode, "source": s.source}
    if topic in TOPICS:
        return {"topic": topic, "help": TOPICS[topic]}
    name = ALIASES.get(topic, topic)
    cmd = REGISTRY.get(name)
    if cmd is None:
        raise CommandSyntaxError("help", f"no command or topic {topic!r} (try 'help')")
    return {
        "command": cmd.name,
        "needs": cmd.needs.value,
        "usage": cmd.usage,
        "help": cmd.parser.format_help(),
    }


def _p_assert(p: ReplArgumentParser) -> None:
    p.add_argument("condition", nargs="+", help="a condition (see 'help conditions')")
    p.add_argument("--not", dest="negate", action="store_true", help="assert that the condition does NOT hold")
    p.epilog = CONDITIONS_HELP


@command("assert", "fail unless a condition holds (turns a session into a test)", Needs.VIEW, "session",
         _p_assert)
def cmd_assert(s: Session, a: Args) -> JSONObject:
    """Check CONDITION now and fail (ConditionError) if it does not hold (or holds, with --not).
    Event conditions (stale-ack, leak, ...) count everything since the cache was created."""
    cond = parse_condition(a.strs("condition"))
    probe = Probe(s)
    holds = cond.holds(probe, {})
    negate = a.flag("negate")
    if holds == negate:
        raise ConditionError(cond.text, "holds" if negate else "does not hold",
                             expected=f"not {cond.text}" if negate else cond.text, actual=cond.actual(probe, {}))
    return {"condition": cond.text, "holds": holds, "negated": negate}


@command("quit", "leave the REPL", Needs.NOTHING, "session")
def cmd_quit(s: Session, a: Args) -> JSONObject:
    """Leave the REPL (Ctrl-D works too)."""
    s.quit = True
    return {}
