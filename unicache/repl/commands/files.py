"""Commands that write files: dot (Graphviz) and dump (a crash dump of the current state)."""

from __future__ import annotations

import os
from pathlib import Path

from unicache.dump.schema import JSONObject
from unicache.repl.commands.base import Needs, command
from unicache.repl.dot import to_dot
from unicache.repl.errors import OutputPathError
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.session import Session


def check_target(command: str, target: str, *, directory_ok: bool) -> None:
    """Refuse a target whose directory does not exist (no directory is created silently)."""
    path = Path(target)
    names_dir = target.endswith(("/", os.sep))
    if path.is_dir() and not directory_ok:
        raise OutputPathError(command, target, "is a directory")
    if names_dir or path.is_dir():
        if not directory_ok or not path.is_dir():
            raise OutputPathError(command, target, "directory does not exist (create it first)")
        return
    if not path.parent.is_dir():
        raise OutputPathError(command, target, f"directory {path.parent} does not exist (create it first)")


def _p_dot(p: ReplArgumentParser) -> None:
    p.add_argument("file", help="where to write the DOT text ('-' prints it)")
    p.add_argument("--node", default=None, help="only the subtree below this node")
    p.add_argument("--leases", action="store_true", help="also draw each pinning lease, linked to its nodes")


@command("dot", "write the tree with pins as Graphviz DOT", Needs.VIEW, "files", _p_dot)
def cmd_dot(s: Session, a: Args) -> JSONObject:
    """Write the tree (or the subtree below --node) as a Graphviz digraph: nodes labelled with their
    span, tokens, residency and pinning leases, filled by how many components pin them.
    Render with: dot -Tsvg FILE -o tree.svg. FILE's directory must exist (OutputPathError otherwise)."""
    view = s.view()
    node = a.opt_str("node")
    top = s.node_id(node) if node is not None else None
    text = to_dot(view, top, leases=a.flag("leases"))
    target = a.get_str("file")
    if target == "-":
        return {"file": None, "nodes": sum(1 for _ in view.subtree(top if top is not None else view.root)),
                "dot": text}
    path = Path(target)
    check_target("dot", target, directory_ok=False)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OutputPathError("dot", target, exc.strerror or str(exc)) from None
    return {"file": str(path.resolve()), "nodes": sum(1 for _ in view.subtree(top if top is not None else view.root))}


def _p_dump(p: ReplArgumentParser) -> None:
    p.add_argument("file", help="file (or directory, ending in /) to write the crash dump to")


@command("dump", "write a crash dump of the current state", Needs.VIEW, "files", _p_dump)
def cmd_dump(s: Session, a: Args) -> JSONObject:
    """Write the current state as a crash dump (the format 'unicache repl --dump' opens). On a
    loaded dump, writes that dump again. The directory must exist (OutputPathError otherwise)."""
    from unicache.dump.writer import capture, write_document

    target = a.get_str("file")
    check_target("dump", target, directory_ok=True)
    cache = s.cache
    if cache is None or s.dump is not None:
        doc = s.view().to_json()
    else:
        doc = capture(cache, seed=s.seed, step=cache.ledger.step, extra={"source": s.source, "repl": True})
    try:
        path = write_document(doc, target)
    except OSError as exc:
        raise OutputPathError("dump", target, exc.strerror or str(exc)) from None
    return {"file": str(path)}
