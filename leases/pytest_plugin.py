"""pytest plugin (entry point `pytest11`): fail any test that leaks a lease.

Every test is watched: a lease whose last reference dies while held during
the test (found after a `gc.collect()` at its end) fails it, listing each
leak with its acquisition site. A test that leaks on purpose says so with
`@pytest.mark.expect_lease_leaks(n)` (exactly `n` leaks; no argument: one or
more) or `@pytest.mark.allow_lease_leaks` (any number, for randomized runs),
and may inspect them through the `lease_leaks` fixture.
"""

from __future__ import annotations

import gc
from collections.abc import Generator

import pytest

from leases.errors import LeaseInfo
from leases.ledger import add_leak_listener, remove_leak_listener

_LEAKS_KEY = pytest.StashKey[list[LeaseInfo]]()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "expect_lease_leaks(count=None): the test leaks leases on purpose "
        "(exactly `count` of them when given, else at least one)",
    )
    config.addinivalue_line(
        "markers", "allow_lease_leaks: the test may leak any number of leases (randomized runs)"
    )


def pytest_collection_finish(session: pytest.Session) -> None:
    """Move everything alive after collection out of the collector's reach.

    The leak check runs `gc.collect()` after every test; with large modules
    (mypy, torch) loaded, freezing the long-lived heap makes that cheap.
    """
    gc.collect()
    gc.freeze()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    leaks = item.stash.setdefault(_LEAKS_KEY, [])
    add_leak_listener(leaks.append)
    try:
        result = yield
        gc.collect()
    finally:
        remove_leak_listener(leaks.append)
    if item.get_closest_marker("allow_lease_leaks") is not None:
        return result
    marker = item.get_closest_marker("expect_lease_leaks")
    listing = "\n".join(f"  - {info.describe()}" for info in leaks)
    if marker is None:
        if leaks:
            pytest.fail(f"{len(leaks)} lease(s) leaked during the test:\n{listing}", pytrace=False)
    else:
        expected = marker.kwargs.get("count", marker.args[0] if marker.args else None)
        if expected is None and not leaks:
            pytest.fail("expected the test to leak a lease, but none leaked", pytrace=False)
        if expected is not None and len(leaks) != expected:
            pytest.fail(
                f"expected {expected} leaked lease(s), got {len(leaks)}:\n{listing}", pytrace=False
            )
    return result


@pytest.fixture
def lease_leaks(request: pytest.FixtureRequest) -> list[LeaseInfo]:
    """The leaks seen so far in the running test (filled as leases die)."""
    leaks: list[LeaseInfo] = request.node.stash.setdefault(_LEAKS_KEY, [])
    return leaks
