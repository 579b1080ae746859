# Two commands do all set-up: `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: install
	$(BIN)/python -m portfolio.commands.demo

test: install
	$(BIN)/python -m pytest -q -x --benchmark-disable

bench: install
	$(BIN)/python -m pytest benchmarks --benchmark-only --benchmark-columns=median,mean,min,max,rounds -q

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
