"""The warm eviction of `bench_scale.py`: a read-only replay of a device pass on views of the eviction queues.

`next_victim` replays what `DevicePass.next_victim` and `Evictor.demote` do
to the queues (the same sift algorithm as the queue the build uses: the
8-ary `LazyLRU` compiled, `HeapqLRU` interpreted) with writes going to an
overlay, so it reads every queue position the real call will read, and
finds the victim; `touch_eviction` reads the rest of what evicting it
reads. Run just before a timed eviction, they make that call's data
cache-resident.
"""

from __future__ import annotations

from unicache import UniCache
from unicache.tree import Node
from unicache.tree.lru import ARITY, E_MAX, FIELD_BITS, ID_MASK, EvictionQueue, HeapqLRU, LazyLRU, before

class HeapView:
    """A read-only view of a `HeapqLRU` that replays its pops and pushes (`heapq`'s sift) on top of it.

    Writes go to an overlay (position -> key), so replaying an eviction's
    pops and pushes reads exactly the keys the real ones will read (the same
    sift algorithm as `heapq`), and each popped key's node through `by_id`,
    and changes nothing.
    """

    __slots__ = ("base", "by_id", "over", "n", "popped")

    def __init__(self, q: HeapqLRU) -> None:
        self.base = q.heap
        self.by_id = q.by_id
        self.over: dict[int, int] = {}
        self.n = len(self.base)
        self.popped = 0

    def get(self, i: int) -> int:
        e = self.over.get(i)
        return self.base[i] if e is None else e

    def pop(self) -> Node | None:
        """`HeapqLRU.pop`'s reads: keys popped, stale ones pushed again."""
        while (k := self.pop_entry()) is not None:
            self.popped += 1
            node = self.by_id[k & ID_MASK]
            if k >> (2 * FIELD_BITS) != node.last_access and node.alive:
                self.push(node)
                continue
            return node
        return None

    def pop_entry(self) -> int | None:
        if not self.n:
            return None
        self.n -= 1
        last = self.get(self.n)
        if not self.n:
            return last
        top = self.get(0)
        self.over[0] = last
        self.sink(0)
        return top

    def push(self, node: Node) -> None:
        self.over[self.n] = (((node.last_access << FIELD_BITS) | (E_MAX - node.end)) << FIELD_BITS) | node.id
        self.n += 1
        self.bubble_up(0, self.n - 1)

    def bubble_up(self, start: int, pos: int) -> None:
        """Move the item at `pos` toward the root, not above `start` (heapq's `_siftdown`)."""
        item = self.get(pos)
        while pos > start:
            up = (pos - 1) >> 1
            parent = self.get(up)
            if not item < parent:
                break
            self.over[pos] = parent
            pos = up
        self.over[pos] = item

    def sink(self, pos: int) -> None:
        """Move the item at `pos` down to a leaf along the smaller children, then up to its place (heapq's `_siftup`)."""
        end, start, item = self.n, pos, self.get(pos)
        child = 2 * pos + 1
        while child < end:
            right = child + 1
            if right < end and not self.get(child) < self.get(right):
                child = right
            self.over[pos] = self.get(child)
            pos = child
            child = 2 * pos + 1
        self.over[pos] = item
        self.bubble_up(start, pos)


Slot = tuple[int, Node]
"""One queue position: (filed access time, node)."""


