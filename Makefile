# Each target sets itself up on first use: a venv in .venv, torch==2.13.0 if
# torch is not importable there (a CPU build; a bare `torch` pulls CUDA), then
# the project in editable mode with its dev extra.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: test lint run setup bench peer setup-sglang test-sglang bench-sglang

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

setup: $(STAMP)

test: $(STAMP) lint
	$(PY) -m pytest
	$(VENV)/bin/leasecheck --strict leases unicache tests benchmarks
	$(MAKE) test-sglang

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

# SGLang integration: its own venv with sglang==0.5.23 (no-deps) and the CPU
# runtime packages it imports; ~5.5 GB and ~4 min on first use, then cached.
SGL_VENV  := .venv-sglang
SGL_PY    := $(SGL_VENV)/bin/python
SGL_STAMP := $(SGL_VENV)/.installed-stamp
SGL_TORCH := torch==2.14.1 torchvision==0.29.1
SGL_RUNTIME := triton msgspec numpy orjson psutil pybase64 requests packaging pillow starlette \
	pydantic pyzmq tqdm ipython aiohttp apache-tvm-ffi transformers dill sentencepiece \
	compressed-tensors gguf openai partial-json-parser datasets

$(SGL_STAMP): pyproject.toml
	test -x $(SGL_PY) || python3 -m venv $(SGL_VENV)
	$(SGL_PY) -m pip install -q $(SGL_TORCH)
	$(SGL_PY) -m pip install -q --no-deps sglang==0.5.23
	$(SGL_PY) -m pip install -q $(SGL_RUNTIME)
	$(SGL_PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $(SGL_STAMP)

setup-sglang: $(SGL_STAMP)

test-sglang: $(SGL_STAMP)
	$(SGL_PY) -m pytest tests/integrations/sglang
	$(SGL_VENV)/bin/leasecheck --config-file mypy-sglang.ini --strict

bench-sglang: $(SGL_STAMP)
	$(SGL_PY) benchmarks/bench_sglang_cores.py
