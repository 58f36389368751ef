"""Write a recorded run as a REPL script, checked and shortened by replaying it in the REPL.

Translation of the run's :class:`OpLog` (one REPL command per cache operation):

- ``new`` with the run's configuration and ``--transfer manual`` (acks only by command);
- a request's match -> ``match``; its load-back -> ``load-back t:PATH`` followed by
  ``withhold`` (so only the explicit ack the engine delivered completes it);
- the engine's ack of a load-back -> ``ack T<id>`` (``--fail`` for a failed copy; a
  second ack of the same ticket is the duplicate); acks of cache-owned backups ->
  ``ack all``;
- lock / unlock -> ``lock t:PATH`` / ``unlock R<id>``; an insert -> ``insert TOKENS``;
- chaos operations -> ``reset``, ``evict ...``, ``reclaim N``, ``backup t:PATH``;
- at the end ``assert clean``.

The script is then executed in an in-process REPL session: ticket and receipt ids are
rewritten to the ones the REPL issues, and the outcome is compared with the run's
failure. When it reproduces, lines are removed while it still fails the same way
(delta debugging). The file's header says whether it reproduces.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from unicache.config import CacheConfig
from unicache.engine.oplog import Op

if TYPE_CHECKING:
    from unicache.engine.simulate import SimResult


def _tokens(tokens: Iterable[object]) -> str:
    """Compact token list: runs of consecutive ids as ``A..B``."""
    vals = [int(str(t)) for t in tokens]
    out: list[str] = []
    i = 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(f"{vals[i]}..{vals[j]}" if j - i >= 2 else ",".join(str(v) for v in vals[i:j + 1]))
        i = j + 1
    return ",".join(out)


def _path(tokens: object) -> str:
    assert isinstance(tokens, tuple)
    return f"t:{_tokens(tokens)}" if tokens else "root"


def new_command(config: CacheConfig) -> str:
    """The REPL ``new`` line recreating ``config`` with manual transfers."""
    parts = ["new", "--components", ",".join(c.__name__.lower() for c in config.components),
             "--page-size", str(config.page_size), "--device-tokens", str(config.device_tokens),
             "--write-policy", config.write_policy,
             "--write-through-threshold", str(config.write_through_threshold),
             "--load-back-threshold", str(config.load_back_threshold),
             "--kv-width", str(config.kv_width), "--mamba-width", str(config.mamba_width),
             "--dtype", config.dtype, "--device", "cpu", "--transfer", "manual"]
    if config.host_tokens is not None:
        parts += ["--host-tokens", str(config.host_tokens)]
    else:
        parts += ["--host-ratio", str(config.ratio)]
    if config.swa_window is not None:
        parts += ["--swa-window", str(config.swa_window)]
    if config.mamba:
        parts += ["--mamba-slots", str(config.mamba_device_slots)]
        if config.mamba_host_slots is not None:
            parts += ["--mamba-host-slots", str(config.mamba_host_slots)]
    return " ".join(parts)


@dataclass(slots=True)
class Line:
    """One script line; ``ticket``/``receipt`` name the run's id the line refers to or creates."""

    text: str
    creates_ticket: int | None = None
    creates_receipt: int | None = None
    uses_ticket: int | None = None
    uses_receipt: int | None = None


def translate(ops: list[Op]) -> list[Line]:
    """OpLog entries -> script lines (ids still the run's own)."""
    lines: list[Line] = []
    load_backs: set[int] = set()
    for op in ops:
        kind = op[0]
        if kind == "match":
            lines.append(Line(f"match {_tokens(op[1])}"))  # type: ignore[arg-type]
        elif kind == "load_back":
            tid = op[2]
            assert isinstance(tid, int)
            load_backs.add(tid)
            lines.append(Line(f"load-back {_path(op[1])}", creates_ticket=tid))
            lines.append(Line("withhold T{ticket}", uses_ticket=tid))
        elif kind == "ack":
            tid, ok = op[1], op[3]
            assert isinstance(tid, int)
            if tid in load_backs:
                lines.append(Line("ack T{ticket}" + ("" if ok else " --fail"), uses_ticket=tid))
            elif not lines or lines[-1].text != "ack all":
                lines.append(Line("ack all"))
        elif kind == "lock":
            rid = op[2]
            assert isinstance(rid, int)
            lines.append(Line(f"lock {_path(op[1])}", creates_receipt=rid))
        elif kind == "unlock":
            rid = op[1]
            assert isinstance(rid, int)
            lines.append(Line("unlock R{receipt}", uses_receipt=rid))
        elif kind == "insert":
            lines.append(Line(f"insert {_tokens(op[1])}"))  # type: ignore[arg-type]
        elif kind == "reset":
            lines.append(Line("reset"))
        elif kind == "evict":
            comp, tier, n = op[1], op[2], op[3]
            if comp == "full":
                lines.append(Line(f"evict {tier} {n}"))
            else:
                lines.append(Line(f"evict {comp} {n}" + (" --host" if tier == "host" else "")))
        elif kind == "reclaim":
            lines.append(Line(f"reclaim {op[1]}"))
        elif kind == "backup":
            lines.append(Line(f"backup {_path(op[1])}"))
        elif kind == "step":
            lines.append(Line(f"# engine step {op[1]}"))
        elif kind == "abandon":
            tid = op[1]
            assert isinstance(tid, int)
            lines.append(Line("abandon T{ticket}", uses_ticket=tid))
    lines.append(Line("assert clean"))
    return lines


