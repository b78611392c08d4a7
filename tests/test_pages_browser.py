"""Every page in real headless Chromium: loads, makes zero requests outside 127.0.0.1,
logs no console error, and (with a model installed) loads it on a real backend."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from tests.browser import CHROMIUM, live_server, open_page, screenshot

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

PAGES = ["/", "/detect", "/classify", "/hands"]


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    """A real (tiny) TF.js graph model installed as a classifier, so pages load a model
    without waiting for the big conversions."""
    import tensorflow as tf

    from converters import manifest, tfjs

    root = tmp_path_factory.mktemp("tiny-models")
    work = tmp_path_factory.mktemp("tiny-work")

    class Tiny(tf.Module):
        def __init__(self):
            self.w = tf.Variable(np.random.default_rng(0).normal(size=(3, 3, 3, 4)).astype(np.float32))

        @tf.function(input_signature=[tf.TensorSpec([1, 32, 32, 3], tf.float32, name="x")])
        def __call__(self, x):
            y = tf.reduce_mean(tf.nn.relu(tf.nn.conv2d(x, self.w, 1, "SAME")), axis=[1, 2])
            return {"probabilities": tf.nn.softmax(y)}

    module = Tiny()
    tf.saved_model.save(module, str(work / "sm"), signatures={"serving_default": module.__call__})
    folder = root / "tiny-classifier"
    tfjs.convert_saved_model(work / "sm", folder / "tfjs")
    manifest.write(folder, {
        "id": "tiny-classifier", "name": "tiny-classifier", "task": "classify", "title": "Tiny test classifier",
        "quantization": "none", "tfjs": {"model": "tfjs/model.json"},
        "input": {"name": "x", "shape": [1, 32, 32, 3], "resize": "stretch", "scale": 1 / 255},
        "outputs": {"format": "probabilities"}, "labels": ["a", "b", "c", "d"],
        "files": manifest.file_sizes(folder),
    })
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def base_url(tiny_classifier):
    from server import create_app

    app = create_app({"MODELS_DIR": tiny_classifier, "TESTING": True})
    with live_server(app) as url:
        yield url


@pytest.mark.parametrize("path", PAGES)
def test_page_is_offline_and_clean(browser, base_url, path):
    context = browser.new_context()
    page, log = open_page(context, base_url + path)
    page.wait_for_load_state("networkidle")
    if path == "/":
        page.wait_for_selector("#backend-badge[data-backend]:not([data-backend=''])", timeout=60_000)
    elif path == "/classify":
        page.wait_for_selector("#model-status[data-state='ready']", timeout=60_000)
    elif path != "/":
        assert page.get_attribute("#model-status", "data-state") == "missing"
        assert "python -m converters" in page.inner_text("#model-status")
    screenshot(page, "page" + (path.replace("/", "_") if path != "/" else "_index"))
    context.close()
    assert log.outside_requests == []
    assert log.console_errors == []
    assert log.failed_requests == []


def test_index_reports_backends(browser, base_url):
    context = browser.new_context()
    page, log = open_page(context, base_url + "/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='cpu']", timeout=60_000)
    works = {row.get_attribute("data-backend"): row.get_attribute("data-ok")
             for row in page.query_selector_all("#backend-table tbody tr")}
    chosen = page.get_attribute("#backend-summary", "data-backend")
    context.close()
    assert works["wasm"] == "yes" and works["cpu"] == "yes"
    # SwiftShader WebGL is software: the default must then be WASM, not WebGL.
    assert chosen == "wasm"
    assert page.url.startswith("http://127.0.0.1")


def test_wasm_runs_multithreaded_when_cross_origin_isolated(browser, base_url):
    context = browser.new_context()
    page, _ = open_page(context, base_url + "/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='wasm']", timeout=60_000)
    isolated = page.evaluate("crossOriginIsolated")
    note = page.inner_text("#backend-table tbody tr[data-backend='wasm']")
    context.close()
    assert isolated is True
    assert "threads" in note and "no threads" not in note
