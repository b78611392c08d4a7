"""Your own model, dropped into the page. The .tflite files of tests/fixtures/ultralytics-litert
are Ultralytics 8.4.190's own LiteRT export (format="litert", metadata appended inside) of
small models trained on the synthetic scenes, with Ultralytics' predict() answers on held-out
scenes (tools/ultralytics_litert_fixtures.py made them). Picked on /detect and /classify, each
runs in the browser and gives predict()'s answers: the same classes, boxes within IoU 0.99,
masks within IoU 0.95, keypoints and rotated corners within 1 px, the same top-5.
A TF.js folder (Ultralytics' older export, which the converter writes too) picked the same way
gives the API's answer on that model. A model given is kept for the next visit and can be
removed; a file the page cannot run gets one message and the page keeps its model."""
from __future__ import annotations

import io
import json
import os
import zipfile
from pathlib import Path

import numpy as np
import pytest
import requests

from harness.browser import CHROMIUM, TASK_ROWS, open_page, open_ready, recorded_figures, screenshot, wait_frames
from harness.paths import SHARED, YOLOV5N_WEIGHTS
from harness.photos import photo_file
from harness.servers import serving
from harness.user_exports import tiny_onnx
from harness.ultralytics_reference import corner_distance, mask_iou, match, polygons_mask

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ultralytics-litert"
DETECTORS = ("detect", "segment", "pose", "obb")
ONNX_META = {"task": "detect", "imgsz": "[32, 32]", "names": "{0: 'a'}"}
MESSAGE_DONE = "() => ['ok', 'error'].includes(document.getElementById('model-message').dataset.state)"


@pytest.fixture(scope="module")
def base_url(built_model):
    built = [built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)), built_model("efficientnet-lite0")]
    with serving(built[0].parent) as url:
        yield url


@pytest.fixture(scope="module")
def figures():
    with recorded_figures("model-drop.json") as data:
        yield data


def give(page, path: Path) -> tuple[str, str]:
    """Pick a model file; -> (the message's state, its text) once the page has answered."""
    page.eval_on_selector("#model-message", "el => { el.dataset.state = ''; }")
    page.set_input_files("#model-file", str(path))
    page.wait_for_function(MESSAGE_DONE, timeout=120_000)
    return page.eval_on_selector("#model-message", "el => [el.dataset.state, el.textContent]")


def record(task: str) -> dict:
    return json.loads((FIXTURES / f"{task}.json").read_text())


def from_runs(runs: list, width: int, height: int) -> np.ndarray:
    """A mask from alternating run lengths (False first), row by row."""
    values = np.repeat(np.arange(len(runs)) % 2 == 1, runs)
    return values[:width * height].reshape(height, width)


@pytest.mark.parametrize("task", DETECTORS)
def test_a_picked_ultralytics_tflite_gives_predicts_answers_on_detect(browser, base_url, task, figures):
    fixture = record(task)
    context = browser.new_context()
    # Picked the moment the page opens, while its own model still loads.
    page, log = open_page(context, f"{base_url}/detect?camera=0")
    state, text = give(page, FIXTURES / f"{task}.tflite")
    assert state == "ok" and "kept here" in text and "Nothing was uploaded" in text, text
    chosen = page.eval_on_selector("#model-select", "s => [s.value, s.selectedOptions[0].parentElement.label]")
    assert chosen[0].startswith("yours-") and chosen[1] == "Your models"
    assert "your file" in page.text_content("#status-line") and page.get_attribute("body", "data-answer-check") == "passed"
    assert task in page.text_content("#model-card")
    mask_ious, worst, instances = [], {"box_iou": 1.0, "keypoint_px": 0.0, "corner_px": 0.0}, 0
    for n, (photo, expected) in enumerate(fixture["images"].items(), start=1):
        page.set_input_files("#image-file", str(FIXTURES / photo))
        wait_frames(page, n)
        rows = page.evaluate(TASK_ROWS)
        want = expected["detections"]
        assert len(rows) == len(want), (photo, len(rows), len(want))
        pairs = [(rows[i], want[j], iou) for i, j, iou in match([r["box"] for r in rows], [w["box"] for w in want])]
        assert len(pairs) == len(want)
        width, height = page.evaluate("() => [+document.getElementById('results').dataset.width, "
                                      "+document.getElementById('results').dataset.height]")
        instances += len(pairs)
        for got, ref, iou in pairs:
            assert got["class_id"] == ref["class_id"] and abs(got["score"] - ref["score"]) <= 0.01
            worst["box_iou"] = min(worst["box_iou"], iou)
            if task == "segment":
                mask_ious.append(mask_iou(polygons_mask(got["polygons"], width, height),
                                          from_runs(ref["mask_runs"], width, height)))
            if task == "pose":
                diff = np.abs(np.asarray(got["keypoints"])[:, :2] - np.asarray(ref["keypoints"])[:, :2]).max()
                worst["keypoint_px"] = max(worst["keypoint_px"], float(diff))
            if task == "obb":
                worst["corner_px"] = max(worst["corner_px"], corner_distance(got["corners"], ref["corners"]))
    screenshot(page, f"detect-your-{task}")
    backend = page.get_attribute("body", "data-backend")
    context.close()
    figures[task] = {"instances": instances, "backend": backend, **worst,
                     **({"mean_mask_iou": float(np.mean(mask_ious)), "worst_mask_iou": float(min(mask_ious))}
                        if mask_ious else {})}
    assert log.console_errors == [] and log.outside_requests == []
    assert sum(len(e["detections"]) for e in fixture["images"].values()) >= 2
    # OBB is held to its corners; the bounds of a small rotated box move more in IoU terms.
    assert worst["box_iou"] >= (0.9 if task == "obb" else 0.99), worst
    assert worst["keypoint_px"] <= 1 and worst["corner_px"] <= 1, worst
    assert not mask_ious or min(mask_ious) >= 0.95, mask_ious


