"""Root test configuration: the pytester plugin and the `--slow` switch."""

from __future__ import annotations

import pytest

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
