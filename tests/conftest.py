"""Shared fixtures. Converted models are built once per test session into a temp folder
(``built_model``) so the user's ./models is never touched by tests. Shared functions are in
harness/ (one module per concern)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.browser import fake_camera_flags, launch
from harness.clips import write_y4m
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import letterbox_rgb, photo_rgb


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory) -> Path:
    """One models folder for the whole run, shared by the xdist workers (each model is built
    once, under a lock: ``built_model``); DATARAILROAD_TEST_MODELS reuses a folder across
    runs (handy while developing: conversions are then skipped when up to date)."""
    reuse = os.environ.get("DATARAILROAD_TEST_MODELS")
    if reuse:
        Path(reuse).mkdir(parents=True, exist_ok=True)
        return Path(reuse)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # The workers' base temp folders share this parent, one per run.
        shared = tmp_path_factory.getbasetemp().parent / "models"
        shared.mkdir(exist_ok=True)
        return shared
    return tmp_path_factory.mktemp("models")


# The weights each model is built from in the shared models folder (the one the page and
# API tests serve); a build from other weights goes to a folder of its own, so it can never
# replace the model another test serves (both would be models_dir/<name>).
CANONICAL_WEIGHTS = {"yolov5n": str(YOLOV5N_WEIGHTS), "efficientnetv2-b0": "none", "yolo": "yolov8n.yaml"}


@pytest.fixture(scope="session")
def built_model(models_dir):
    """built_model(name, weights=None, quantize="none", imgsz=None) -> installed folder (built once);
    imgsz: a detector's input side (e.g. 320 -> models_dir/yolov5n-320), None for the default."""
    import hashlib

    from filelock import FileLock

    from converters import pipeline

    cache: dict = {}

    def build(name: str, weights: str | None = None, quantize: str = "none", imgsz: int | None = None) -> Path:
        key = (name, weights, quantize, imgsz)
        if key not in cache:
            out = models_dir
            if weights != CANONICAL_WEIGHTS.get(name):
                # A dot folder: the app skips it when it lists installed models.
                out = models_dir / ".variants" / hashlib.sha1(repr(key[:2]).encode()).hexdigest()[:8]
            # Another worker may be building the same model: the second finds it up to date.
            locks = models_dir / ".locks"
            locks.mkdir(exist_ok=True)
            with FileLock(locks / (hashlib.sha1(repr(key).encode()).hexdigest()[:12] + ".lock")):
                cache[key] = pipeline.convert(name, weights=weights, out=out, quantize=quantize, imgsz=imgsz)
        return cache[key]

    return build


@pytest.fixture(scope="session")
def trained_scenes(models_dir):
    """trained_scenes(task) -> a checkpoint of ``task`` trained on synthetic scenes
    (converters/scenes), trained once per models folder (minutes: tests using it are slow)."""
    from filelock import FileLock

    from converters.scenes import train

    def trained(task: str) -> Path:
        folder = models_dir / ".scenes"
        folder.mkdir(exist_ok=True)
        with FileLock(folder / f"{task}.lock"):
            return train.train(task, folder)

    return trained


@pytest.fixture(scope="session")
def api_models(built_model) -> dict[str, Path]:
    """{model id: folder} of what the server tests serve (what could be built here), all in
    one models folder."""
    built = {"efficientnet-lite0": built_model("efficientnet-lite0"), "handpose": built_model("handpose")}
    if YOLOV5N_WEIGHTS.is_file():
        built["yolov5n"] = built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS))
    return built


@pytest.fixture(scope="session")
def pw():
    """One Playwright driver per session (a second sync_playwright in one thread fails)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def bus_camera(tmp_path_factory) -> Path:
    """bus.jpg letterboxed into a 640x480 y4m, what Chromium's fake camera plays."""
    return write_y4m(tmp_path_factory.mktemp("cam") / "bus.y4m", letterbox_rgb(photo_rgb("bus.jpg")))


@pytest.fixture(scope="module")
def camera_browser(pw, bus_camera):
    """Chromium whose fake camera shows bus.jpg, one per test module."""
    b = launch(pw, fake_camera_flags(bus_camera))
    yield b
    b.close()


@pytest.fixture(scope="module")
def browser(pw):
    """Debian's headless Chromium, one per test module (fake-camera modules launch their own)."""
    b = launch(pw)
    yield b
    b.close()


# ------------------------------------------------------------------ the suite in parts
# A test's folder is its marker (pytest's config lists them; `make test-fast` runs unit):
#   unit     no model built, no browser, no server processes: seconds
#   convert  converted models, a converter run, or the API served on them
#   browser  headless Chromium through Playwright
#   cluster  a Ray cluster or gunicorn processes of its own
PARTS = ("unit", "convert", "browser", "cluster")
LONGEST_FIRST = ("cluster", "browser", "convert", "unit")
# Modules run on one worker one after the other, and early: the live tracking test needs a
# processed frame at least twice a second, which SwiftShader's WebGPU work (a whole core for
# minutes) starves when the two run side by side (IDs switched, drags were missed in CI).
TOGETHER = {"browser/test_tracking_page": "browser/tracking+webgpu",
            "browser/test_webgpu_pages": "browser/tracking+webgpu"}
# Modules on one worker, wherever they fall: the official checkpoints' builds (a core or more for
# 85 s each) are made once, by whichever module comes first, not by both workers at once.
SAME_WORKER = {"browser/test_official_pages": "official-models", "convert/test_official_models": "official-models"}


# tryfirst: xdist's own hook reads the groups off the markers in this same hook.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(item.fspath)
        part = path.parent.name
        if part not in PARTS:
            raise pytest.UsageError(f"{item.nodeid}: a test module belongs in one of tests/{{{','.join(PARTS)}}}/")
        item.add_marker(part)
        # make test's workers (-n, --dist loadgroup) take a module whole, so its module-scoped
        # browser and servers start once; the cluster tests share Ray's fixed ports, so they
        # run one after another on one worker.
        module = f"{part}/{path.stem}"
        group = "cluster" if part == "cluster" else TOGETHER.get(module) or SAME_WORKER.get(module, module)
        item.add_marker(pytest.mark.xdist_group(group))
    # The longest first, so the workers don't end waiting on one long module.
    items.sort(key=lambda item: (LONGEST_FIRST.index(Path(item.fspath).parent.name),
                                 f"{Path(item.fspath).parent.name}/{Path(item.fspath).stem}" not in TOGETHER))
