"""Shared fixtures: one warm mypy cache per session and one build over the whole corpus."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from mypy import build
from mypy.main import process_options
from mypy.modulefinder import BuildSource
from mypy.options import Options

from leases.check.plugin import OwnershipPlugin
from leases.check.runner import Outcome, prepare_options, run_check

CASES = Path(__file__).parent / "cases"
SOURCE_SUFFIX = ".py.txt"
EXPECTED_SUFFIX = ".out"


def case_names() -> list[str]:
    return sorted(p.name[: -len(SOURCE_SUFFIX)] for p in CASES.glob("*" + SOURCE_SUFFIX))


def corpus_options(cache_dir: Path, *extra: str) -> Options:
    """The options every corpus case is checked with (no config file is read)."""
    _, options = process_options(
        ["--strict", "--config-file=", "--no-error-summary", "--hide-error-context",
         f"--cache-dir={cache_dir}", *extra],
        require_targets=False,
    )
    return options


@dataclass(frozen=True)
class CorpusRun:
    """Output lines of one build over every case, grouped by case name."""

    outcome: Outcome
    lines: dict[str, list[str]]


@pytest.fixture(scope="session")
def mypy_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache directory for the session: only the first build pays for typeshed."""
    return tmp_path_factory.mktemp("leasecheck-cache")


@pytest.fixture(scope="session")
def corpus(mypy_cache: Path) -> CorpusRun:
    names = case_names()
    sources = [
        BuildSource(f"{name}.py", name, (CASES / (name + SOURCE_SUFFIX)).read_text())
        for name in names
    ]
    outcome = run_check(sources, corpus_options(mypy_cache), echo=False)
    lines: dict[str, list[str]] = {name: [] for name in names}
    for line in outcome.mypy_messages + outcome.lease_messages:
        name = line.split(":", 1)[0].removesuffix(".py")
        lines.setdefault(name, []).append(line)
    return CorpusRun(outcome, lines)


def build_modules(cache_dir: Path, modules: dict[str, str], *extra: str) -> build.BuildResult:
    """A raw mypy build (with the ownership plugin) over in-memory modules, for inspection."""
    options = corpus_options(cache_dir, *extra)
    prepare_options(options)
    sources = [BuildSource(f"{name}.py", name, text) for name, text in modules.items()]
    return build.build(sources, options, extra_plugins=[OwnershipPlugin(options)])
