# Two commands do all set-up: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format typecheck docs bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	$(BIN)/python -m portfolio.commands.demo

# The suite in three pytest runs, all of which must pass. First every test not marked `serial` or `closed_loop`,
# in TEST_WORKERS pytest-xdist worker processes (one a core on CI's 2-core machine: one process kept about one
# core busy); worksteal: each worker starts on its half of the files in order (a module's fixtures are set up
# once, mostly) and an idle one takes tests from the other's end. Then the `serial` tests in one process, alone on
# the machine: each asserts a budget, deadline or latency that a test in another worker could break by taking a
# core (only the files that mark one are collected again). Then the `closed_loop` worlds, one a worker: each is a
# single process, so two side by side each keep a core, as `portfolio bench learning --jobs 2` runs them (in one
# process they took 125 s of the serial phase's 148, side by side 77-89 s in 5 runs). Exit 5 (no test selected) is no
# failure in a phase of test-fast.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -x --benchmark-disable
SERIAL_FILES = $$(grep -l 'mark\.serial' tests/test_*.py)
CLOSED_LOOP_FILES = $$(grep -l 'mark\.closed_loop' tests/test_*.py)

test: install
	$(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "not serial and not closed_loop"
	$(PYTEST) -m serial $(SERIAL_FILES)
	$(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m closed_loop $(CLOSED_LOOP_FILES)

# The suite without the tests marked slow (closed-loop benchmarks, fuzzing, IPC sweeps): for the edit-test loop.
test-fast: install
	$(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "not slow and not serial and not closed_loop" || [ $$? -eq 5 ]
	$(PYTEST) -m "serial and not slow" $(SERIAL_FILES) || [ $$? -eq 5 ]
	$(PYTEST) -n $(TEST_WORKERS) --dist worksteal -m "closed_loop and not slow" $(CLOSED_LOOP_FILES) || [ $$? -eq 5 ]

# ruff: lint rules and the formatter's check (`make format` rewrites); both in CI.
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# mypy with pyproject.toml's [tool.mypy]: strict on the engine and the front door.
typecheck: install
	$(BIN)/mypy

# The docs site (mkdocs.yml, docs/) built with every warning an error: a broken link or anchor, a page left out of
# the nav (not --quiet: it hides the warnings --strict counts). Into a scratch folder, removed after;
# `$(BIN)/mkdocs serve` previews it. In CI.
docs: install
	site=$$(mktemp -d) && $(BIN)/mkdocs build --strict -d "$$site"; status=$$?; rm -rf "$$site"; exit $$status

bench: install
	$(BIN)/python -m pytest benchmarks --benchmark-only --benchmark-columns=median,mean,min,max,rounds -q

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