class QueueView:
    """A read-only view of a `LazyLRU` that replays its pops and pushes on top of it.

    Writes go to an overlay (position -> entry), so replaying an eviction's
    pops and pushes reads exactly the positions the real ones will read (the
    same 8-ary sift as `unicache.tree.lru`) and changes nothing.
    """

    __slots__ = ("keys", "nodes", "over", "n", "popped")

    def __init__(self, q: LazyLRU) -> None:
        self.keys = q.keys
        self.nodes = q.nodes
        self.over: dict[int, Slot] = {}
        self.n = len(q.nodes)
        self.popped = 0
        """Root entries taken, stale ones re-filed included (what `heapq` counted as pops)."""

    def get(self, i: int) -> Slot:
        e = self.over.get(i)
        return (self.keys[i], self.nodes[i]) if e is None else e

    def pop(self) -> Node | None:
        """`LazyLRU.pop`'s reads: stale roots re-filed in place, then the root removed."""
        while self.n:
            self.popped += 1
            t, node = self.get(0)
            if t != node.last_access and node.alive:
                self.sift_down((node.last_access, node))
                continue
            self.n -= 1
            last = self.get(self.n)
            if self.n:
                self.sift_down(last)
            return node
        return None

    def push(self, node: Node) -> None:
        t = node.last_access
        pos = self.n
        self.n += 1
        while pos:
            up = (pos - 1) // ARITY
            ku, nu = self.get(up)
            if t > ku or (t == ku and not before(node, nu)):
                break
            self.over[pos] = (ku, nu)
            pos = up
        self.over[pos] = (t, node)

    def sift_down(self, entry: Slot) -> None:
        t, node = entry
        n = self.n
        pos = 0
        while True:
            c = pos * ARITY + 1
            if c >= n:
                break
            e = min(c + ARITY, n)
            best = c
            kb, nb = self.get(c)
            for j in range(c + 1, e):
                kj, nj = self.get(j)
                if kj < kb or (kj == kb and before(nj, nb)):
                    best, kb, nb = j, kj, nj
            if t < kb or (t == kb and before(node, nb)):
                break
            self.over[pos] = (kb, nb)
            pos = best
        self.over[pos] = entry


def view(q: EvictionQueue) -> HeapView | QueueView:
    """The replaying view for the queue's kind."""
    if isinstance(q, HeapqLRU):
        return HeapView(q)
    if isinstance(q, LazyLRU):
        return QueueView(q)
    raise TypeError(f"no replaying view for a {type(q).__name__}")


def next_victim(cache: UniCache) -> tuple[Node, int]:
    """Read-only: replay a one-page Full device pass on views of the queues; its victim and how many
    entries it popped.

    The same tests as `DevicePass.next_victim` on a tree whose device leaves
    are all backed up (a stale entry, touched since, is filed again; one that
    is dead, off device or no longer a leaf is dropped; a pinned one is held
    back), then the pushes of `Evictor.demote` (the parent, if it becomes a
    leaf; the victim on the host queue). Replaying reads what the real calls
    will read, which is what warms them.
    """
    comps = cache.components
    full = comps.full
    fdev = full.dev
    dev = view(full.lru_device)
    dbit = full.lru_device.bit
    while (node := dev.pop()) is not None:
        parent = node.parent
        if not node.slot or fdev[node.slot] is None or parent is None or node.dev_children:
            continue
        if comps.pinned(node):
            continue
        if parent.parent is not None and parent.dev_children == 1 and not parent.lru & dbit:
            dev.push(parent)
        if not node.children and full.host_col[node.slot] is not None and not node.lru & full.lru_host.bit:
            view(full.lru_host).push(node)
        return node, dev.popped
    raise AssertionError("no eviction victim left: the cache is sized so that there is always one")


def touch_eviction(cache: UniCache, victim: Node) -> int:
    """Read (untimed) what evicting `victim` reads besides the heaps (`next_victim` replays those):
    the victim, its parent and grandparent, their page rows and the pool's bytes for them."""
    comps = cache.components
    full = comps.full
    device = full.device
    acc = 0
    y: Node | None = victim
    for _ in range(3):
        if y is None:
            break
        acc += y.slot + y.dev_children + y.lru + y.last_access + y.end + len(y.children)
        comps.pinned(y)
        pages = full.dev[y.slot]
        if pages is not None:
            for q in pages:
                acc += q + device.is_free(q)
        host = full.host_col[y.slot]
        acc += 0 if host is None else len(host)
        y = y.parent
    return acc
