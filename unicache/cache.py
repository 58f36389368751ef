"""`UniCache`: the unified hierarchical radix prefix cache whose every pin is a lease.

The facade owns the state (tree, pools, ledger, heaps, tickets) and the
small helpers; each operation lives in its own module under `unicache.ops`
and is bound here as a method, so calls cost the same as before the split.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import count

from leases import LeaseLedger, Mailbox

from unicache.components.full import FullStore
from unicache.markers import (
    FULL,
    MAMBA,
    SWA,
    SWA_IDX,
    Full,
    Mamba,
    component_name,
)
from unicache.components.registry import STORES
from unicache.components.store import ComponentStore
from unicache.config import CacheConfig
from unicache.counters import CacheCounters
from unicache.reasons import ReasonLog
from unicache.errors import ForeignObjectError, InvalidArgumentError, UnknownNodeError
from unicache.introspect import (
    NodeInfo,
    QuarantineInfo,
    TicketInfo,
    dump_state,
    node_info,
    quarantine_info,
    ticket_info,
)
from unicache.ops import (
    acks,
    eviction,
    host_eviction,
    locks,
    reclaim,
    removal,
    slots,
    splits,
)
from unicache.ops import backup as backups
from unicache.ops import insert as inserting
from unicache.ops import load_back as loading
from unicache.ops import match as matching
from unicache.ops import reset as resetting
from unicache.pools.allocator import SlotAllocator
from unicache.pools.pools import PoolSet
from unicache.sanity import SanityError, SanityReport, sanity_check
from unicache.ticket_table import QuarantineRecord, TicketTable
from unicache.tickets import Ticket
from unicache.transfer.base import Ack, TransferEngine
from unicache.transfer.immediate import ImmediateEngine
from unicache.tree.node import Node
from unicache.tree.pins import covered
from unicache.tree.radix import RadixTree

__all__ = ["QuarantineRecord", "UniCache"]

_INDEX: dict[type, int] = {Full: FULL, SWA: SWA_IDX, Mamba: MAMBA}


class UniCache:
    """Full / SWA / Mamba KV on device and host tiers, in one paged radix tree.

    Every pin is a lease of the cache's `LeaseLedger`: lock receipts, load-back
    tickets and backup tickets each own one lease per component they cover,
    and every covered node holds that lease in its component's `PinSet`.
    Eviction and reclaim consult the pin sets; nothing else pins. The cache
    runs on one thread (the ledger's); acks from other threads go through
    `inbox`.
    """

    def __init__(self, config: CacheConfig, engine: TransferEngine | None = None) -> None:
        self.config = config
        self.ledger = LeaseLedger(
            config.ledger_name, strict=config.strict, debug=config.debug, history=config.history
        )
        self.pools = PoolSet(config)
        self.engine: TransferEngine = engine if engine is not None else ImmediateEngine()
        self.engine.attach(self.pools)
        self.counters = CacheCounters()
        self.reasons = ReasonLog()
        """Why the newest refusal or no-op happened, and counts of every reason."""
        self.inbox: Mailbox[Ack] = Mailbox(self.ledger)
        self._ps = config.page_size
        self._name = config.ledger_name
        self._swa = config.swa_window is not None
        self._window = config.swa_window or 0
        self._mamba = config.mamba
        self._wb = config.write_policy == "write_back"
        self._wt_threshold = config.write_through_threshold
        self._lb_threshold = max(1, config.load_back_threshold)
        self._enabled = (True, self._swa, self._mamba)
        by_index: list[ComponentStore] = []
        for comp, store_class in STORES.items():
            if comp in config.components:
                dev = self.pools.device_pool(comp).alloc
                host = self.pools.host_pool(comp).alloc
            else:
                name = component_name(comp)
                dev = SlotAllocator(f"{name}.device (not configured)", 0)
                host = SlotAllocator(f"{name}.host (not configured)", 0)
            by_index.append(store_class(dev, host))
        self._stores: tuple[ComponentStore, ...] = tuple(by_index)
        """Every component's store by index; one not configured has no slots."""
        self.stores: tuple[ComponentStore, ...] = tuple(
            st for st in by_index if st.marker in config.components
        )
        """The configured components, highest eviction priority first."""
        full = by_index[FULL]
        assert isinstance(full, FullStore)
        self._full: FullStore = full
        self._fd: SlotAllocator = full.device
        self._fh: SlotAllocator = full.host
        self._node_ids = count(1)
        self._receipt_ids = count(1)
        self._clock = 0
        self.ticket_table = TicketTable()
        self._new_tree()

    def _new_tree(self) -> None:
        self._tree = RadixTree(self._ps, self._node_ids, owner=self, on_split=self._on_split)
        self.root = self._tree.root
        for store in self._stores:
            store.new_tree()
        self._dups: dict[int, Node] = {}

    def __repr__(self) -> str:
        comps = "+".join(c.__name__ for c in self.config.components)
        return (
            f"<UniCache {self.config.ledger_name!r} {comps} ps={self._ps} epoch={self.epoch} "
            f"nodes={self._tree.size} in_flight={len(self.ticket_table)}>"
        )

    @property
    def epoch(self) -> int:
        return self.ledger.epoch

    def _cidx(self, component: type) -> int:
        i = _INDEX.get(component)
        if i is None or not self._enabled[i]:
            raise InvalidArgumentError(
                f"component {getattr(component, '__name__', component)!r} is not enabled in "
                f"this cache (enabled: {[c.__name__ for c in self.config.components]})"
            )
        return i

    def _check_node(self, node: Node) -> None:
        if node.tree is not self:
            owner = node.tree
            name = owner.config.ledger_name if isinstance(owner, UniCache) else str(owner)
            raise ForeignObjectError("node", node.id, self.config.ledger_name, name)
        if not node.alive:
            raise UnknownNodeError(node.id, "is not a live node of this cache (removed or reset)")

    def _tick(self) -> int:
        self._clock += 1
        return self._clock

    match_prefix = matching.match_prefix

    alloc_device = slots.alloc_device
    free_device = slots.free_device
    write_slots = slots.write_slots
    read_slots = slots.read_slots
    _alloc_dev = slots.alloc_dev
    _no_room_reason = slots.no_room_reason
    _alloc_host = slots.alloc_host
    lent_slots = slots.lent_slots
    path_pages = slots.path_pages

    lock = locks.lock
    unlock = locks.unlock

    insert = inserting.insert
    _check_insert_args = inserting.check_insert_args
    _insert_mamba = inserting.insert_mamba

    _on_split = splits.on_split

    load_back = loading.load_back
    _settle_load_back = loading.settle_load_back
    _publish_swa_device = loading.publish_swa_device

    backup = backups.backup
    _unbacked_chain = backups.unbacked_chain
    _backup_nodes = backups.backup_nodes
    _backup_aux = backups.backup_aux
    _settle_backup = backups.settle_backup
    _publish_swa_host = backups.publish_swa_host

    poll = acks.poll
    deliver = acks.deliver
    in_flight = acks.in_flight
    _on_ack = acks.on_ack
    _sync_backups = acks.sync_backups

    evict_device = eviction.evict_device
    _evict_dev = eviction.evict_dev
    _evict_dev_full = eviction.evict_dev_full
    _blocked = eviction.blocked
    _demote = eviction.demote
    _free_dev_swa = eviction.free_dev_swa
    _free_dev_mamba = eviction.free_dev_mamba
    _drop_subtree = eviction.drop_subtree
    _evict_dev_aux = eviction.evict_dev_aux

    evict_host = host_eviction.evict_host
    _evict_host = host_eviction.evict_host_index
    _evict_host_aux = host_eviction.evict_host_aux

    _after_child_removed = removal.after_child_removed
    _iter_subtree = removal.iter_subtree
    _free_node = removal.free_node

    reclaim_host_duplicates = reclaim.reclaim_host_duplicates

    reset = resetting.reset


    def sanity_check(self) -> SanityReport:
        """Recompute every derived count and pin set from the live leases; list violations."""
        return sanity_check(self)

    def check(self) -> None:
        """`sanity_check()`, raising `SanityError` when anything is off."""
        report = self.sanity_check()
        if not report.ok:
            raise SanityError(report)

    def nodes(self) -> Iterator[Node]:
        """Every live node, pre-order, root first."""
        return iter(self._tree)

    def node(self, node_id: int) -> Node:
        for x in self._tree:
            if x.id == node_id:
                return x
        raise UnknownNodeError(node_id, f"is not a live node of cache {self.config.ledger_name!r}")

    @property
    def node_count(self) -> int:
        return self._tree.size

    def live_tickets(self) -> list[Ticket]:
        """Tickets of the current epoch waiting for their ack, oldest first.

        A load-back that joined another's copy follows the one it joined.
        """
        return self.ticket_table.live()

    def quarantine_records(self) -> list[QuarantineRecord]:
        return self.ticket_table.quarantined()

    def lease_scope(self, lease_id: int) -> list[Node] | None:
        """The nodes a live lease of this cache pins (the holders of its pin sets); None if not live."""
        lease = self.ledger.get(lease_id)
        return covered(lease) if lease is not None else None

    def node_info(self, node: Node) -> NodeInfo:
        """Residency and pins of one node, per component."""
        return node_info(self, node)

    def tickets(self) -> list[TicketInfo]:
        """Snapshots of the live tickets."""
        return [ticket_info(t) for t in self.live_tickets()]

    def quarantine(self) -> list[QuarantineInfo]:
        """Snapshots of the tickets whose slots wait for a stale ack."""
        return [quarantine_info(q) for q in self.ticket_table.quarantined()]

    def lease_coverage(self) -> dict[int, tuple[str, str, list[int]]]:
        """Live lease id -> (component, owner, ids of the nodes it pins)."""
        out: dict[int, tuple[str, str, list[int]]] = {}
        for lease in self.ledger.live():
            nodes = [x.id for x in covered(lease)]
            out[lease.id] = (lease.component.__name__, str(lease.owner), nodes)
        return out

    def dump_state(self) -> dict[str, object]:
        """A JSON-friendly snapshot: config, tree with pins, tickets, pools, counters, events."""
        return dump_state(self)