@dataclass(slots=True)
class Replay:
    """What running a script in the REPL gave: the rendered text and the first failure."""

    text: list[str]
    failure: tuple[str, str] | None


def run_in_repl(header: str, lines: list[Line]) -> Replay | None:
    """Execute ``lines`` after ``header`` (the ``new`` line) in a fresh REPL session.

    Ids are rewritten as the REPL issues them. Returns None when the REPL is not
    importable. ``failure`` is (command, error type) of the first line that
    failed, or None if the whole script passed.
    """
    try:
        from unicache.repl.executor import execute
        from unicache.repl.session import Session
    except ImportError:
        return None
    session = Session()
    tickets: dict[int, int] = {}
    receipts: dict[int, int] = {}
    text: list[str] = []
    failure: tuple[str, str] | None = None
    try:
        for line in [Line(header), *lines]:
            if line.uses_ticket is not None and line.uses_ticket not in tickets:
                continue
            if line.uses_receipt is not None and line.uses_receipt not in receipts:
                continue
            rendered = line.text.format(ticket=tickets.get(line.uses_ticket or -1, "?"),
                                        receipt=receipts.get(line.uses_receipt or -1, "?"))
            text.append(rendered)
            if rendered.startswith("#"):
                continue
            out = execute(session, rendered)
            if out is None:
                continue
            env = out.envelope
            if not out.ok:
                err = env.get("error")
                etype = str(err.get("type")) if isinstance(err, dict) else "error"
                failure = (str(env.get("cmd")), etype)
                break
            if line.creates_ticket is not None:
                got = env.get("ticket")
                if isinstance(got, int):
                    tickets[line.creates_ticket] = got
            if line.creates_receipt is not None:
                got = env.get("receipt")
                if isinstance(got, int):
                    receipts[line.creates_receipt] = got
    finally:
        try:
            session.close()
        except Exception:  # closing a session whose cache failed may fail too; the outcome is known
            pass
    return Replay(text, failure)


def shorten(header: str, lines: list[Line], target: tuple[str, str], *, budget: int = 150) -> list[Line]:
    """Remove lines (chunks, then single lines) while the REPL still fails with ``target``.

    The closing ``assert clean`` is always kept.
    """
    tail = lines[-1:] if lines and lines[-1].text == "assert clean" else []
    keep = lines[: len(lines) - len(tail)]
    runs = 0
    chunk = max(1, len(keep) // 2)
    while chunk >= 1 and keep and runs < budget:
        i = 0
        changed = False
        while i < len(keep) and runs < budget:
            cand = keep[:i] + keep[i + chunk:]
            runs += 1
            r = run_in_repl(header, cand + tail)
            if r is not None and r.failure == target:
                keep = cand
                changed = True
            else:
                i += chunk
        if not changed:
            chunk //= 2
    return keep + tail


def write_script(result: SimResult, path: Path) -> Path:
    """Translate, check and shorten ``result``'s recorded run; write the script to ``path``."""
    log = result.oplog
    assert log is not None
    header = new_command(log.config)
    lines = translate(log.ops)
    replay = run_in_repl(header, lines)
    sc = result.scenario
    err = result.error
    notes = [f"# unicache simulate, seed {sc.seed}, shrunk scenario: {sc.describe()}",
             f"# the run failed at engine step {result.steps}: "
             f"{type(err).__name__ if err else 'no error'}: {str(err).splitlines()[0] if err else ''}",
             f"# reproduce the run: {sc.command()}"]
    if replay is None:
        body = [header, *(line.text for line in lines)]
        notes.append("# not checked: the REPL is not available; ticket/receipt ids are the run's own")
    elif replay.failure is None:
        body = replay.text
        notes.append("# replayed in the REPL: it did NOT fail there (the run's failure needs the engine's data "
                     "path or timing); the script shows the cache operations up to the failure")
    else:
        short = shorten(header, lines, replay.failure)
        final = run_in_repl(header, short)
        body = final.text if final is not None else replay.text
        notes.append(f"# replayed in the REPL: fails at '{replay.failure[0]}' with {replay.failure[1]} "
                     f"({len(body)} of {len(lines) + 1} lines kept)")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*notes, *body]) + "\n", encoding="utf-8")
    return path