def test_a_picked_yolo_classifier_gives_predicts_top_classes(browser, base_url):
    fixture = record("classify")
    context, page, log = open_ready(browser, f"{base_url}/classify")
    state, text = give(page, FIXTURES / "classify.tflite")
    assert state == "ok", text
    for n, (photo, expected) in enumerate(fixture["images"].items(), start=1):
        page.set_input_files("#image-files", str(FIXTURES / photo))
        page.wait_for_function("n => +(document.getElementById('cards').dataset.done || 0) >= n", arg=n,
                               timeout=60_000)
        top = page.eval_on_selector_all(f".result-card[data-file='{photo}'] .top5 li",
                                        "items => items.map(li => [+li.dataset.classId, +li.dataset.probability])")
        assert [c for c, _ in top] == expected["top5"]
        # the order is the criterion; the probabilities differ a little, as the two resize the
        # photo differently (measured: within 0.0065)
        assert np.allclose([p for _, p in top], expected["top5_scores"], atol=0.02)
    screenshot(page, "classify-your-model")
    context.close()
    assert log.console_errors == [] and log.outside_requests == []


def test_a_given_model_is_kept_for_the_next_visit_and_can_be_removed(browser, base_url):
    context = browser.new_context()
    page, log = open_page(context, f"{base_url}/detect?camera=0")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    state, _ = give(page, FIXTURES / "segment.tflite")
    model_id = page.eval_on_selector("#model-select", "s => s.value")
    # The next visit: listed, and opened by ?model=
    page.goto(f"{base_url}/detect?camera=0&model={model_id}")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    assert page.eval_on_selector("#model-select", "s => s.value") == model_id
    assert "your file segment.tflite" in page.text_content("#status-line")
    assert "segment.tflite" in page.text_content("#model-card")
    page.click("#remove-model")
    page.wait_for_function("() => document.getElementById('model-status').dataset.state === 'ready' && "
                           "!document.getElementById('status-line').textContent.includes('your file')", timeout=120_000)
    assert page.eval_on_selector("#model-select", "s => s.value") == "yolov5n"
    assert "removed" in page.text_content("#model-message")
    page.goto(f"{base_url}/detect?camera=0")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    options = page.eval_on_selector_all("#model-select option", "os => os.map(o => o.value)")
    context.close()
    assert state == "ok" and model_id not in options and log.console_errors == []


def with_metadata(data: bytes, **changes) -> bytes:
    """An Ultralytics .tflite with its appended metadata.json changed."""
    start = data.rfind(b"PK\x03\x04")
    metadata = json.loads(zipfile.ZipFile(io.BytesIO(data[start:])).read("metadata.json"))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("metadata.json", json.dumps({**metadata, **changes}))
    return data[:start] + out.getvalue()


