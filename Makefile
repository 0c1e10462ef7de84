# Each target sets itself up on a fresh machine with only Python 3.11.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench fuzz lint clean setup

setup: $(STAMP)

# torch first, pinned to the CPU build on this machine's disk, so that nothing
# later pulls a GPU build; then the package with the extras the targets need.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[viz,hf,dev]"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile tests

# 25,000 mutated inputs over the five input formats; prints the count of each outcome
# and fails on any crash or hang (tests/fuzz/runner.py; --replay FORMAT:SEED for one)
fuzz: $(STAMP)
	$(PY) -m tests.fuzz.runner --cases 25000

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check waferflow tests benchmarks examples
	$(VENV)/bin/ruff format --check waferflow tests benchmarks examples

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
