"""Every backend proven: /detect, /classify and /hands on TF.js `webgpu` and LiteRT.js
`litert-webgpu` (Chromium's SwiftShader WebGPU adapter, `--enable-unsafe-webgpu` in the shared
launcher) give the answers they give on `wasm`, through the image input and the fake camera;
tensors stay flat over live frames and backend switches; and the answer check keeps a page off
a backend that answers wrong (a test hook perturbs one backend's outputs).

SwiftShader is a software GPU: its first WebGPU run compiles for 15-40 s, so each page opens
once per backend here. Answers, not speed, are what this machine can test."""
from __future__ import annotations

import os

import numpy as np
import pytest

from converters.sources import photo_path
from modelcontract.boxes import box_iou
from harness.browser import (CHROMIUM, RECORD_FRAMES, open_page, open_ready, page_detections, recorded_figures,
                                   screenshot, wait_frames)
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import HAND_GESTURES, photo_file
from harness.servers import serving

pytestmark = [
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed"),
    pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent"),
]

GPU_BACKENDS = ["webgpu", "litert-webgpu"]
HAND_PHOTOS = ["up_1.jpg", "down_1.jpg", "none_2.jpg"]
PERTURB = "globalThis.DATARAILROAD_PERTURB = {backend: %s, add: 0.2};"


@pytest.fixture(scope="module")
def base_url(built_model):
    folder = built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS))
    built_model("efficientnet-lite0")
    built_model("handpose")
    with serving(folder.parent) as url:
        yield url


@pytest.fixture(scope="module")
def differences():
    """The largest difference of each page and backend from wasm: test-artifacts/webgpu-differences.json."""
    with recorded_figures("webgpu-differences.json") as data:
        yield data


@pytest.fixture(scope="module")
def memory_figures():
    """What the memory tests counted, per backend: test-artifacts/webgpu-memory.json."""
    with recorded_figures("webgpu-memory.json") as data:
        yield data


def clean(log):
    assert log.outside_requests == [] and log.console_errors == [] and log.failed_requests == []


def assert_ready_on(page, backend):
    assert page.get_attribute("body", "data-backend") == backend
    assert page.get_attribute("body", "data-answer-check") == "passed", page.inner_text("#status-line")


def frame(page) -> int:
    return int(page.get_attribute("#results", "data-frame") or 0)


# ---------------------------------------------------------------- /detect

def detect_run(browser, base_url, backend) -> dict:
    """The bus camera's detections, then zidane.jpg and bus.jpg through the image input."""
    context, page, log = open_ready(browser, f"{base_url}/detect?model=yolov5n&backend={backend}")
    assert_ready_on(page, backend)
    wait_frames(page, 1)  # a frame is 14 s on SwiftShader's WebGPU; the first shows the camera's picture
    found = {"camera": page_detections(page)}
    page.click("#pause-button")
    # By width: a camera frame still in flight (seconds on SwiftShader) may land after the pause.
    for name, width in (("zidane.jpg", 1280), ("bus.jpg", 810)):
        page.set_input_files("#image-file", str(photo_path(name)))
        page.wait_for_function("w => +document.getElementById('results').dataset.width === w", arg=width,
                               timeout=300_000)
        found[name] = page_detections(page)
    if backend != "wasm":
        screenshot(page, f"detect-{backend}")
    context.close()
    clean(log)
    return found


@pytest.fixture(scope="module")
def detect_wasm(camera_browser, base_url):
    return detect_run(camera_browser, base_url, "wasm")


def detection_difference(found, expected) -> dict:
    """Same classes, and per box the best IoU with an expected box of its class."""
    assert sorted(d["class_id"] for d in found) == sorted(d["class_id"] for d in expected)
    ious = box_iou(np.array([d["box"] for d in found]), np.array([d["box"] for d in expected]))
    worst_iou = min(max(ious[i, j] for j, e in enumerate(expected) if e["class_id"] == d["class_id"])
                    for i, d in enumerate(found))
    scores = max(abs(a - b) for a, b in zip(sorted(d["score"] for d in found), sorted(d["score"] for d in expected)))
    return {"min_iou": float(worst_iou), "max_score_difference": float(scores)}


# TF.js WebGPU /detect is the suite's longest test (160 s on SwiftShader under CI's load): make
# test-all runs it; the TF.js WebGPU backend stays in make test through /classify and /hands.
@pytest.mark.parametrize("backend", [pytest.param("webgpu", marks=pytest.mark.slow), "litert-webgpu"])
def test_detect_on_gpu_backends_gives_the_wasm_detections(camera_browser, base_url, detect_wasm, backend, differences):
    found = detect_run(camera_browser, base_url, backend)
    assert [d["class_id"] for d in found["camera"]].count(0) >= 3
    for source, expected in detect_wasm.items():
        diff = detection_difference(found[source], expected)
        differences[f"detect {backend} {source}"] = diff
        assert diff["min_iou"] >= 0.99 and diff["max_score_difference"] <= 1e-3, (source, diff)


