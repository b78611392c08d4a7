"""Shared set-up for the browser benchmarks: models folder, live server, Chromium."""
from __future__ import annotations

import argparse
import statistics
import sys
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import launch, live_server  # noqa: E402


def parse_args(description: str, backends=("wasm", "webgl", "cpu")) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="models folder (default ./models)")
    parser.add_argument("--backends", nargs="+", default=list(backends))
    parser.add_argument("--frames", type=int, default=20, help="frames measured per backend")
    return parser.parse_args()


@contextmanager
def server_and_browser(models: Path, chromium_args=()):
    from playwright.sync_api import sync_playwright

    from server import create_app

    app = create_app({"MODELS_DIR": models.resolve()})
    with live_server(app) as url, sync_playwright() as p:
        browser = launch(p, chromium_args)
        try:
            yield url, browser
        finally:
            browser.close()


def median(values):
    return statistics.median(values) if values else float("nan")
