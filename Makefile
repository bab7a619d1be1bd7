# NormLab: every target installs what it needs into .venv (created on first use).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The CPU build of torch is installed first so the project's range (which admits it) resolves
# without pulling a multi-GB CUDA build. Override for a GPU box: make TORCH_SPEC='torch==2.13.0' ...
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.normlab-installed
PYTEST_ARGS ?=
# Test tiers (README, "Testing"). test-fast: the in-process tests, each module on one of TEST_WORKERS xdist
# workers ("auto": one per core, at most 4; 0: none), each test cut off after FAST_TIMEOUT_S; the markers
# are applied by tests/conftest.py. test: the whole suite (scripts/run_tests.sh reads NORMLAB_TEST_WORKERS).
TEST_WORKERS ?= auto
FAST_TIMEOUT_S ?= 120
FAST_MARKERS := not slow and not process and not postgres and not docker and not triton_interp

.PHONY: help install run demo test test-fast bench bench-gpu data-offline browser lint format clean

help:
	@echo "make run           start MLflow + local Ray head + API on 127.0.0.1 (Ctrl-C stops all)"
	@echo "make demo          make run, then submit studies/examples/quick.yaml and print the results"
	@echo "make test          install, fetch offline data sources, run the whole test suite"
	@echo "make test-fast     the same, in-process tests only (no servers, no subprocesses): a few minutes"
	@echo "make bench         run the benchmarks and rewrite BENCHMARKS.md"
	@echo "make bench-gpu     on a CUDA machine with torch (no venv): CUDA tests + GPU benchmarks into gpu-bench/, ~12 min"
	@echo "make data-offline  install the offline dataset sources (science.md section 5)"
	@echo "make browser       install Chromium for the browser tests (Debian package; they skip without one)"

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"
	$(BIN)/python -m pip install --quiet -e '.[dev,bench]'
	@touch $(STAMP)

install: $(STAMP)

# Plugins on: this stack listens on loopback only (README: Plugins, the trust model).
run: $(STAMP)
	NORMLAB_ALLOW_PLUGINS=$${NORMLAB_ALLOW_PLUGINS:-true} $(BIN)/normlab serve

demo: $(STAMP) data-offline
	$(BIN)/normlab serve --demo

data-offline: $(STAMP)
	VENV=$(VENV) bash scripts/install_offline_data.sh

# The Chromium the browser tests drive (Debian's package, as root or with sudo; they skip without one).
browser:
	bash scripts/install_browser.sh

test: $(STAMP) data-offline browser
	VENV=$(VENV) NORMLAB_TEST_WORKERS=$(TEST_WORKERS) bash scripts/run_tests.sh $(PYTEST_ARGS)

test-fast: $(STAMP) data-offline
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses=4 --dist loadfile --no-loadscope-reorder \
		--timeout=$(FAST_TIMEOUT_S) -m "$(FAST_MARKERS)" $(PYTEST_ARGS)

bench: $(STAMP) data-offline
	$(BIN)/python -m benchmarks.run_all --output BENCHMARKS.md

# The GPU scripts need only torch (and triton for the kernels), so this runs the machine's python3, not
# the venv: a GPU box need not install the service. Raw tables go to $(GPU_OUT); BENCHMARKS.md's GPU
# section is benchmarks/gpu_results.md, updated by hand from them (it carries the readings).
GPU_OUT ?= gpu-bench
# The Triton tests also run on CUDA there (their CUDA-only tests skip everywhere else); a failure is
# reported and the timings still run. --noconftest: the suite's conftest needs the service's packages.
bench-gpu:
	mkdir -p $(GPU_OUT)
	$(PYTHON) benchmarks/gpu_autonorm_kernel.py --compile > $(GPU_OUT)/kernels.md 2>&1; status=$$?; \
		cat $(GPU_OUT)/kernels.md; exit $$status
	$(PYTHON) -m pytest --noconftest -p no:cacheprovider -o addopts=-ra tests/models/norms/test_autonorm_triton.py \
		tests/models/norms/test_mixed_triton.py > $(GPU_OUT)/tests.log 2>&1 \
		|| echo "bench-gpu: CUDA tests FAILED, see $(GPU_OUT)/tests.log"; tail -n 3 $(GPU_OUT)/tests.log
	$(PYTHON) benchmarks/gpu_step_profile.py --out $(GPU_OUT)/step_profile.md
	$(PYTHON) benchmarks/gpu.py --out $(GPU_OUT)/trials.md
	$(PYTHON) benchmarks/gpu_packing.py --out $(GPU_OUT)/packing.md
	$(PYTHON) benchmarks/gpu_whole_step.py --out $(GPU_OUT)/whole_step.md

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
