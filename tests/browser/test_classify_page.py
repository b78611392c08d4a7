"""/classify in headless Chromium with real converted classifiers, compared with the Python
reference (the converter's LiteRT artifact: same weights) on the same photos."""
from __future__ import annotations

import os

import numpy as np
import pytest

from converters.sources import photo_path
from modelcontract.scores import top_k
from tests import reference
from harness.browser import CHROMIUM, drop_files, open_page, open_ready, screenshot
from harness.models import read_manifest
from harness.photos import photo_rgb
from harness.servers import serving

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

BUS_TYPES = {"school bus", "trolleybus", "minibus", "passenger car", "police van", "recreational vehicle"}


@pytest.fixture(scope="module")
def models(built_model):
    return {"lite0": built_model("efficientnet-lite0"), "v2": built_model("efficientnetv2-b0", weights="none")}


@pytest.fixture(scope="module")
def base_url(models):
    with serving(models["lite0"].parent) as url:
        yield url


def open_classifier(browser, base_url, model_id):
    context = browser.new_context()
    page, log = open_page(context, f"{base_url}/classify?backend=wasm")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    if page.input_value("#model-select") != model_id:
        page.select_option("#model-select", model_id)
        page.wait_for_function("id => document.getElementById('model-status').dataset.state === 'ready'"
                               " && document.body.dataset.backend", arg=model_id, timeout=300_000)
        page.wait_for_function("() => document.getElementById('status-line').textContent.includes('on wasm')",
                               timeout=300_000)
    return context, page, log


def cards(page):
    return page.eval_on_selector_all(
        ".result-card",
        """cards => cards.map(c => ({file: c.dataset.file, state: c.dataset.state,
             error: (c.querySelector('.error') || {}).textContent || null,
             top: Array.from(c.querySelectorAll('.top5 li')).map(li => ({
               class_id: +li.dataset.classId, label: li.dataset.label, probability: +li.dataset.probability}))}))""")


def wait_done(page, n):
    page.wait_for_function("n => +(document.getElementById('cards').dataset.done || 0) >= n", arg=n, timeout=300_000)


def test_lite0_top5_equals_python_reference(browser, base_url, models):
    context, page, log = open_classifier(browser, base_url, "efficientnet-lite0")
    page.set_input_files("#image-files", [str(photo_path("bus.jpg")), str(photo_path("zidane.jpg"))])
    wait_done(page, 2)
    found = {c["file"]: c for c in cards(page)}
    screenshot(page, "classify_lite0")
    context.close()

    for name in ("bus.jpg", "zidane.jpg"):
        probs = reference.classify(models["lite0"], photo_rgb(name))
        expected = top_k(probs, 5)
        top = found[name]["top"]
        assert [t["class_id"] for t in top] == list(expected), name
        for t in top:
            assert abs(t["probability"] - probs[t["class_id"]]) <= 1e-3
    assert BUS_TYPES & {t["label"] for t in found["bus.jpg"]["top"]}
    assert log.outside_requests == [] and log.console_errors == []


def test_v2_random_weights_follow_the_manifest_preprocessing(browser, base_url, models):
    """Keras' EfficientNetV2 expects 0..255: the page must feed that, not x/255."""
    context, page, log = open_classifier(browser, base_url, "efficientnetv2-b0")
    page.set_input_files("#image-files", str(photo_path("bus.jpg")))
    wait_done(page, 1)
    top = cards(page)[0]["top"]
    context.close()

    rgb = photo_rgb("bus.jpg")
    right = reference.classify(models["v2"], rgb)
    m = read_manifest(models["v2"])
    assert m["input"]["range"] == [0, 255] or m["input"]["range"] == [0.0, 255.0]
    wrong_spec = dict(m["input"], scale=1 / 255)
    from modelcontract.geometry import prepare
    from converters.tflite import run_tflite
    x, _ = prepare(rgb, wrong_spec)
    wrong = next(iter(run_tflite(models["v2"] / m["server"]["model"], {m["input"]["name"]: x}).values()))[0]

    ids = [t["class_id"] for t in top]
    got = np.array([t["probability"] for t in top])
    assert np.max(np.abs(got - right[ids])) <= 1e-3
    # Random weights give a near-uniform softmax, so also check the page is far closer to
    # the right preprocessing than to the x/255 mistake.
    assert np.max(np.abs(got - right[ids])) < 0.1 * np.max(np.abs(got - wrong[ids]))
    assert log.outside_requests == [] and log.console_errors == []


def test_ten_images_in_one_drop_and_bad_files(browser, base_url, tmp_path):
    context, page, log = open_classifier(browser, base_url, "efficientnet-lite0")
    start = page.evaluate("() => tf.memory().numTensors")
    bus = photo_path("bus.jpg").read_bytes()
    zidane = photo_path("zidane.jpg").read_bytes()
    files = [(f"photo_{i}.jpg", "image/jpeg", bus if i % 2 else zidane) for i in range(10)]
    drop_files(page, "#dropzone", files)
    wait_done(page, 10)
    drop_files(page, "#dropzone", [("notes.txt", "text/plain", b"not an image"),
                                   ("broken.jpg", "image/jpeg", bus[: len(bus) // 2]),
                                   ("after.jpg", "image/jpeg", bus)])
    wait_done(page, 13)
    end = page.evaluate("() => tf.memory().numTensors")
    results = {c["file"]: c for c in cards(page)}
    screenshot(page, "classify_drop")
    context.close()

    assert len(results) == 13
    assert all(results[f"photo_{i}.jpg"]["state"] == "done" and len(results[f"photo_{i}.jpg"]["top"]) == 5
               for i in range(10))
    assert results["notes.txt"]["state"] == "error" and "not an image" in results["notes.txt"]["error"]
    assert results["broken.jpg"]["state"] == "error" and "could not be decoded" in results["broken.jpg"]["error"]
    assert results["after.jpg"]["state"] == "done"
    assert end == start
    assert log.outside_requests == []
    assert log.console_errors == []


def test_server_backend_gives_the_same_top5_as_the_browser(browser, base_url):
    results = {}
    for backend in ("wasm", "server"):
        context, page, log = open_ready(browser, f"{base_url}/classify?backend={backend}")
        page.set_input_files("#image-files", [str(photo_path("bus.jpg")), str(photo_path("zidane.jpg"))])
        wait_done(page, 2)
        results[backend] = {c["file"]: c["top"] for c in cards(page)}
        assert page.get_attribute("body", "data-backend") == backend
        context.close()
        assert log.outside_requests == [] and log.console_errors == []
    for name in ("bus.jpg", "zidane.jpg"):
        browser_top, server_top = results["wasm"][name], results["server"][name]
        assert [t["class_id"] for t in browser_top] == [t["class_id"] for t in server_top]
        assert max(abs(a["probability"] - b["probability"]) for a, b in zip(browser_top, server_top)) <= 1e-3
