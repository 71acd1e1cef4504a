"""Fixtures of the built-book tests: the built book on 127.0.0.1 and Debian's chromium.

One chromium serves the whole run (each test opens its own context, with every request that
leaves the machine blocked: browser_support.block_external); a test module that needs another
launch (test_cjk_font.py, with its own font configuration) launches it from the same
`playwright`. The `server` fixture serves the requesting test module's own `HTML` folder, so
each module decides which build it reads (POSENC_BOOK_HTML can point it at another one); one
server per folder for the whole run.
"""

from __future__ import annotations

import functools
import http.server
import pathlib
import threading

import pytest
from browser_support import CHROMIUM, LAUNCH_ARGS


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output readable
        pass


@pytest.fixture(scope="session")
def _servers():
    """folder -> base URL of a server on 127.0.0.1 (a free port), started on first use."""
    running: dict[pathlib.Path, tuple[http.server.ThreadingHTTPServer, str]] = {}

    def serve(folder: pathlib.Path) -> str:
        folder = pathlib.Path(folder).resolve()
        if folder not in running:
            handler = functools.partial(_QuietHandler, directory=str(folder))
            httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
            running[folder] = (httpd, f"http://127.0.0.1:{httpd.server_address[1]}")
        return running[folder][1]

    yield serve
    for httpd, _ in running.values():
        httpd.shutdown()


@pytest.fixture(scope="module")
def server(request, _servers):
    """The requesting module's `HTML` folder on 127.0.0.1; the base URL."""
    return _servers(request.module.HTML)


@pytest.fixture(scope="session")
def playwright():
    """Playwright's driver, started once for the run."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright):
    """Debian's chromium, launched once for the run; tests open their own contexts in it."""
    b = playwright.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
    yield b
    b.close()


# Modules that take longest, started first: with pytest-xdist (`-n 2 --dist loadfile
# --no-loadscope-reorder`, see the Makefile) one worker runs every chapter against the
# installed wheel while the other works through the browser tests.
FIRST = ("test_installed.py",)


def pytest_collection_modifyitems(config, items):
    """Run the FIRST modules' tests before the rest (the order of the modules kept otherwise).
    Within a module that names a GROUP_BY_PARAM, its tests run grouped by that parameter's
    value (tests without it first), each group in the module's order: test_explorers.py keeps
    one chapter's pages open for all the tests that read them."""
    modules: dict[pathlib.Path, int] = {}
    for item in items:
        modules.setdefault(item.path, len(modules))

    def key(item):
        group = getattr(item.module, "GROUP_BY_PARAM", None)
        callspec = getattr(item, "callspec", None)
        value = callspec.params.get(group, "") if group and callspec else ""
        return (item.path.name not in FIRST, modules[item.path], str(value))

    items.sort(key=key)
