"""Ultralytics' semantic segmentation and depth models on /detect and /api/v1/detect, held to
Ultralytics' own predict() on the same weights and scene.

Agreement with predict() needs predict()'s weights, not good ones: the checkpoints here are
Ultralytics' own architectures (yolo26n-sem, yolo26n-depth) with seeded random weights, saved
by its Model.save (harness/user_exports.py untrained_checkpoint), so their maps vary from pixel
to pixel with many near-ties (a model trained for one or two epochs on the scenes gave every
pixel one class, which tests nothing). Trained models (minutes each) are held to the scenes'
truth in tests/convert/test_dense_tasks.py (make test-all). Each checkpoint is converted (TF.js
and LiteRT), then read by the page on TF.js and LiteRT.js, by the API, and as the files a user
has (the LiteRT export, the ONNX export) dropped on the page:
- semantic: each class's share of the photo within 0.005 of predict()'s, the class under the
  pointer predict()'s; the API's class map predict()'s at >= 99.5% of pixels;
- depth: nearest, farthest and mean, and the depth under the pointer, within 0.1% of the map's
  range from predict()'s; the API's map the same, plus its 16-bit step.
Figures go to test-artifacts/dense-pages.json."""
from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest

from converters.scenes import dataset
from harness.browser import CHROMIUM, give_model, open_page, recorded_figures, screenshot, wait_frames
from harness.models import install_copy
from harness.servers import serving
from harness.ultralytics_reference import answers
from harness.user_exports import onnx_file, untrained_checkpoint
from modelcontract import dense

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

TASKS = ("semantic", "depth")
SIDE = 160                       # the size the scene models train at (train.DEFAULTS), and these are built at
SCENE = 256
SCENES = (700_000, 700_001)      # seeds no training scene used
SHARE, RELATIVE = 0.005, 1e-3


@pytest.fixture(scope="module")
def figures():
    with recorded_figures("dense-pages.json") as data:
        yield data


@pytest.fixture(scope="module")
def models(models_dir, built_model, tmp_path_factory):
    """task -> (checkpoint, installed folder), both installed in one models folder."""
    served = tmp_path_factory.mktemp("dense-models")
    found = {}
    for task in TASKS:
        weights = untrained_checkpoint(models_dir / ".untrained", task, SIDE)
        built = built_model("yolo", weights=str(weights), imgsz=SIDE)
        found[task] = (weights, install_copy(built, served, f"{task}-untrained"))
    return found


@pytest.fixture(scope="module")
def base_url(models):
    with serving(next(iter(models.values()))[1].parent) as url:
        yield url


@pytest.fixture(scope="module")
def scenes(tmp_path_factory):
    """task -> held-out scene PNGs."""
    folder = tmp_path_factory.mktemp("dense-scenes")
    found = {}
    for task in TASKS:
        found[task] = []
        for seed in SCENES:
            image, _ = dataset.scene(task, seed, SCENE)
            path = folder / f"{task}-{seed}.png"
            cv2.imwrite(str(path), image[:, :, ::-1])
            found[task].append(path)
    return found


def predicted(weights: Path, photos: list, task: str) -> list[np.ndarray]:
    """predict()'s class map or depth map of each photo (one that varies: else nothing is tested)."""
    maps = [entry["class_map" if task == "semantic" else "depth"] for entry in answers(weights, photos, SIDE, task=task)]
    for found in maps:
        assert len(np.unique(found)) > 1 if task == "semantic" else found.max() > 1.05 * found.min()
    return maps


PAGE_RESULTS = """() => Array.from(document.querySelectorAll('#results li')).map((li) => ({...li.dataset}))"""


def pointer_checks(page, want: np.ndarray, task: str) -> float:
    """The value under the pointer at a few points well inside one region of predict()'s map
    against predict()'s; -> the worst difference (classes: 0 or 1; depth: over the map's range)."""
    height, width = want.shape
    box = page.locator("#view").bounding_box()
    worst = 0.0
    for fx, fy in ((0.3, 0.3), (0.5, 0.55), (0.7, 0.8), (0.2, 0.9)):
        x, y = int(fx * width), int(fy * height)
        if task == "semantic" and len(np.unique(want[max(0, y - 3):y + 4, max(0, x - 3):x + 4])) > 1:
            continue   # on a boundary: a sub-pixel difference in where the pointer lands changes the class
        page.mouse.move(box["x"] + (x + 0.5) * box["width"] / width, box["y"] + (y + 0.5) * box["height"] / height)
        page.wait_for_function("() => !document.getElementById('map-pointer').hidden")
        at = page.eval_on_selector("#map-pointer", "el => ({...el.dataset})")
        px, py = int(at["x"]), int(at["y"])
        assert abs(px - x) <= 1 and abs(py - y) <= 1, (at, x, y)
        if task == "semantic":
            worst = max(worst, float(int(at["value"]) != int(want[py, px])))
        else:
            worst = max(worst, abs(float(at["value"]) - want[py, px]) / np.ptp(want))
    return worst