# ---------------------------------------------------------------- /classify

def classify_run(browser, base_url, backend) -> dict:
    context, page, log = open_ready(browser, f"{base_url}/classify?model=efficientnet-lite0&backend={backend}")
    assert_ready_on(page, backend)
    page.set_input_files("#image-files", [str(photo_path("bus.jpg")), str(photo_path("zidane.jpg"))])
    page.wait_for_function("() => +(document.getElementById('cards').dataset.done || 0) >= 2", timeout=300_000)
    page.click("#camera-button")   # a snapshot of the fake camera
    page.wait_for_function("() => +(document.getElementById('cards').dataset.done || 0) >= 3", timeout=300_000)
    cards = page.eval_on_selector_all(".result-card", """cards => cards.map(c => [c.dataset.file.startsWith('camera')
        ? 'camera' : c.dataset.file, Array.from(c.querySelectorAll('.top5 li')).map(li => [+li.dataset.classId,
        +li.dataset.probability])])""")
    context.close()
    clean(log)
    return dict(cards)


@pytest.fixture(scope="module")
def classify_wasm(camera_browser, base_url):
    return classify_run(camera_browser, base_url, "wasm")


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_classify_on_gpu_backends_gives_the_wasm_top5(camera_browser, base_url, classify_wasm, backend, differences):
    found = classify_run(camera_browser, base_url, backend)
    assert sorted(found) == ["bus.jpg", "camera", "zidane.jpg"]
    for name, top in found.items():
        assert [c for c, _ in top] == [c for c, _ in classify_wasm[name]] and len(top) == 5, name
        diff = max(abs(p - q) for (_, p), (_, q) in zip(top, classify_wasm[name]))
        differences[f"classify {backend} {name}"] = {"max_probability_difference": diff}
        assert diff <= 1e-4, name


# ---------------------------------------------------------------- /hands

HANDS = """() => Array.from(document.querySelectorAll('#results li')).map(li => ({gesture: li.dataset.gesture,
  keypoints: li.dataset.keypoints.split(';').map(p => p.split(',').map(Number))}))"""


def hands_run(browser, base_url, backend) -> dict:
    """The hand photos through the image input."""
    context, page, log = open_ready(browser, f"{base_url}/hands?backend={backend}&score=0.3&camera=0")
    assert_ready_on(page, backend)
    found = {}
    for name in HAND_PHOTOS:
        before = frame(page)
        page.set_input_files("#image-file", str(photo_file(name)))
        wait_frames(page, before + 1)
        found[name] = page.evaluate(HANDS)
    context.close()
    clean(log)
    return found


@pytest.fixture(scope="module")
def hands_wasm(browser, base_url):
    return hands_run(browser, base_url, "wasm")


# TF.js WebGPU takes over a minute here on SwiftShader: /classify runs it in make test, /hands in
# make test-all; LiteRT WebGPU runs on both.
@pytest.mark.parametrize("backend", [pytest.param("webgpu", marks=pytest.mark.slow), "litert-webgpu"])
def test_hands_on_gpu_backends_give_the_wasm_keypoints_and_gestures(browser, base_url, hands_wasm, backend,
                                                                    differences):
    expected = hands_wasm
    found = hands_run(browser, base_url, backend)
    for name in HAND_PHOTOS:
        assert [h["gesture"] for h in found[name]] == [h["gesture"] for h in expected[name]], name
        if HAND_GESTURES[name] != "none":
            assert found[name][0]["gesture"] == HAND_GESTURES[name]
        worst = max((float(np.abs(np.subtract(a["keypoints"], b["keypoints"])).max())
                     for a, b in zip(found[name], expected[name])), default=0.0)
        differences[f"hands {backend} {name}"] = {"max_keypoint_px": worst}
        assert worst <= 1.0, name


