"""The server tests' figures (hits per tier and timings of every launch) in pytest's terminal summary."""

from __future__ import annotations

import pytest

from tests.integrations.sglang.server.scenario import FIGURES


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int,
                            config: pytest.Config) -> None:
    figures = config.stash.get(FIGURES, None)
    if not figures:
        return
    terminalreporter.section("SGLang server figures")
    for model, rows in figures.items():
        for row in rows:
            terminalreporter.write_line(f"{model}: {row}")