def page_against(page, photos: list, want: list, task: str, labels: list) -> dict:
    """The page's results on each photo against predict()'s maps -> the worst figures."""
    worst = {"share": 0.0, "relative": 0.0, "pointer": 0.0}
    for n, (photo, reference) in enumerate(zip(photos, want), start=1):
        page.set_input_files("#image-file", str(photo))
        wait_frames(page, n)
        rows = page.evaluate(PAGE_RESULTS)
        if task == "semantic":
            summary = dense.semantic_summary(reference.astype(np.uint8), labels)
            shares = {int(r["classId"]): float(r["share"]) for r in rows}
            for c in summary["classes"]:
                worst["share"] = max(worst["share"], abs(shares.get(c["class_id"], 0.0) - c["share"]))
            assert set(shares) <= {c["class_id"] for c in summary["classes"]} | {
                k for k, v in shares.items() if v <= SHARE}, (shares, summary)
        else:
            (row,) = rows
            summary = dense.depth_summary(reference)
            for key in ("min", "max", "mean"):
                worst["relative"] = max(worst["relative"], abs(float(row[key]) - summary[key]) / np.ptp(reference))
        worst["pointer"] = max(worst["pointer"], pointer_checks(page, reference, task))
    return worst


def assert_close(worst: dict, task: str) -> None:
    if task == "semantic":
        assert worst["share"] <= SHARE and worst["pointer"] == 0, worst
    else:
        assert worst["relative"] <= RELATIVE and worst["pointer"] <= RELATIVE, worst


@pytest.mark.parametrize("backend", ["wasm", "litert-wasm"])
@pytest.mark.parametrize("task", TASKS)
def test_the_page_draws_predicts_map(browser, base_url, models, scenes, figures, task, backend):
    weights, folder = models[task]
    want = predicted(weights, scenes[task], task)
    labels = dense_labels(folder)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page, log = open_page(context, f"{base_url}/detect?model={folder.name}&camera=0&backend={backend}")
    # picked the moment the page opens, while its model loads
    worst = page_against(page, scenes[task], want, task, labels)
    assert page.eval_on_selector("#model-select", "s => s.value") == folder.name
    legend = page.text_content("#map-legend")
    shown_backend = page.get_attribute("body", "data-backend")
    screenshot(page, f"detect-{task}-{backend}")
    page.set_viewport_size({"width": 390, "height": 844})
    screenshot(page, f"detect-{task}-{backend}-phone")
    context.close()
    figures[f"{task} on {backend}"] = worst
    assert shown_backend == backend
    assert_close(worst, task)
    assert ("far" in legend and "near" in legend) if task == "depth" else "%" in legend, legend
    assert log.console_errors == [] and log.outside_requests == []


def dense_labels(folder: Path) -> list:
    import json

    return json.loads((folder / "manifest.json").read_text())["labels"]


@pytest.mark.parametrize("task", TASKS)
def test_the_api_answers_predicts_map(base_url, models, scenes, figures, task):
    import requests

    weights, folder = models[task]
    want = predicted(weights, scenes[task], task)
    worst = 0.0
    for photo, reference in zip(scenes[task], want):
        with open(photo, "rb") as f:
            response = requests.post(f"{base_url}/api/v1/detect", params={"model": folder.name},
                                     files={"image": ("scene.png", f, "image/png")}, timeout=60)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["detections"] == [] and set(body) >= {task, "image", "timing_ms"}
        got = dense.decode_map(body[task])
        assert got.shape == reference.shape
        if task == "semantic":
            share = float((got == reference).mean())
            worst = max(worst, 1 - share)
            assert share >= 0.995, share
            assert {c["class_id"] for c in body[task]["classes"]} == set(np.unique(got).tolist())
        else:
            step = (body[task]["max"] - body[task]["min"]) / dense.DEPTH_LEVELS
            difference = np.abs(got - reference) - step
            worst = max(worst, float(difference.max() / np.ptp(reference)))
            assert worst <= RELATIVE, worst
    figures[f"{task} API"] = {"worst": worst}


# The LiteRT export is the build's own model.tflite, which the litert-wasm page case above
# already reads through the same wrapper: in make test-all only.
@pytest.mark.parametrize("kind", [pytest.param("tflite", marks=pytest.mark.slow), "onnx"])
@pytest.mark.parametrize("task", TASKS)
def test_a_users_file_gives_predicts_map(browser, base_url, models, models_dir, scenes, figures, task, kind):
    """The LiteRT export (the build's own model.tflite, Ultralytics' metadata inside) or the
    ONNX export (a semantic model's with its argmax inside) picked as the visitor's model."""
    weights, folder = models[task]
    path = folder / "model.tflite" if kind == "tflite" else onnx_file(models_dir / ".onnx-untrained", weights, SIDE)
    want = predicted(path, scenes[task], task)
    context = browser.new_context()
    page, log = open_page(context, f"{base_url}/detect?camera=0")
    give_model(page, path)
    worst = page_against(page, scenes[task], want, task, dense_labels(folder))
    status = page.text_content("#status-line")
    context.close()
    figures[f"{task} {kind} file"] = worst
    assert "answer check passed" in status, status
    if kind == "onnx" and task == "semantic":
        # the file gives its class map at the input size: predict() resizes it nearest, the page
        # bilinear one-hot, so a boundary pixel may fall to either side
        assert worst["share"] <= 0.01 and worst["pointer"] == 0, worst
    else:
        assert_close(worst, task)
    assert log.console_errors == [] and log.outside_requests == []
