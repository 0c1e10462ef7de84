# Each target sets itself up on a fresh machine with only Python 3.11.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test bench fuzz lint clean setup browser

setup: $(STAMP)

# torch first, pinned to the CPU build on this machine's disk, so that nothing
# later pulls a GPU build; then the package with the extras the targets need; then
# Ray (`waferflow sweep --ray` and its test) where it installs, with torch pinned in
# the same resolve so that it can never swap torch; where Ray cannot install, setup
# goes on and the Ray tests are skipped with the reason.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[viz,hf,dev]"
	$(PY) -m pip install -q -e ".[distributed]" torch==2.13.0 || echo "note: Ray did not install here: the Ray tests will be skipped"
	touch $(STAMP)

test: $(STAMP) browser
	$(PY) -m pytest -q -n 2 --dist loadfile tests

# 25,000 mutated inputs over the five input formats; prints the count of each outcome
# and fails on any crash or hang (tests/fuzz/runner.py; --replay FORMAT:SEED for one)
fuzz: $(STAMP)
	$(PY) -m tests.fuzz.runner --cases 25000

# The HTML report is checked in a real headless browser (tests/viz/test_html_browser.py).
# Run as root with apt-get (CI), this installs Debian's chromium when no Chromium is on
# PATH; elsewhere it says so and that test skips (CI sets WAFERFLOW_REQUIRE_BROWSER=1,
# which turns the skip into a failure).
BROWSERS := chromium chromium-browser google-chrome google-chrome-stable
browser:
	@for b in $(BROWSERS); do command -v $$b >/dev/null 2>&1 && exit 0; done; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing chromium (apt-get) for the HTML report's browser test"; \
	  apt-get install -y -q chromium >/dev/null 2>&1 || \
	    { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } || \
	    echo "note: could not install chromium; the HTML report's browser test will skip"; \
	else \
	  echo "note: no Chromium on PATH; the HTML report's browser test will skip (install chromium)"; \
	fi

demo: $(STAMP)
	$(PY) examples/demo.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

lint: $(STAMP)
	$(VENV)/bin/ruff check waferflow tests benchmarks examples
	$(VENV)/bin/ruff format --check waferflow tests benchmarks examples

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache
