"""Every page in real headless Chromium: loads, makes zero requests outside 127.0.0.1,
logs no console error, and (with a model installed) loads it on a real backend."""
from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest

from harness.browser import CHROMIUM, open_page, screenshot
from harness.servers import serving
from tests.fixtures.manifests import minimal

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

PAGES = ["/", "/detect", "/classify", "/hands"]


@pytest.fixture(scope="module")
def tiny_classifier(tmp_path_factory):
    """A real (tiny) TF.js graph model installed as a classifier, so pages load a model
    without waiting for the big conversions."""
    import tensorflow as tf

    from converters import manifest, tfjs
    from modelcontract.manifest import file_sizes

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
    manifest.write(folder, minimal(
        id="tiny-classifier", task="classify", title="Tiny test classifier",
        input={"name": "x", "shape": [1, 32, 32, 3], "resize": "stretch", "scale": 1 / 255},
        outputs={"format": "probabilities"}, labels=["a", "b", "c", "d"], files=file_sizes(folder)))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def base_url(tiny_classifier):
    with serving(tiny_classifier) as url:
        yield url


@pytest.mark.parametrize("path", PAGES)
def test_page_is_offline_and_clean(browser, base_url, path):
    context = browser.new_context()
    page, log = open_page(context, base_url + path)
    page.wait_for_load_state("networkidle")
    if path == "/":
        page.wait_for_selector("#backend-badge[data-backend]:not([data-backend=''])", timeout=60_000)
    elif path == "/classify":
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
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
    rows = page.eval_on_selector_all("#backend-table tbody tr", "rows => rows.map(r => [r.dataset.backend,"
                                     " r.dataset.ok, r.cells[2].textContent, r.dataset.software])")
    chosen = page.get_attribute("#backend-summary", "data-backend")
    context.close()
    works = {name: ok == "yes" for name, ok, _, _ in rows}
    notes = {name: note for name, _, note, _ in rows}
    software = {name: flag == "yes" for name, _, _, flag in rows}
    assert works["wasm"] and works["cpu"]
    assert set(works) == {"webgpu", "webgl", "wasm", "cpu", "litert-wasm", "litert-webgpu", "onnx-wasm", "onnx-webgpu"}
    assert "loaded when an .onnx opens" in notes["onnx-wasm"]
    # A software GPU (SwiftShader WebGL or WebGPU adapter) is said to be one.
    for name in ("webgl", "webgpu"):
        if works[name] and re.search(r"swiftshader|llvmpipe|lavapipe", notes[name], re.I):
            assert software[name], notes[name]
    # The rule, not this host: a hardware GPU backend, then LiteRT.js on WASM (measured ~2x
    # TF.js WASM), then TF.js WASM.
    expected = next(name for name in ("webgpu", "litert-webgpu", "webgl", "litert-wasm", "wasm")
                    if works[name] and not software[name])
    assert chosen == expected, (chosen, rows)


def test_wasm_runs_multithreaded_when_cross_origin_isolated(browser, base_url):
    context = browser.new_context()
    page, _ = open_page(context, base_url + "/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='wasm']", timeout=60_000)
    isolated = page.evaluate("crossOriginIsolated")
    note = page.inner_text("#backend-table tbody tr[data-backend='wasm']")
    context.close()
    assert isolated is True
    assert "threads" in note and "no threads" not in note
