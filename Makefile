# Each target sets itself up on a fresh machine with only Python 3.11.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint clean setup

setup: $(STAMP)

# torch first, pinned to the CPU build on this machine's disk, so that nothing
# later pulls a GPU build; then the package with the extras the targets need; then
# Ray (`waferflow sweep --ray` and its test; it leaves torch alone) where it installs:
# where it cannot, the Ray tests are skipped with the reason.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[viz,hf,dev]"
	$(PY) -m pip install -q -e ".[distributed]" || echo "note: Ray did not install here: the Ray tests will be skipped"
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist loadfile tests

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check waferflow tests benchmarks examples
	$(VENV)/bin/ruff format --check waferflow tests benchmarks examples

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
