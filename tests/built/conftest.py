"""Fixtures of the built-book tests: the built book on 127.0.0.1 and Debian's chromium.

The `server` fixture serves the requesting test module's own `HTML` folder, so each module
decides which build it reads (POSENC_BOOK_HTML can point it at another one).
"""

from __future__ import annotations

import functools
import http.server
import threading

import pytest
from browser_support import CHROMIUM, LAUNCH_ARGS


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output readable
        pass


@pytest.fixture(scope="module")
def server(request):
    """The requesting module's `HTML` folder on 127.0.0.1 (a free port); yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(request.module.HTML))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield b
        b.close()
