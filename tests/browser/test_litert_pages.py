"""LiteRT.js in headless Chromium: the .tflite on `litert-wasm` gives the answers the TF.js
graph gives on `wasm` (raw outputs, detections, top-5), frees what it allocates, and a page
whose LiteRT cannot run falls back to TF.js."""
from __future__ import annotations

import base64
import os

import numpy as np
import pytest

from modelcontract.boxes import box_iou
from converters.sources import photo_path
from harness.browser import CHROMIUM, open_page, open_ready, page_detections, screenshot, wait_frames
from harness.paths import YOLOV5N_WEIGHTS
from harness.servers import serving

pytestmark = [
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed"),
    pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent"),
]


@pytest.fixture(scope="module")
def models(built_model):
    return {"yolov5n": built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)),
            "efficientnet-lite0": built_model("efficientnet-lite0")}


@pytest.fixture(scope="module")
def base_url(models):
    with serving(models["yolov5n"].parent) as url:
        yield url


# The same decoded photo through the page's own preprocessing, then the TF.js graph (on the
# TF.js WASM backend) and the .tflite (LiteRT.js WASM): raw outputs, in the manifest's order.
RAW_OUTPUTS = """async ([b64, modelId]) => {
  const rt = await import('/static/js/runtime/runtime.js');
  const mf = await import('/static/js/contract/manifest.js');
  const {fetchManifest} = await import('/static/js/runtime/manifests.js');
  const litert = await import('/static/js/runtime/litert.js');
  const {prepareInput} = await import('/static/js/tensor/geometry.js');
  const manifest = await fetchManifest(modelId);
  await rt.useBackend('wasm');
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const bitmap = await createImageBitmap(new Blob([bytes]));
  const prepared = prepareInput(bitmap, manifest.input);
  const tensors = manifest.outputs.tensors || [];
  const names = tensors.length ? tensors.map((t) => t.name) : undefined;
  const keyOf = Object.fromEntries(tensors.filter((t) => t.key).map((t) => [t.name, t.key]));
  const graph = await rt.loadModel(mf.graphUrl(manifest));
  if (manifest.outputs.execute === 'executeAsync') graph.needsAsync = true;
  const artifact = mf.tfliteArtifact(manifest);
  const lite = await litert.loadTflite(artifact.url, 'wasm', null, artifact.bytes, keyOf);
  const asList = (x) => (Array.isArray(x) ? x : [x]);
  const a = asList(await rt.runModel(graph, prepared.input, names));
  const b = asList(await rt.runModel(lite, prepared.input, names));
  const out = [];
  for (let i = 0; i < a.length; i++) {
    out.push({tfjs: Array.from(await a[i].data()), litert: Array.from(await b[i].data()), shape: a[i].shape});
  }
  tf.dispose([...a, ...b, prepared.input]);
  graph.dispose();
  lite.dispose();
  bitmap.close();
  return {outputs: out, stats: litert.liteRtStats()};
}"""

STATS = "async () => (await import('/static/js/runtime/litert.js')).liteRtStats()"


def jpeg_b64(name: str) -> str:
    return base64.b64encode(photo_path(name).read_bytes()).decode()


def relative(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(np.abs(a).max(), 1e-12))


@pytest.mark.parametrize("model_id", ["yolov5n", "efficientnet-lite0"])
def test_raw_outputs_match_tfjs_within_1e4(browser, base_url, model_id):
    context = browser.new_context()
    page, log = open_page(context, f"{base_url}/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='litert-wasm']", timeout=120_000)
    results = {name: page.evaluate(RAW_OUTPUTS, [jpeg_b64(name), model_id]) for name in ("bus.jpg", "zidane.jpg")}
    context.close()
    for name, result in results.items():
        assert result["outputs"], name
        for out in result["outputs"]:
            assert len(out["tfjs"]) == len(out["litert"]) == int(np.prod(out["shape"]))
            assert relative(out["tfjs"], out["litert"]) <= 1e-4, (name, model_id, out["shape"])
        # Everything the comparison made on the LiteRT side was freed.
        assert result["stats"]["tensors"] == 0 and result["stats"]["models"] == 0
    assert log.outside_requests == [] and log.console_errors == []


