"""Graphviz DOT of a tree with its pins: one box per node, colored by how many components pin it."""

from __future__ import annotations

from unicache.dump.schema import CrashDump
from unicache.repl.refs import format_tokens

_FILL = {0: None, 1: "#fff3b0", 2: "#ffb3a7", 3: "#ff7b6b"}


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(view: CrashDump, top: int | None = None, *, leases: bool = False) -> str:
    """The subtree below `top` (the root by default) as a DOT digraph.

    Node label: id, edge span, tokens, per component tiers (D/H) and pinning
    leases. `leases=True` also draws each pinning lease as an ellipse with a
    dashed edge to every node it pins.
    """
    root = view.root if top is None else top
    lines = [
        "digraph unicache {",
        "  rankdir=TB;",
        '  node [shape=box, fontname="monospace", fontsize=10];',
        f"  label={_quote(f'unicache tree, epoch {view.epoch}, {len(view.leases)} live leases')};",
    ]
    shown: set[int] = set()
    used: set[int] = set()
    for node in view.subtree(root):
        shown.add(node.id)
        parts = [f"#{node.id}" + (" root" if node.parent is None else f" [{node.start}:{node.end})")]
        if node.key:
            parts.append(format_tokens(node.key, limit=4))
        parts.append("  ".join(f"{name} {r.tiers}" for name, r in node.components.items()))
        pins = node.pins()
        for name, ids in pins.items():
            parts.append(f"{name}: " + " ".join(f"L{i}" for i in ids))
            used.update(ids)
        attrs = [f"label={_quote(chr(10).join(parts))}"]
        fill = _FILL[min(len(pins), 3)]
        if fill is not None:
            attrs.append(f'style=filled, fillcolor="{fill}"')
        if len(pins) >= 2:
            attrs.append("penwidth=2")
        lines.append(f"  n{node.id} [{', '.join(attrs)}];")
    for node in view.subtree(root):
        for c in node.children:
            lines.append(f"  n{node.id} -> n{c};")
    if leases:
        for lid in sorted(used):
            lease = view.leases[lid]
            label = f"L{lid} {lease.component}\n{lease.owner}\ngen {lease.generation}"
            lines.append(f'  l{lid} [shape=ellipse, label={_quote(label)}];')
            for nid in lease.nodes:
                if nid in shown:
                    lines.append(f'  l{lid} -> n{nid} [style=dashed, label={_quote(lease.component)}];')
    lines.append("}")
    return "\n".join(lines) + "\n"
