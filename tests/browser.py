"""Headless Chromium (Debian's) driven by Playwright, plus a live app server on 127.0.0.1.

Used by the browser tests; see shared docs "browser-testing" for the flags. Every page is
opened with a route that aborts any request not to 127.0.0.1 and records it, so a test
can assert that the app is truly offline.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from werkzeug.serving import make_server

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

FLAGS = [
    "--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--enable-unsafe-swiftshader",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


def fake_camera_flags(y4m: Path) -> list[str]:
    return ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-video-capture={y4m}"]


@contextmanager
def live_server(app):
    """Serve ``app`` on an ephemeral 127.0.0.1 port in a thread; yields the base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@dataclass
class PageLog:
    console_errors: list = field(default_factory=list)
    outside_requests: list = field(default_factory=list)
    failed_requests: list = field(default_factory=list)


def _is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost")


def open_page(context, url: str):
    """New page with offline guard and console capture; returns (page, log)."""
    log = PageLog()
    page = context.new_page()

    def guard(route):
        if _is_local(route.request.url):
            route.continue_()
        else:
            log.outside_requests.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    page.on("console", lambda msg: msg.type == "error" and log.console_errors.append(msg.text))
    page.on("pageerror", lambda exc: log.console_errors.append(str(exc)))
    page.on("requestfailed", lambda req: log.failed_requests.append(req.url))
    page.goto(url)
    return page, log


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