def test_index_reports_litert_with_its_features(browser, base_url):
    context = browser.new_context()
    page, log = open_page(context, f"{base_url}/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='litert-webgpu']", timeout=120_000)
    rows = page.eval_on_selector_all(
        "#backend-table tbody tr", "rows => rows.map(r => [r.dataset.backend, r.dataset.ok, r.cells[2].textContent])")
    context.close()
    table = {name: (ok, note) for name, ok, note in rows}
    # Chromium here: relaxed SIMD, threads (the page is cross-origin isolated), and with
    # --enable-unsafe-webgpu SwiftShader's software WebGPU adapter, which LiteRT.js runs on its JSPI build.
    assert table["litert-wasm"] == ("yes", "threads, relaxed SIMD")
    assert table["litert-webgpu"][0] == "yes" and "swiftshader (software)" in table["litert-webgpu"][1]
    assert "JSPI build" in table["litert-webgpu"][1]
    assert log.outside_requests == [] and log.console_errors == []


def open_detect(browser, base_url, backend, query=""):
    return open_ready(browser, f"{base_url}/detect?model=yolov5n&backend={backend}{query}")


def assert_same_detections(found, expected, min_iou=0.99):
    assert sorted(d["class_id"] for d in found) == sorted(d["class_id"] for d in expected)
    ious = box_iou(np.array([d["box"] for d in found]), np.array([d["box"] for d in expected]))
    for i, d in enumerate(found):
        same = [j for j, e in enumerate(expected) if e["class_id"] == d["class_id"]]
        assert max(ious[i, j] for j in same) >= min_iou, (d, expected)


def test_detect_camera_and_upload_same_as_tfjs(camera_browser, base_url):
    found = {}
    for backend in ("wasm", "litert-wasm"):
        context, page, log = open_detect(camera_browser, base_url, backend)
        wait_frames(page, 2)
        camera = page_detections(page)
        assert page.get_attribute("body", "data-backend") == backend
        if backend == "litert-wasm":
            screenshot(page, "detect_litert_camera_bus")
        page.click("#pause-button")
        page.set_input_files("#image-file", str(photo_path("zidane.jpg")))
        page.wait_for_function("() => +document.getElementById('results').dataset.width === 1280", timeout=120_000)
        found[backend] = {"camera": camera, "zidane": page_detections(page)}
        context.close()
        assert log.outside_requests == [] and log.console_errors == []
    camera = found["litert-wasm"]["camera"]
    assert [d["class_id"] for d in camera].count(5) >= 1 and [d["class_id"] for d in camera].count(0) >= 3
    for source in ("camera", "zidane"):
        assert_same_detections(found["litert-wasm"][source], found["wasm"][source])


# 40 frames after a 20-frame warm-up find any per-frame leak (the counts and the heap must be
# equal, not close); the 300-frame run is make test-all's.
@pytest.mark.parametrize("frames", [60, pytest.param(300, marks=pytest.mark.slow)])
def test_live_frames_and_switches_keep_litert_memory_flat(camera_browser, base_url, frames):
    context, page, log = open_detect(camera_browser, base_url, "litert-wasm")
    wait_frames(page, 20)
    first = page.evaluate(STATS)
    tensors_first = int(page.get_attribute("#hud", "data-num-tensors"))
    wait_frames(page, frames, timeout=900_000)
    last = page.evaluate(STATS)
    tensors_last = int(page.get_attribute("#hud", "data-num-tensors"))
    # Switch to TF.js and back, twice: the compiled model is freed each time.
    after_switch = []
    for backend in ("wasm", "litert-wasm", "wasm", "litert-wasm"):
        page.select_option("#backend-select", backend)
        page.wait_for_function("b => document.body.dataset.backend === b"
                               " && document.getElementById('model-status').dataset.state === 'ready'",
                               arg=backend, timeout=300_000)
        frame = int(page.get_attribute("#results", "data-frame") or 0)
        wait_frames(page, frame + 3)
        after_switch.append(page.evaluate(STATS))
    context.close()
    assert first["tensors"] == last["tensors"] == 0 and first["models"] == last["models"] == 1
    assert last["heapBytes"] == first["heapBytes"], (first, last)
    assert tensors_last == tensors_first
    assert [s["models"] for s in after_switch] == [0, 1, 0, 1]
    assert all(s["tensors"] == 0 for s in after_switch)
    # The second load of the model fits in the heap the first one left (freed, not leaked).
    assert after_switch[3]["heapBytes"] == after_switch[1]["heapBytes"], after_switch
    assert log.outside_requests == [] and log.console_errors == []


