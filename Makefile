# Two entry points: `make demo` and `make test` (ruff, mypy, then the tests; `make check` is the same).
# Both create the virtual environment on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: demo test check lint typecheck bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/dlsched compare

lint: $(STAMP)
	$(VENV)/bin/ruff check $(wildcard src tests scripts benchmarks experiments)

typecheck: $(STAMP)
	$(VENV)/bin/mypy

test: lint typecheck
	$(PY) -m pytest -n 2 --durations=15

check: test

bench: $(STAMP)
	$(PY) benchmarks/sim_speed.py

clean:
	rm -rf $(VENV) dlsched-compare .pytest_cache .mypy_cache
