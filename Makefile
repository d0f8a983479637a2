# One command each for a fresh machine: `make demo` and `make test` create or reuse .venv.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv test lint demo bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

venv: $(STAMP)

lint: venv
	$(VENV)/bin/ruff check llmload tests benchmarks locustfiles

test: lint
	$(PY) -m pytest -q

demo: venv
	$(PY) -m llmload.cli demo --out reports/demo

bench: venv
	$(PY) benchmarks/mock_capacity.py
	$(PY) benchmarks/client_overhead.py

clean:
	rm -rf $(VENV) reports/demo .pytest_cache .ruff_cache
