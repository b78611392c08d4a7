"""The official Ultralytics builds on /detect (tests/convert/test_official_models.py holds the
same builds to predict() through the API): a real photo picked on the page, on TF.js WASM, gives
the API's answer (same classes, boxes within half a pixel, masks, keypoints and rotated corners),
the answer check passes, and the model card says what the model finds and where it comes from.
yolo11n-seg and yolo26n in make test; the pose and OBB models slow."""
from __future__ import annotations

import os

import cv2
import pytest
import requests

from converters import sources
from converters.ultralytics_yolo import official
from harness.browser import CHROMIUM, TASK_ROWS, open_ready, screenshot
from harness.photos import storage_tanks
from harness.servers import serving
from harness.ultralytics_reference import assert_same_rows

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

CASES = [
    pytest.param("yolo11n-seg.pt", "bus.jpg", id="yolo11n-seg"),
    pytest.param("yolo26n.pt", "bus.jpg", id="yolo26n"),
    pytest.param("yolo11n-pose.pt", "zidane.jpg", id="yolo11n-pose", marks=pytest.mark.slow),
    pytest.param("yolo26n-obb.pt", "tanks", id="yolo26n-obb", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("checkpoint, photo", CASES)
def test_an_official_model_on_the_page_gives_the_apis_answer(browser, built_model, tmp_path, checkpoint, photo):
    if not official.shared_path(checkpoint).is_file():
        pytest.skip(f"{checkpoint} is not in {official.shared_path(checkpoint).parent}")
    folder = built_model("yolo", weights=checkpoint)
    rgb = storage_tanks() if photo == "tanks" else sources.load_photo(photo)
    path = tmp_path / f"{photo}.png"
    cv2.imwrite(str(path), rgb[:, :, ::-1])
    with serving(folder.parent) as url:
        with open(path, "rb") as f:
            api = requests.post(f"{url}/api/v1/detect?model={folder.name}", files={"image": f}, timeout=120).json()
        context, page, log = open_ready(browser, f"{url}/detect?model={folder.name}&backend=wasm&camera=0")
        card = page.text_content("#model-card")
        page.set_input_files("#image-file", str(path))
        page.wait_for_function("() => +(document.getElementById('results').dataset.frame || 0) >= 1", timeout=120_000)
        rows = page.evaluate(TASK_ROWS)
        check = page.get_attribute("body", "data-answer-check")
        screenshot(page, f"detect-{folder.name}")
        context.close()
    assert log.console_errors == [] and log.outside_requests == [] and check == "passed"
    assert checkpoint in card and "AGPL-3.0" in card and "Finds" in card
    assert_same_rows(rows, api["detections"], rgb.shape[1], rgb.shape[0])
