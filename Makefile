# Two commands set everything up: `make book` and `make test` (see README.md).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check

.PHONY: test bench bench-quick clean

# The reader environment: requirements.txt plus posenc_core itself (editable).
$(VENV)/.reader-ok: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q -e .
	@touch $@

# Test-only extras on top.
$(VENV)/.test-ok: $(VENV)/.reader-ok requirements-test.txt
	$(PIP) install -q -r requirements-test.txt
	@touch $@

test: $(VENV)/.test-ok
	$(PY) -m pytest

bench: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py

bench-quick: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py --quick

clean:
	rm -rf $(VENV) _build .pytest_cache .hypothesis
