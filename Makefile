# Each target sets itself up on first use: a venv in .venv, torch==2.13.0 if
# torch is not importable there (a CPU build; a bare `torch` pulls CUDA), then
# the project in editable mode with its dev extra.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: test lint run setup bench peer

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP) lint
	$(PY) -m pytest
	$(VENV)/bin/leasecheck --strict leases unicache tests benchmarks

# Fast checks first: the import contracts of pyproject.toml (layers, no cycles) and ruff.
lint: $(STAMP)
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .

run: $(STAMP)
	$(VENV)/bin/unicache replay

bench: $(STAMP)
	$(PY) benchmarks/bench_leases.py
	$(PY) benchmarks/bench_cache.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_leasecheck.py

# Side by side with SGLang's own cache (needs its CPU harness; sets up its venv when missing).
peer: $(STAMP)
	$(PY) benchmarks/peer_sglang.py --harness ../shared/bench/sglang_harness.py
