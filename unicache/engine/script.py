"""Translate a recorded run into REPL script lines (checked and shortened by :mod:`unicache.repl.script_check`).

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

The REPL layer sits above the engine, so running the lines in a REPL session
(and shrinking them) lives in :mod:`unicache.repl.script_check`; the simulator
receives that writer as a :data:`unicache.engine.simulate.ScriptWriter` from the command line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from unicache.config import CacheConfig
from unicache.engine.oplog import Op


def tokens_text(tokens: Iterable[object]) -> str:
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
    return f"t:{tokens_text(tokens)}" if tokens else "root"


def new_command(config: CacheConfig) -> str:
    """The REPL ``new`` line recreating ``config`` with manual transfers."""
    parts = ["new", "--components", ",".join(c.__name__.lower() for c in config.components),
             "--page-size", str(config.page_size), "--device-tokens", str(config.device_tokens),
             "--write-policy", config.write_policy,
             "--write-through-threshold", str(config.write_through_threshold),
             "--load-back-threshold", str(config.load_back_threshold),
             "--kv-width", str(config.kv_width), "--mamba-width", str(config.mamba_width),
             "--dtype", config.dtype, "--token-bytes", str(config.token_bytes), "--device", "cpu",
             "--transfer", "manual"]
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
            lines.append(Line(f"match {tokens_text(op[1])}"))  # type: ignore[arg-type]
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
            lines.append(Line(f"insert {tokens_text(op[1])}"))  # type: ignore[arg-type]
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
        elif kind == "time_out":
            tid = op[1]
            assert isinstance(tid, int)
            lines.append(Line("time-out T{ticket}", uses_ticket=tid))
    lines.append(Line("assert clean"))
    return lines
