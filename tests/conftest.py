"""Root test configuration: the pytester plugin, the `--slow` switch, the hypothesis profiles and shared fixtures.

Hypothesis runs derandomized by default (profile ``ci``): every test draws
the same examples on every run and machine, so the suite cannot fail by
chance; a failure it finds is found every time. To explore with fresh
randomness, run ``pytest --hypothesis-profile=explore`` (failing examples
are then saved in ``.hypothesis/`` and replayed first next time, and each
failure prints the blob that reproduces it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile("ci")

pytest_plugins = ["pytester"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--slow", action="store_true", default=False,
        help="also run long randomized runs (more seeds, more examples)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="long randomized run; enable with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def umask_027() -> Iterator[None]:
    """Run the test under umask 027 (outputs must take the umask's permissions), restored after."""
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)