def test_a_file_the_page_cannot_run_gets_one_message_and_the_page_keeps_its_model(browser, base_url,
                                                                                   built_model, tmp_path):
    segment = (FIXTURES / "segment.tflite").read_bytes()
    start = segment.rfind(b"PK\x03\x04")
    files = {
        "notes.tflite": (b"not a model at all\n" * 10, "is not a model this page can run"),
        "plain.tflite": ((built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)) / "model.tflite").read_bytes(),
                         "without Ultralytics metadata"),
        "panoptic.tflite": (with_metadata(segment, task="panoptic"), 'task "panoptic", which this app does not run'),
        "classifier.tflite": ((FIXTURES / "classify.tflite").read_bytes(), "open it on /classify"),
        "full_integer.tflite": ((SHARED / "fixtures" / "ultralytics-tflite" / "yolo11n_full_integer_quant.tflite").read_bytes(),
                                "int8 tensors (a full-integer export)"),
        "best.pt": (b"PK\x03\x04 a pickled checkpoint", "PyTorch checkpoint"),
        # ONNX: without Ultralytics' metadata; with an op ONNX Runtime Web lacks
        "bare.onnx": (tiny_onnx(tmp_path / "made-bare.onnx", {}).read_bytes(), "without Ultralytics metadata"),
        "custom_op.onnx": (tiny_onnx(tmp_path / "made-custom.onnx", ONNX_META, op_domain="example.custom").read_bytes(),
                           "could not run in this browser"),
        # metadata whose class names disagree with the head: the page tries it, then reopens its model
        "wrong_names.tflite": (with_metadata(segment, names={"0": "only"}), "could not run in this browser"),
        # metadata that reads well on a FlatBuffer cut short
        "broken.tflite": (segment[:4096] + segment[start:], "could not be read as a TensorFlow Lite FlatBuffer"),
    }
    big = tmp_path / "huge.tflite"
    with open(big, "wb") as f:  # sparse: 401 MB of nothing
        f.truncate(401 * 1024 * 1024)
    context, page, log = open_ready(browser, f"{base_url}/detect?camera=0")
    before = page.text_content("#status-line")
    said = {}
    for name, (data, _) in files.items():
        path = tmp_path / name
        path.write_bytes(data)
        said[name] = give(page, path)
    said["huge.tflite"] = give(page, big)
    page.wait_for_selector("#model-status[data-state='ready']", timeout=120_000)
    value = page.eval_on_selector("#model-select", "s => s.value")
    options = page.eval_on_selector_all("#model-select option", "os => os.map(o => o.value)")
    page.set_input_files("#image-file", str(FIXTURES / "detect-900001.png"))
    wait_frames(page, 1)
    screenshot(page, "detect-your-model-refused")
    after = page.text_content("#status-line")
    context.close()
    for name, (_, words) in files.items():
        assert said[name][0] == "error" and words in said[name][1], (name, said[name])
    assert said["huge.tflite"][0] == "error" and "too large" in said["huge.tflite"][1]
    assert value == "yolov5n" and not any(o.startswith("yours-") for o in options)
    assert after.split(";")[0].split(" on ")[0] == before.split(";")[0].split(" on ")[0]
    assert log.outside_requests == []


def test_a_picked_tfjs_folder_gives_the_apis_answer_for_the_same_model(browser, base_url, built_model):
    """Ultralytics' TF.js export (model.json, shards, metadata.yaml), as the converter keeps it in
    models/yolo/tfjs: picked on /detect, it runs on TF.js and gives what the API gives on the
    same model installed (its .tflite on LiteRT)."""
    folder = built_model("yolo", weights="yolov8n.yaml")
    files = sorted((folder / "tfjs").iterdir())
    assert {f.name for f in files} >= {"model.json", "metadata.yaml"}
    api = requests.post(f"{base_url}/api/v1/detect?model={folder.name}",
                        files={"image": ("bus.jpg", photo_file("bus.jpg").read_bytes())}, timeout=60).json()
    context, page, log = open_ready(browser, f"{base_url}/detect?camera=0&model=yolov5n")
    page.eval_on_selector("#model-message", "el => { el.dataset.state = ''; }")
    page.set_input_files("#model-file", [str(f) for f in files])
    page.wait_for_function(MESSAGE_DONE, timeout=120_000)
    state, text = page.eval_on_selector("#model-message", "el => [el.dataset.state, el.textContent]")
    status = page.text_content("#status-line")
    page.set_input_files("#image-file", str(photo_file("bus.jpg")))
    wait_frames(page, 1)
    rows = page.evaluate(TASK_ROWS)
    backend = page.get_attribute("body", "data-backend")
    screenshot(page, "detect-your-tfjs-folder")
    context.close()
    assert state == "ok" and "your TF.js model" in status and "answer check passed" in status, (text, status)
    assert backend in ("wasm", "webgl", "webgpu", "cpu")
    want = api["detections"]
    assert len(want) >= 1 and [r["class_id"] for r in rows] == [d["class_id"] for d in want]
    for got, ref in zip(rows, want):
        assert np.allclose(got["box"], ref["box"], atol=0.5)
    assert log.console_errors == [] and log.outside_requests == []


