# Each target sets itself up on first use: a venv in .venv, torch==2.13.0 if
# torch is not importable there (a CPU build; a bare `torch` pulls CUDA), then
# the project in editable mode with its dev extra; then the compiled copy in
# build/compiled (mypyc, when a C compiler works; cached: rebuilt only when
# the core sources change; see tools/compiled_build.py).
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
COMPILED := build/compiled

.PHONY: test test-pure test-compiled check lint run setup bench bench-scale peer sglang-venv setup-sglang \
	test-sglang test-sglang-suite test-sglang-then-check test-sglang-compiled check-sglang bench-sglang

$(STAMP): pyproject.toml setup.py
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]' --config-settings editable_mode=compat
	touch $(STAMP)

setup: $(STAMP)
	$(PY) tools/compiled_build.py $(COMPILED)

# Two jobs at a time (the machine's two cores): the suite on the pure-Python checkout beside the suite on the
# compiled copy, the SGLang venv taking the slot the shorter run frees; then the SGLang suite followed by the
# type check of the core, beside the compiled tree core's build, tests and type check (test-sglang-compiled).
test: setup lint
	$(MAKE) -j2 --output-sync=target --no-print-directory test-pure test-compiled sglang-venv
	$(MAKE) -j2 --output-sync=target --no-print-directory test-sglang-then-check test-sglang-compiled

# leasecheck (mypy --strict and the ownership checker) over the core, the tests and the benchmarks.
check: setup
	$(VENV)/bin/leasecheck --strict leases unicache tests benchmarks

test-pure: setup
	$(PY) -m pytest

# The suite on the compiled copy (tests/test_build.py checks the compiled modules are extensions).
# tests/leasecheck is left to the pure run: it runs mypy over source text, which no build changes.
test-compiled: setup
	@if grep -qx compiled $(COMPILED)/BUILD; then \
		cd $(COMPILED) && UNICACHE_BUILD=compiled PYTHONPATH="$$PWD" $(abspath $(PY)) -m pytest --ignore=tests/leasecheck; \
	else echo "test-compiled: no compiled build (no working C compiler): the compiled run is skipped"; fi

# Fast checks first: the import contracts of pyproject.toml (layers, no cycles) and ruff.
lint: setup
	$(VENV)/bin/lint-imports
	$(VENV)/bin/ruff check .

run: setup
	$(VENV)/bin/unicache replay

bench: setup
	$(PY) benchmarks/bench_leases.py
	$(PY) benchmarks/bench_cache.py
	$(PY) benchmarks/bench_replay.py
	$(PY) benchmarks/bench_leasecheck.py

# Per-op cost and bytes per node as the tree grows (table + PNG in out/).
bench-scale: setup
	$(PY) benchmarks/bench_scale.py

# Side by side with SGLang's own cache, our side on the pure and (when built) the compiled build
# (needs its CPU harness; sets up its venv when missing).
peer: setup
	$(PY) benchmarks/peer_sglang.py --harness ../shared/bench/sglang_harness.py

# SGLang integration: its own venv with sglang==0.5.23 (no-deps) and the CPU
# runtime packages it imports (the second half of SGL_RUNTIME: what `python -m
# sglang.launch_server` imports, for tests/integrations/sglang/server); ~5.5 GB and
# ~4 min on first use, then cached.
SGL_VENV  := .venv-sglang
SGL_PY    := $(SGL_VENV)/bin/python
SGL_STAMP := $(SGL_VENV)/.installed-stamp
SGL_TORCH := torch==2.14.1 torchvision==0.29.1
SGL_RUNTIME := triton==3.8.0 msgspec==0.23.0 numpy==2.4.6 orjson==3.13.0 psutil==7.2.2 \
	pybase64==1.5.1 requests==2.34.2 packaging==26.4 pillow==13.0.0 starlette==1.10.0 \
	pydantic==2.14.4 pyzmq==27.3.0 tqdm==4.70.1 ipython==9.18.1 aiohttp==3.14.5 \
	apache-tvm-ffi==0.1.15.post2 transformers==5.24.0 dill==0.4.1 sentencepiece==0.2.3 \
	compressed-tensors==0.20.1 gguf==0.19.0 openai==3.57.0 partial-json-parser==0.2.1.1.post7 \
	datasets==5.2.0 \
	uvicorn==0.55.0 fastapi==0.165.0 uvloop==0.23.0 httptools==0.9.0 python-multipart==0.0.34 \
	setproctitle==1.3.8 prometheus-client==0.26.0 opentelemetry-api==1.45.2 interegular==0.3.3 \
	einops==0.8.2 jsonschema==4.26.0 xgrammar==0.2.7 soundfile==0.13.1
# Transitive dependencies pinned too (pip freeze of a working venv).
SGL_PIN := -c sglang-constraints.txt

sglang-venv: $(SGL_STAMP)

# Order-only after setup (which the suites need too): in make test's first two jobs the suites start first and
# the venv takes the slot the shorter one frees, rather than a slot while setup runs.
$(SGL_STAMP): pyproject.toml sglang-constraints.txt | setup
	test -x $(SGL_PY) || python3 -m venv $(SGL_VENV)
	$(SGL_PY) -m pip install -q $(SGL_PIN) $(SGL_TORCH)
	$(SGL_PY) -m pip install -q --no-deps sglang==0.5.23
	$(SGL_PY) -m pip install -q $(SGL_PIN) $(SGL_RUNTIME)
	$(SGL_PY) -m pip install -q $(SGL_PIN) -e '.[dev]' --config-settings editable_mode=compat
	touch $(SGL_STAMP)

# The compiled copy of the SGLang tree core (build/compiled-sglang): the core's extensions copied from
# build/compiled, the tree core's modules compiled with the SGLang venv's python (cached like build/compiled;
# pure where no C compiler works; see tools/compiled_build.py).
SGL_COMPILED := build/compiled-sglang

setup-sglang: $(SGL_STAMP) setup
	$(SGL_PY) tools/compiled_build.py --sglang $(SGL_COMPILED)

# Two jobs: the SGLang suite on the checkout, beside the compiled copy's build, the tree core's tests on it
# (tests/integrations/sglang/test_build.py checks the compiled modules are extensions) and the type check
# against SGLang's real signatures (check-sglang).
test-sglang: $(SGL_STAMP) setup
	$(MAKE) -j2 --output-sync=target --no-print-directory test-sglang-suite test-sglang-compiled

test-sglang-suite: $(SGL_STAMP) setup
	$(SGL_PY) -m pytest tests/integrations/sglang

test-sglang-then-check: $(SGL_STAMP) setup
	$(MAKE) --no-print-directory test-sglang-suite check

test-sglang-compiled: setup-sglang
	@if grep -qx compiled $(SGL_COMPILED)/BUILD; then \
		cd $(SGL_COMPILED) && UNICACHE_BUILD=compiled PYTHONPATH="$$PWD" $(abspath $(SGL_PY)) -m pytest \
			tests/integrations/sglang/treecore tests/integrations/sglang/test_build.py; \
	else echo "test-sglang: no compiled build (no working C compiler): the compiled tree core run is skipped"; fi
	$(MAKE) --no-print-directory check-sglang

# leasecheck against SGLang's real signatures (mypy-sglang.ini), in a cache of its own: the SGLang suite's
# mutation test, which may run beside it, builds in .mypy_cache-sglang.
check-sglang: $(SGL_STAMP)
	$(SGL_VENV)/bin/leasecheck --config-file mypy-sglang.ini --strict --cache-dir .mypy_cache-sglang-check

bench-sglang: setup-sglang
	$(SGL_PY) benchmarks/bench_sglang_cores.py
