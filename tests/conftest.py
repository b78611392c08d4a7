"""Shared fixtures. Converted models are built once per test session into a temp folder
(``built_model``) so the user's ./models is never touched by tests."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DATARAILROAD_SHARED", ROOT.parent / "shared"))
YOLOV5N_WEIGHTS = SHARED / "models" / "yolov5n.pt"
HAND_FIXTURES = SHARED / "fixtures" / "hands"

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """One models folder for the whole session; DATARAILROAD_TEST_MODELS reuses a folder
    across runs (handy while developing: conversions are then skipped when up to date)."""
    reuse = os.environ.get("DATARAILROAD_TEST_MODELS")
    if reuse:
        Path(reuse).mkdir(parents=True, exist_ok=True)
        return Path(reuse)
    return tmp_path_factory.mktemp("models")


@pytest.fixture(scope="session")
def built_model(models_dir):
    """built_model(name, weights=None, quantize="none") -> installed folder (built once)."""
    from converters import pipeline

    cache: dict = {}

    def build(name: str, weights: str | None = None, quantize: str = "none") -> Path:
        key = (name, weights, quantize)
        if key not in cache:
            cache[key] = pipeline.convert(name, weights=weights, out=models_dir, quantize=quantize)
        return cache[key]

    return build


@pytest.fixture(scope="session")
def pw():
    """One Playwright driver per session (a second sync_playwright in one thread fails)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p