def test_the_converters_tflite_on_litert_gives_the_apis_answer(browser, base_url, built_model):
    """The converter's .tflite is Ultralytics' own LiteRT export (NCHW input, boxes as fractions of
    the input: the manifest's graph "ultralytics-litert"), the file a user of `yolo export` gets.
    Installed and opened on litert-wasm, /detect reads it through the page's layout twin and
    gives the API's detections (the API reads it through modelcontract.ultralytics_litert)."""
    folder = built_model("yolo", weights="yolov8n.yaml")
    assert json.loads((folder / "manifest.json").read_text())["graph"] == "ultralytics-litert"
    api = requests.post(f"{base_url}/api/v1/detect?model={folder.name}",
                        files={"image": ("bus.jpg", photo_file("bus.jpg").read_bytes())}, timeout=60).json()
    context, page, log = open_ready(browser, f"{base_url}/detect?camera=0&model={folder.name}&backend=litert-wasm")
    page.set_input_files("#image-file", str(photo_file("bus.jpg")))
    wait_frames(page, 1)
    rows = page.evaluate(TASK_ROWS)
    backend = page.get_attribute("body", "data-backend")
    status = page.text_content("#status-line")
    context.close()
    assert backend == "litert-wasm" and "answer check passed" in status, status
    want = api["detections"]
    assert len(want) >= 1 and [r["class_id"] for r in rows] == [d["class_id"] for d in want]
    for got, ref in zip(rows, want):
        assert np.allclose(got["box"], ref["box"], atol=0.5)
    assert log.console_errors == [] and log.outside_requests == []


def test_with_no_model_installed_the_page_waits_for_yours(browser, tmp_path):
    """A fresh install with no detector: /detect says how to install one and takes the visitor's
    own model meanwhile. It starts no camera; a photo picked first waits for the model given
    after it, then gets predict()'s answer; Remove leaves the page waiting again."""
    photo, expected = next(iter(record("detect")["images"].items()))
    with serving(tmp_path) as url:
        context = browser.new_context()
        page, log = open_page(context, f"{url}/detect")
        page.wait_for_function("() => document.getElementById('status-line').textContent.startsWith('No model yet')",
                               timeout=120_000)
        waiting = page.get_attribute("#model-status", "data-state")
        hint = page.inner_text("#model-status")
        page.set_input_files("#image-file", str(FIXTURES / photo))
        state, text = give(page, FIXTURES / "detect.tflite")
        wait_frames(page, 1)
        rows = page.evaluate(TASK_ROWS)
        opened = page.get_attribute("#model-status", "data-state")
        camera = page.evaluate("() => Boolean(document.getElementById('video').srcObject)")
        screenshot(page, "detect-no-model-installed-yours")
        page.click("#remove-model")
        page.wait_for_function("() => document.getElementById('model-status').dataset.state === 'missing'",
                               timeout=60_000)
        options = page.eval_on_selector_all("#model-select option", "os => os.map(o => o.value)")
        context.close()
    assert waiting == "missing" and "python -m converters" in hint and "your own Ultralytics model" in hint
    assert state == "ok" and opened == "ready" and not camera, text
    want = expected["detections"]
    assert len(want) >= 1 and len(rows) == len(want)
    pairs = match([r["box"] for r in rows], [w["box"] for w in want])
    assert len(pairs) == len(want)
    for i, j, iou in pairs:
        assert rows[i]["class_id"] == want[j]["class_id"] and iou >= 0.99
    assert options == []
    assert log.console_errors == [] and log.outside_requests == []
