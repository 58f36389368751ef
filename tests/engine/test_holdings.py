"""`Holdings`: one receipt and one ticket per request id, each with exactly one owner."""

from __future__ import annotations

import pytest

from unicache.engine.errors import EngineError
from unicache.engine.holdings import Holdings
from unicache.markers import Full
from unicache.results import TicketStatus
from unicache.transfer.immediate import ImmediateEngine

from .conftest import make_cache


def test_a_replaced_receipt_comes_back_to_be_unlocked() -> None:
    cache = make_cache()
    held = Holdings()
    replaced = held.put_receipt(7, cache.lock(cache.root))
    assert replaced is None
    first = held.receipt(7)
    assert first is not None
    old = held.put_receipt(7, cache.lock(cache.root))
    assert old is not None and old is first
    cache.unlock(old)
    last = held.take_receipt(7)
    assert last is not None and held.receipt(7) is None
    cache.unlock(last)
    gone = held.take_receipt(7)
    assert gone is None
    assert not cache.ledger.live()


def test_a_second_ticket_for_one_request_is_refused_and_abandoned() -> None:
    cache = make_cache(ImmediateEngine(copy=False), host_ratio=4.0)
    tokens = list(range(1, 33))
    pages = cache.alloc_device(Full, len(tokens))
    assert pages is not None
    res = cache.insert(tokens, pages)
    assert res.node is not None
    assert cache.backup(res.node) is not None
    cache.poll()
    assert cache.evict_device(Full, len(tokens)) >= len(tokens)
    anchor = cache.match_prefix(tokens).anchor
    held = Holdings()
    first = cache.load_back(anchor)
    second = cache.load_back(anchor)
    assert first is not None and second is not None
    first_id = first.id
    held.put_ticket(1, first)
    with pytest.raises(EngineError, match=rf"request 1: already holds load-back ticket #{first_id}"):
        held.put_ticket(1, second)
    cache.poll()
    t = held.take_ticket(1)
    assert t is not None and t.status is TicketStatus.DONE
    t.result()
    assert not cache.ledger.live()