def test_classify_top5_same_as_tfjs(browser, base_url):
    found = {}
    for backend in ("wasm", "litert-wasm"):
        context, page, log = open_ready(browser, f"{base_url}/classify?model=efficientnet-lite0&backend={backend}")
        assert page.get_attribute("body", "data-backend") == backend
        page.set_input_files("#image-files", [str(photo_path("bus.jpg")), str(photo_path("zidane.jpg"))])
        page.wait_for_function("() => +(document.getElementById('cards').dataset.done || 0) >= 2", timeout=300_000)
        found[backend] = {c["file"]: c["top"] for c in page.eval_on_selector_all(
            ".result-card", """cards => cards.map(c => ({file: c.dataset.file, top: Array.from(
                c.querySelectorAll('.top5 li')).map(li => [+li.dataset.classId, +li.dataset.probability])}))""")}
        if backend == "litert-wasm":
            screenshot(page, "classify_litert")
        context.close()
        assert log.outside_requests == [] and log.console_errors == []
    for name in ("bus.jpg", "zidane.jpg"):
        lite, tfjs = found["litert-wasm"][name], found["wasm"][name]
        assert [c for c, _ in lite] == [c for c, _ in tfjs] and len(lite) == 5, name
        assert relative([p for _, p in tfjs], [p for _, p in lite]) <= 1e-4, name


def test_a_tflite_that_does_not_load_falls_back_to_tfjs(browser, base_url):
    context = browser.new_context()
    # A corrupt .tflite: LiteRT cannot compile it.
    context.route("**/models/yolov5n/model.tflite",
                  lambda route: route.fulfill(status=200, body=b"not a flatbuffer" * 64,
                                              headers={"Content-Type": "application/octet-stream"}))
    page, log = open_page(context, f"{base_url}/detect?model=yolov5n&backend=litert-wasm&camera=0")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    backend = page.get_attribute("body", "data-backend")
    status = page.inner_text("#status-line")
    page.set_input_files("#image-file", str(photo_path("zidane.jpg")))
    wait_frames(page, 1)
    persons = [d for d in page_detections(page) if d["class_id"] == 0]
    context.close()
    assert backend in ("wasm", "webgl") and "litert-wasm failed" in status, (backend, status)
    assert len(persons) == 2


def test_no_litert_runtime_keeps_tfjs_and_says_why(browser, base_url):
    # The route is the test: no service worker may answer in its place on the second page
    # (it would serve the LiteRT runtime it precached while the first page was open).
    context = browser.new_context(service_workers="block")
    context.route("**/vendor/litertjs/**", lambda route: route.fulfill(status=404, body=b"{}"))
    page, log = open_page(context, f"{base_url}/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='litert-wasm']", timeout=120_000)
    row = page.eval_on_selector("#backend-table tbody tr[data-backend='litert-wasm']",
                                "r => [r.dataset.ok, r.cells[2].textContent]")
    page.goto(f"{base_url}/detect?model=yolov5n&backend=litert-wasm&camera=0")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    backend = page.get_attribute("body", "data-backend")
    context.close()
    assert row[0] == "no" and "LiteRT.js did not load" in row[1]
    assert backend in ("wasm", "webgl")
