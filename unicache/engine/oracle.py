"""The data oracle: compares cached KV and state with the reference model, byte for byte.

Two entry points: :meth:`DataOracle.verify_prefix` checks exactly what a
request is about to reuse (Full KV of the whole prefix, the SWA window, the
Mamba state at the prefix end); :meth:`DataOracle.verify_tree` checks every
slot the tree has published, on both tiers. A mismatch raises
:class:`CorruptionError` naming the component, tier, node and token position.
"""

from __future__ import annotations

import numpy as np
import torch

from unicache.cache import UniCache
from unicache.markers import SWA, Full, Mamba
from unicache.engine.errors import CorruptionError
from unicache.engine.reference import PrefixHashes, ReferenceModel
from unicache.transfer.base import Tier
from unicache.tree.node import Node


CHUNK_TOKENS = 1 << 18
"""Tokens of nodes the whole-tree oracle hashes and compares at a time (bounds its memory)."""


def path_to(node: Node) -> list[Node]:
    """Nodes from the root's child down to ``node`` (empty for the root)."""
    out: list[Node] = []
    x: Node | None = node
    while x is not None and x.parent is not None:
        out.append(x)
        x = x.parent
    out.reverse()
    return out


class DataOracle:
    """Checks cache contents against a :class:`ReferenceModel` (see the module docstring)."""

    def __init__(self, cache: UniCache, model: ReferenceModel) -> None:
        self.cache = cache
        self.model = model
        self.ps = cache.config.page_size
        self.swa_window = cache.config.swa_window
        self.mamba = cache.config.mamba
        self.checked_tokens = 0
        self.checked_states = 0

    def _rows(self, component: type, tier: Tier, pages: list[int]) -> torch.Tensor:
        data = self.cache.read_slots(component, pages, tier)
        return data.reshape(len(pages) * self.ps, -1)

    @staticmethod
    def _compare(found: torch.Tensor, expected: torch.Tensor, *, request: int | None, component: str,
                 tier: str, node_id: int | None, first_position: int, where: str) -> None:
        if found.shape == expected.shape and torch.equal(found, expected):
            return
        if found.shape != expected.shape:
            raise CorruptionError(request=request, component=component, tier=tier, node_id=node_id,
                                  position=first_position, expected=f"shape {tuple(expected.shape)}",
                                  found=f"shape {tuple(found.shape)}", where=where)
        bad = (found != expected).reshape(found.shape[0], -1).any(1).nonzero()
        row = int(bad[0]) if bad.numel() else 0
        raise CorruptionError(request=request, component=component, tier=tier, node_id=node_id,
                              position=first_position + row, expected=expected[row].tolist(),
                              found=found[row].tolist(), where=where)

    def verify_prefix(self, request: int, h: PrefixHashes, node: Node, length: int) -> None:
        """Check what a request reuses: ``tokens[:length]`` ending at ``node`` (on device)."""
        if length == 0:
            return
        if node.end != length:
            raise CorruptionError(request=request, component="full", tier="device", node_id=node.id,
                                  position=length, expected=f"prefix end {length}", found=f"node end {node.end}",
                                  where="locked node does not end at the reused prefix")
        path = path_to(node)
        comps = self.cache.components
        pages: list[int] = []
        for x in path:
            dev = comps.full.device_slots(x)
            if dev is None:
                raise CorruptionError(request=request, component="full", tier="device", node_id=x.id,
                                      position=x.start, expected="device pages", found="none",
                                      where="reused prefix node not on device")
            pages.extend(dev)
        found = self._rows(Full, Tier.DEVICE, pages)[:length]
        self._compare(found, self.model.kv(h, 0, length), request=request, component="full",
                      tier="device", node_id=node.id, first_position=0, where=f"prefix 0..{length}")
        self.checked_tokens += length
        window = self.swa_window
        if window is not None:
            self._verify_window(request, h, [x for x in path if x.end > length - window], length)
        if self.mamba:
            slot = comps.mamba.device_state(node)
            if slot is None:
                raise CorruptionError(request=request, component="mamba", tier="device", node_id=node.id,
                                      position=length, expected="a device state", found="none",
                                      where="Mamba state at the reused prefix end")
            found_state = self.cache.read_slots(Mamba, [slot], Tier.DEVICE)[0]
            self._compare(found_state.unsqueeze(0), self.model.mamba_state(h, length).unsqueeze(0),
                          request=request, component="mamba", tier="device", node_id=node.id,
                          first_position=length, where=f"state after {length} tokens")
            self.checked_states += 1

    def _verify_window(self, request: int, h: PrefixHashes, nodes: list[Node], length: int) -> None:
        """The SWA window nodes at the end of a reused prefix, read and compared in one go.

        The nodes are consecutive on the path, so their pages hold tokens
        ``nodes[0].start..length``; on a mismatch they are compared one by one
        to name the node.
        """
        swa = self.cache.components.swa
        pages: list[int] = []
        for x in nodes:
            sdev = swa.device_slots(x)
            if sdev is None:
                raise CorruptionError(request=request, component="swa", tier="device", node_id=x.id,
                                      position=x.start, expected="device pages", found="none",
                                      where=f"SWA window node of prefix {length} not on device")
            pages.extend(sdev)
        if not nodes:
            return
        found = self._rows(SWA, Tier.DEVICE, pages)
        if torch.equal(found, self.model.swa_kv(h, nodes[0].start, length)):
            return
        for x in nodes:
            sdev = swa.device_slots(x)
            assert sdev is not None
            self._compare(self._rows(SWA, Tier.DEVICE, sdev), self.model.swa_kv(h, x.start, x.end),
                          request=request, component="swa", tier="device", node_id=x.id,
                          first_position=x.start, where=f"window tokens {x.start}..{x.end}")
        self._compare(found, self.model.swa_kv(h, nodes[0].start, length), request=request, component="swa",
                      tier="device", node_id=nodes[-1].id, first_position=nodes[0].start,
                      where=f"window tokens {nodes[0].start}..{length}")

    def verify_rows(self, request: int, component: type, pages: list[int], expected: torch.Tensor,
                    first_position: int, where: str) -> None:
        """Check request-owned device pages still hold what the request wrote (``expected`` rows)."""
        if not pages:
            return
        found = self._rows(component, Tier.DEVICE, pages)[: expected.shape[0]]
        self._compare(found, expected, request=request, component=component.__name__.lower(), tier="device",
                      node_id=None, first_position=first_position, where=where)

    def verify_state(self, request: int, slot: int, expected: torch.Tensor, position: int, where: str) -> None:
        """Check a request-owned Mamba slot still holds ``expected``."""
        found = self.cache.read_slots(Mamba, [slot], Tier.DEVICE)
        self._compare(found, expected.unsqueeze(0), request=request, component="mamba", tier="device",
                      node_id=None, first_position=position, where=where)

    def verify_tree(self, only: list[Node] | None = None) -> int:
        """Check every published slot of every node (or of just ``only``) on both tiers; returns the nodes checked.

        Vectorised per chunk of about ``CHUNK_TOKENS`` tokens of nodes in
        pre-order (with ``only``: those nodes and their ancestors, by
        position): one pass computes the prefix hash of every token of the
        chunk, continuing each node's parent's hash from the chunks before,
        then each (component, tier) of the chunk is read and compared in one
        go. Memory stays bounded by the chunk, not the tree.
        """
        if only is None:
            nodes = [x for x in self.cache.nodes() if x.parent is not None]
            wanted: set[int] | None = None
        else:
            wanted = {x.id for x in only}
            found_nodes: dict[int, Node] = {}
            for x in only:
                y: Node | None = x
                while y is not None and y.parent is not None and y.id not in found_nodes:
                    found_nodes[y.id] = y
                    y = y.parent
            nodes = sorted(found_nodes.values(), key=lambda n: n.start)
        carry: dict[int, int] = {}
        chunk: list[Node] = []
        size = 0
        for x in nodes:
            chunk.append(x)
            size += x.end - x.start
            if size >= CHUNK_TOKENS:
                self._verify_chunk(chunk, wanted, carry)
                chunk = []
                size = 0
        if chunk:
            self._verify_chunk(chunk, wanted, carry)
        return len(nodes) if wanted is None else len(wanted)

    def _verify_chunk(self, nodes: list[Node], wanted: set[int] | None, carry: dict[int, int]) -> None:
        """Check ``nodes`` (parents before children); ``carry`` maps node id -> prefix hash at its end.

        The index arithmetic runs on numpy views (the same int64 values, a
        fraction of torch's per-call cost on these small arrays); rows are
        compared as torch tensors.
        """
        model = self.model
        n = len(nodes)
        lengths = np.fromiter((x.end - x.start for x in nodes), dtype=np.int64, count=n)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        first = offsets[:-1]
        keys = b"".join(x.kb for x in nodes)
        if self.cache.config.token_bytes == 4:
            tokens = np.frombuffer(keys, dtype=np.int32).astype(np.int64)
        else:
            tokens = np.frombuffer(keys, dtype=np.int64)
        owner = np.repeat(np.arange(n), lengths)
        starts = np.fromiter((x.start for x in nodes), dtype=np.int64, count=n)
        positions = np.arange(tokens.shape[0], dtype=np.int64) + (starts - first)[owner]
        before = np.zeros(tokens.shape[0] + 1, dtype=np.int64)
        np.cumsum(model.token_terms_array(tokens, positions), out=before[1:])
        del positions
        node_sum = (before[offsets[1:]] - before[first]).tolist()
        carry_in = [0] * n
        carry_out = [0] * n
        for i, x in enumerate(nodes):
            parent = x.parent
            assert parent is not None
            carry_in[i] = carry.get(parent.id, 0)
            carry_out[i] = carry_in[i] + int(node_sum[i])
            carry[x.id] = carry_out[i]
        values = before[1:] + (np.array(carry_in, dtype=np.int64) - before[first])[owner]
        del before
        comps = self.cache.components
        for store, tier, rows in (
            (comps.full, Tier.DEVICE, model.kv_rows), (comps.full, Tier.HOST, model.kv_rows),
            (comps.swa, Tier.DEVICE, model.swa_rows), (comps.swa, Tier.HOST, model.swa_rows),
        ):
            if store not in comps.configured:
                continue
            component = store.marker
            read = store.device_slots if tier is Tier.DEVICE else store.host_slots
            chosen = [i for i, x in enumerate(nodes)
                      if read(x) is not None and (wanted is None or x.id in wanted)]
            if not chosen:
                continue
            pages: list[int] = []
            for i in chosen:
                got = read(nodes[i])
                assert got is not None
                pages.extend(got)
            if len(chosen) == n:
                idx = np.arange(tokens.shape[0])
            else:
                picked = np.zeros(n, dtype=np.bool_)
                picked[chosen] = True
                idx = np.flatnonzero(picked[owner])
            found = self._rows(component, tier, pages)
            expected = rows(values[idx])
            if not torch.equal(found, expected):
                bad = int((found != expected).any(1).nonzero()[0])
                tok = int(idx[bad])
                x = nodes[int(owner[tok])]
                raise CorruptionError(request=None, component=component.__name__.lower(), tier=tier.value,
                                      node_id=x.id, position=x.start + tok - int(offsets[int(owner[tok])]),
                                      expected=expected[bad].tolist(), found=found[bad].tolist(),
                                      where=f"tokens {x.start}..{x.end}")
            del found, expected, idx
        if self.mamba:
            mamba = comps.mamba
            for tier in (Tier.DEVICE, Tier.HOST):
                state = mamba.device_state if tier is Tier.DEVICE else mamba.host_state
                chosen = [i for i, x in enumerate(nodes)
                          if state(x) is not None and (wanted is None or x.id in wanted)]
                if not chosen:
                    continue
                slots = [int(state(nodes[i]) or 0) for i in chosen]
                found = self.cache.read_slots(Mamba, slots, tier)
                expected = model.mamba_rows(np.array([carry_out[i] for i in chosen], dtype=np.int64),
                                            np.array([nodes[i].end for i in chosen], dtype=np.int64))
                if not torch.equal(found, expected):
                    bad = int((found != expected).any(1).nonzero()[0])
                    x = nodes[chosen[bad]]
                    raise CorruptionError(request=None, component="mamba", tier=tier.value, node_id=x.id,
                                          position=x.end, expected=expected[bad].tolist(),
                                          found=found[bad].tolist(), where=f"state after {x.end} tokens")
