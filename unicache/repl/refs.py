"""Names the REPL accepts: token lists, nodes (by id or token path), leases, tickets, receipts.

Notation (also how output prints them): node `#12` (or `12`), a node by the
token path ending at it `t:1,2,3` (ranges allowed: `t:1..8,20`), the root
`root`, nodes from the last `match` `@device` / `@anchor`, the end node of the
last `insert` `@last`; lease `L7` (or `7`), ticket `T3` (or `3`), lock
receipt `R2` (or `2`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from unicache.dump.schema import CrashDump
from unicache.repl.errors import CommandSyntaxError, UnknownNameError

MAX_TOKENS = 1_000_000


def parse_tokens(items: Iterable[str], *, what: str = "tokens") -> list[int]:
    """Token ids from words like `5`, `1,2,3`, `1..8` (inclusive) in any mix."""
    out: list[int] = []
    for item in items:
        for part in item.split(","):
            if not part:
                continue
            lo, sep, hi = part.partition("..")
            try:
                if sep:
                    a, b = int(lo), int(hi)
                    if b < a:
                        raise CommandSyntaxError("", f"{what}: range {part!r} is empty (end before start)")
                    if b - a + 1 + len(out) > MAX_TOKENS:
                        raise CommandSyntaxError("", f"{what}: more than {MAX_TOKENS} tokens")
                    out.extend(range(a, b + 1))
                else:
                    out.append(int(part))
            except ValueError:
                raise CommandSyntaxError("", f"{what}: {part!r} is not a token id or a range A..B") from None
    for t in out:
        if t < 0:
            raise CommandSyntaxError("", f"{what}: token id {t} is negative")
    return out


def format_tokens(tokens: tuple[int, ...] | list[int], limit: int = 12) -> str:
    """Compact rendering: consecutive runs as ranges, long lists elided."""
    parts: list[str] = []
    i = 0
    n = len(tokens)
    while i < n:
        j = i
        while j + 1 < n and tokens[j + 1] == tokens[j] + 1:
            j += 1
        parts.append(f"{tokens[i]}..{tokens[j]}" if j - i >= 2 else ",".join(str(t) for t in tokens[i : j + 1]))
        i = j + 1
    text = ",".join(parts)
    if len(parts) > limit:
        text = ",".join(parts[:limit]) + f",… ({n} tokens)"
    return text


def _prefixed_int(text: str, letters: str, kind: str) -> int:
    body = text[1:] if text[:1] in letters else text
    try:
        value = int(body)
    except ValueError:
        raise CommandSyntaxError("", f"{text!r} is not a {kind} id (write {letters[0]}N or N)") from None
    if value < 0:
        raise CommandSyntaxError("", f"{kind} id {value} is negative")
    return value


def parse_lease(text: str) -> int:
    return _prefixed_int(text, "Ll", "lease")


def parse_ticket(text: str) -> int:
    return _prefixed_int(text, "Tt", "ticket")


def parse_receipt(text: str) -> int:
    return _prefixed_int(text, "Rr", "receipt")


@dataclass(frozen=True, slots=True)
class NodeRef:
    """A node name before resolution: exactly one of `id`, `tokens`, `alias` is set."""

    text: str
    id: int | None = None
    tokens: tuple[int, ...] | None = None
    alias: str | None = None


def parse_node(text: str) -> NodeRef:
    if text == "root":
        return NodeRef(text, tokens=())
    if text.startswith("@"):
        return NodeRef(text, alias=text[1:])
    if text.startswith("t:"):
        return NodeRef(text, tokens=tuple(parse_tokens([text[2:]], what=f"node path {text!r}")))
    body = text[1:] if text.startswith("#") else text
    try:
        value = int(body)
    except ValueError:
        raise CommandSyntaxError(
            "", f"{text!r} is not a node: write #ID, ID, t:TOKENS (the path ending at it), root, "
            f"@device, @anchor or @last"
        ) from None
    return NodeRef(text, id=value)


def resolve_node(view: CrashDump, ref: NodeRef, aliases: Mapping[str, int]) -> int:
    """The id of the node `ref` names in `view`; `UnknownNameError` when it names none."""
    if ref.alias is not None:
        node_id = aliases.get(ref.alias)
        if node_id is None:
            known = ", ".join(f"@{a}" for a in sorted(aliases)) or "none yet"
            raise UnknownNameError("node", ref.text, f"no such alias (defined: {known})")
        if node_id not in view.nodes:
            raise UnknownNameError("node", ref.text, f"was node #{node_id}, which is no longer in the tree")
        return node_id
    if ref.id is not None:
        if ref.id not in view.nodes:
            raise UnknownNameError("node", ref.text, "no such node in the tree (removed, reset, or never created)")
        return ref.id
    assert ref.tokens is not None
    return walk_path(view, ref.tokens, ref.text)


def _common(key: tuple[int, ...], tokens: tuple[int, ...], pos: int) -> int:
    """How many leading tokens of `key` equal `tokens[pos:]` (without copying the rest)."""
    n = min(len(key), len(tokens) - pos)
    i = 0
    while i < n and key[i] == tokens[pos + i]:
        i += 1
    return i


def walk_path(view: CrashDump, tokens: tuple[int, ...], name: str) -> int:
    """The node whose path is exactly `tokens`, never splitting anything."""
    node = view.nodes[view.root]
    pos = 0
    while pos < len(tokens):
        best = None
        best_len = 0
        for cid in node.children:
            child = view.nodes[cid]
            m = _common(child.key, tokens, pos)
            if m > best_len:
                best, best_len = child, m
        if best is None:
            raise UnknownNameError(
                "node", name, f"the tree has no edge for token {tokens[pos]} at position {pos} "
                f"(below node #{node.id})"
            )
        if best_len < len(best.key):
            where = "ends" if pos + best_len == len(tokens) else "diverges"
            raise UnknownNameError(
                "node", name, f"{where} inside node #{best.id} [{best.start}:{best.end}) at position "
                f"{pos + best_len}; a node is named by the whole token path to its end"
            )
        pos += best_len
        node = best
    return node.id
