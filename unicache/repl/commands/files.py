"""Commands that write files: dot (Graphviz) and dump (a crash dump of the current state)."""

from __future__ import annotations

import os
from pathlib import Path

from unicache import outputs
from unicache.dump.schema import JSONObject
from unicache.repl.commands.base import Needs, command
from unicache.repl.dot import to_dot
from unicache.repl.errors import OutputPathError
from unicache.repl.parser import Args, ReplArgumentParser
from unicache.repl.session import Session


def check_target(s: Session, command: str, target: str, *, directory_ok: bool) -> None:
    """Refuse a target :mod:`unicache.outputs` refuses, one whose directory does not exist (the REPL
    creates none), and one that is a file this REPL run reads (``--dump``, ``--trace``, ``--script``)."""
    paths = outputs.OutputSet()
    for option, path in s.inputs:
        paths.input(path, option)
    names_dir = target.endswith(("/", os.sep))
    try:
        if directory_ok and (names_dir or Path(target).is_dir()):
            paths.directory(target, command, create=False)
        elif names_dir:
            raise OutputPathError(command, target, "directory does not exist (create it first)")
        else:
            paths.file(target, command, create_parents=False)
    except outputs.OutputPathError as exc:
        raise OutputPathError(command, target, exc.reason) from None


def _write(command: str, target: str, data: bytes) -> Path:
    """Write a checked target atomically; a failure is the command's OutputPathError, not a traceback."""
    try:
        return outputs.write_atomic(target, data, command)
    except (outputs.OutputPathError, outputs.OutputWriteError) as exc:
        raise OutputPathError(command, target, exc.reason) from None


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
    check_target(s, "dot", target, directory_ok=False)
    path = _write("dot", target, text.encode("utf-8"))
    return {"file": str(path.resolve()), "nodes": sum(1 for _ in view.subtree(top if top is not None else view.root))}


def _p_dump(p: ReplArgumentParser) -> None:
    p.add_argument("file", help="file (or directory, ending in /) to write the crash dump to")


@command("dump", "write a crash dump of the current state", Needs.VIEW, "files", _p_dump)
def cmd_dump(s: Session, a: Args) -> JSONObject:
    """Write the current state as a crash dump (the format 'unicache repl --dump' opens). On a
    loaded dump, writes that dump again. The directory must exist (OutputPathError otherwise)."""
    from unicache.dump.writer import capture, write_document

    target = a.get_str("file")
    check_target(s, "dump", target, directory_ok=True)
    cache = s.cache
    if cache is None or s.dump is not None:
        doc = s.view().to_json()
    else:
        doc = capture(cache, seed=s.seed, step=cache.ledger.step, extra={"source": s.source, "repl": True})
    try:
        path = write_document(doc, target, option="dump")
    except (outputs.OutputPathError, outputs.OutputWriteError) as exc:
        raise OutputPathError("dump", target, exc.reason) from None
    return {"file": str(path)}
