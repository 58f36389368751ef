"""Integration tests run only where their engine is installed (the SGLang venv: `make test-sglang`)."""

from __future__ import annotations

import importlib.util

collect_ignore: list[str] = []
if importlib.util.find_spec("sglang") is None:
    collect_ignore.append("sglang")
