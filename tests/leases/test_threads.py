"""The thread contract: one owner thread per ledger; others post to a Mailbox."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable

import pytest

from leases import (
    Held,
    Lease,
    LeaseLedger,
    Mailbox,
    PinSet,
    WrongThreadError,
)
from tests.leases.markers import Full


def _run(fn: Callable[[], object]) -> list[BaseException]:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn()
        except BaseException as exc:  # collected for the assertion
            errors.append(exc)

    t = threading.Thread(target=target)
    t.start()
    t.join()
    return errors


def test_other_threads_cannot_acquire_release_or_advance() -> None:
    led = LeaseLedger("owner")
    lease = led.acquire(Full, owner="x")
    for op in (lambda: led.acquire(Full, owner="y").release(), lease.release, led.advance_epoch, led.check):
        (err,) = _run(op)
        assert isinstance(err, WrongThreadError) and "'owner'" in str(err)
    assert lease.held and led.live_count == 1  # lease: ignore[lease-use-after-move]
    lease.release()  # lease: ignore[lease-use-after-move]


def test_acks_cross_threads_through_a_mailbox() -> None:
    led = LeaseLedger("owner")
    pins = PinSet(Full)
    inbox: Mailbox[int] = Mailbox(led)
    tickets: dict[int, Lease[Full, Held]] = {}
    for _ in range(200):
        lease = led.acquire(Full, owner="copy", pins=[pins])
        tickets[lease.id] = lease
    ids = list(tickets)

    def transfer_thread(chunk: list[int]) -> None:
        for i in chunk:
            inbox.post(i)

    workers = [threading.Thread(target=transfer_thread, args=(ids[k::4],)) for k in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    (err,) = _run(lambda: None if inbox.drain() else None)
    assert isinstance(err, WrongThreadError)
    acked = inbox.drain()
    assert sorted(acked) == ids
    for i in acked:
        tickets.pop(i).release()
    assert not tickets
    assert len(pins) == 0 and led.live_count == 0 and led.released == 200


@pytest.mark.expect_lease_leaks(1)
def test_a_lease_dropped_on_another_thread_is_accounted_on_the_owner_thread() -> None:
    led = LeaseLedger("owner")
    pins = PinSet(Full)
    box: list[Lease[Full, Held]] = [led.acquire(Full, owner="dropped", pins=[pins])]

    def drop() -> None:
        box.clear()  # lease: ignore[lease-escape]  # the leak this test expects, on another thread
        gc.collect()

    with pytest.warns(ResourceWarning):
        assert _run(drop) == []
    assert len(pins) == 0, "the leaked lease already left its pin set"
    assert led.leaked == 1 and led.live_count == 0
    assert [info.owner for info in led.check()] == ["dropped"]


def test_bind_thread_moves_ownership() -> None:
    led = LeaseLedger("moved")
    result: list[int] = []

    def worker() -> None:
        led.bind_thread()
        led.acquire(Full, owner="w").release()
        result.append(led.released)

    assert _run(worker) == [] and result == [1]
    with pytest.raises(WrongThreadError):
        led.acquire(Full, owner="main")  # lease: ignore[lease-discarded]