@pytest.mark.slow
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_live_frames_and_switches_on_webgpu_keep_memory_flat(camera_browser, base_url, backend, memory_figures):
    """100 live frames of the bus camera on /hands (palm detector every frame), then switches to
    wasm and back: after every frame, TF.js tensors and LiteRT's live tensors and models are
    where they were on the same backend before. Counted between frames (RECORD_FRAMES): on
    WebGPU a frame in flight awaits its reads, so a count taken mid-frame includes its tensors."""
    context, page, log = open_ready(camera_browser, f"{base_url}/hands?backend={backend}")
    assert_ready_on(page, backend)
    page.evaluate(RECORD_FRAMES)
    wait_frames(page, frame(page) + LIVE_FRAMES, timeout=900_000)
    for other in ("wasm", backend, "wasm", backend):
        page.select_option("#backend-select", other)
        page.wait_for_function("b => document.body.dataset.backend === b"
                               " && document.getElementById('model-status').dataset.state === 'ready'",
                               arg=other, timeout=300_000)
        wait_frames(page, frame(page) + 3)
    recorded = page.evaluate("() => window.__frames")
    context.close()
    clean(log)
    runs = backend_runs(recorded)
    memory_figures[backend] = [{"backend": name, "frames": len(run), **{key: sorted({r[key] for r in run})
                                for key in ("tfTensors", "tensors", "models")}} for name, run in runs]
    assert [name for name, _ in runs] == [backend, "wasm", backend, "wasm", backend]
    first = runs[0][1]
    assert len(first) >= LIVE_FRAMES
    assert {r["tfTensors"] for r in first} == {first[0]["tfTensors"]}, "TF.js tensors drift over live frames"
    assert {r["tensors"] for r in recorded} == {0}, "LiteRT tensors left live after a frame"
    models = 2 if backend == "litert-webgpu" else 0
    for name, run in runs:
        assert {r["models"] for r in run} == {models if name == backend else 0}, name
        assert run[-1]["tfTensors"] == (first[0] if name == backend else runs[1][1][-1])["tfTensors"], name


LIVE_FRAMES = 100


def backend_runs(recorded: list[dict]) -> list[tuple[str, list[dict]]]:
    """Recorded frames split where the backend changes: [(backend, frames)]."""
    runs: list[tuple[str, list[dict]]] = []
    for r in recorded:
        if not runs or runs[-1][0] != r["backend"]:
            runs.append((r["backend"], []))
        runs[-1][1].append(r)
    return runs


# ---------------------------------------------------------------- the answer check

def test_a_backend_that_answers_wrong_is_never_shown_unless_forced(camera_browser, base_url):
    """litert-wasm, the fastest backend here, is made to answer wrong: /detect picks wasm and
    shows wasm's boxes, skips litert-wasm on the next visit without timing it, shows it only when
    forced (with a warning), and the index page lists it as wrong with its error."""
    context = camera_browser.new_context()
    context.add_init_script(PERTURB % "'litert-wasm'")
    expected = None
    visits = []
    for query in ("", "", "&backend=litert-wasm"):
        page, log = open_page(context, f"{base_url}/detect?model=yolov5n&camera=0{query}")
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        page.set_input_files("#image-file", str(photo_path("bus.jpg")))
        wait_frames(page, 1)
        visits.append({"backend": page.get_attribute("body", "data-backend"), "status": page.inner_text("#status-line"),
                       "warning": page.inner_text("#answer-warning") if page.is_visible("#answer-warning") else None,
                       "check": page.get_attribute("body", "data-answer-check"), "found": page_detections(page)})
        if query:
            screenshot(page, "detect-forced-wrong-backend")
        page.close()
        clean(log)
    page, log = open_page(context, f"{base_url}/")
    page.wait_for_selector("#backend-table tbody tr[data-backend='litert-wasm']", timeout=120_000)
    row = page.eval_on_selector("#backend-table tbody tr[data-backend='litert-wasm']",
                                "r => [r.dataset.answers, r.cells[3].textContent]")
    context.close()
    first, second, forced = visits
    assert first["backend"] == "wasm" and "litert-wasm wrong answers" in first["status"] and first["warning"] is None
    # Next visit: the wrong backend is skipped, not timed again.
    assert second["backend"] == "wasm" and "litert-wasm" not in second["status"]
    assert first["check"] == second["check"] == "passed"
    expected = first["found"]
    assert detection_difference(second["found"], expected)["min_iou"] >= 0.99
    # Forced, it runs, says so, and its boxes are visibly off.
    assert forced["backend"] == "litert-wasm" and forced["check"] == "failed"
    assert forced["warning"] and "wrong answers" in forced["warning"]
    ious = box_iou(np.array([d["box"] for d in forced["found"]]), np.array([d["box"] for d in expected]))
    assert ious.max(axis=1).min() < 0.9
    assert row[0] == "wrong" and "wrong answers (error" in row[1], row


def test_hands_skip_a_wrong_wasm_backend(browser, base_url):
    """The same on the hand pipeline's own answer (two graphs): with wasm answering wrong, the
    page picks litert-wasm and gives its gesture."""
    context = browser.new_context()
    context.add_init_script(PERTURB % "'wasm'")
    page, log = open_page(context, f"{base_url}/hands?camera=0&score=0.3")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    page.set_input_files("#image-file", str(photo_file("up_1.jpg")))
    wait_frames(page, 1)
    backend = page.get_attribute("body", "data-backend")
    status = page.inner_text("#status-line")
    gestures = page.evaluate(HANDS)
    context.close()
    clean(log)
    assert backend == "litert-wasm" and "wasm wrong answers" in status, status
    assert [h["gesture"] for h in gestures] == ["thumbs_up"]
