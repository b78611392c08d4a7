"""Model cards (GET /api/v1/models/<id>, #model-card on the pages) and the 320-px detector
(yolov5n-320) on the page and the API: the card shows the manifest's own sha256 and parity
figures, the page embeds the API's JSON, and the 320 model finds the bus and the persons on
bus.jpg through the fake camera and through the API."""
from __future__ import annotations

import json
import os
import re

import pytest

from server import cards
from tests import reference
from harness.browser import CHROMIUM, open_page, open_ready, page_detections, screenshot, wait_frames
from harness.clips import read_y4m_rgb
from harness.models import read_manifest
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import photo_bytes, photo_rgb
from harness.servers import live_server

needs_weights = pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent")
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")


@pytest.fixture(scope="module")
def yolov5n(built_model):
    return built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS))


@pytest.fixture(scope="module")
def yolov5n_320(built_model):
    """The same weights at 320 px, installed beside yolov5n."""
    return built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS), imgsz=320)


@pytest.fixture(scope="module")
def app(yolov5n, yolov5n_320):
    from server import create_app

    assert yolov5n.parent == yolov5n_320.parent, "both detectors must be installed in one models folder"
    return create_app({"MODELS_DIR": yolov5n.parent, "TESTING": True})


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


def card_schema_errors(client, card) -> list[str]:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    doc = client.get("/api/v1/openapi.json").get_json()
    assert "/api/v1/models/{model_id}" in doc["paths"]
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(doc, default_specification=DRAFT202012))
    validator = Draft202012Validator({"$ref": "urn:openapi#/components/schemas/ModelCard"}, registry=registry)
    return [e.message for e in validator.iter_errors(card)]


# ---------------------------------------------------------------------------- the card as JSON

@needs_weights
def test_api_card_of_yolov5n_carries_the_manifests_figures(client, yolov5n):
    manifest = read_manifest(yolov5n)
    response = client.get("/api/v1/models/yolov5n")
    assert response.status_code == 200
    card = response.get_json()
    sha = manifest["source"]["sha256"]
    assert card["source"]["sha256"] == sha and card["source"]["sha256_prefix"] == sha[:8]
    assert card["parity"]["relative"] == manifest["parity"]["tfjs"]["relative"]
    assert card["parity"]["text"] == (f"max relative error {cards.scientific(manifest['parity']['tfjs']['relative'])}"
                                      f" vs PyTorch on bus.jpg")
    # The released YOLOv5 checkpoint is AGPL-3.0 (a build that predates source.licence: "unknown").
    assert card["licence"]["name"] == (manifest["source"].get("licence") or {}).get("name", "unknown")
    assert card["sizes"]["server"]["tflite_bytes"] == manifest["files"][manifest["server"]["model"]] > 0
    tfjs_files = sum(size for path, size in manifest["files"].items() if path.startswith("tfjs/"))
    assert card["sizes"]["browser"]["tfjs_bytes"] == tfjs_files > 0
    assert card["input"] == {"width": 640, "height": 640}
    assert card["created"] == manifest["created"]
    assert card_schema_errors(client, card) == []


@needs_weights
def test_unknown_model_is_a_404_json_error(client):
    for model_id in ("no-such-model", "yolov5n..", "x" * 300):
        response = client.get(f"/api/v1/models/{model_id}")
        assert response.status_code == 404 and response.mimetype == "application/json", model_id
        assert response.get_json()["error"]["code"] in ("unknown_model", "not_found")
    assert client.get("/api/v1/models/no-such-model").get_json()["error"]["code"] == "unknown_model"
    assert client.get("/api/v1/models").status_code == 200  # still serving


@needs_weights
def test_page_embeds_the_same_card_as_the_api(client, yolov5n, yolov5n_320):
    html = client.get("/detect").get_data(as_text=True)
    embedded = json.loads(re.search(r'<script type="application/json" id="model-cards">(.*?)</script>', html, re.S)
                          .group(1))
    assert {"yolov5n", "yolov5n-320"} <= set(embedded)
    for model_id in ("yolov5n", "yolov5n-320"):
        assert embedded[model_id] == client.get(f"/api/v1/models/{model_id}").get_json()


def test_card_without_licence_parity_or_real_weights_degrades_gracefully():
    card = cards.card({"id": "bare", "task": "detect", "source": {"kind": "random", "sha256": "random-seed0"}})
    assert card["licence"]["name"] == "unknown"
    assert card["source"]["sha256"] is None and card["source"]["sha256_prefix"] is None
    assert card["source"]["random_weights"] is True
    assert card["parity"] is None and card["speed"] is None and card["agreement"] is None
    assert card["sizes"] == {"browser": {"tfjs_bytes": 0, "tflite_bytes": 0}, "server": {"tflite_bytes": 0}}
    assert cards.scientific(3.6e-6) == "3.6e-6" and cards.scientific(1.5e-10) == "1.5e-10"


# ---------------------------------------------------------------------------- the 320-px detector

@needs_weights
def test_320_manifest_and_card_describe_its_size_speed_and_agreement(client, yolov5n_320):
    manifest = read_manifest(yolov5n_320)
    assert manifest["id"] == "yolov5n-320" and manifest["input"]["shape"] == [1, 320, 320, 3]
    card = client.get("/api/v1/models/yolov5n-320").get_json()
    agreement = manifest["agreement"]
    assert card["input"] == {"width": 320, "height": 320}
    assert card["agreement"]["kept"] == agreement["kept"] and card["agreement"]["fraction"] == agreement["fraction"]
    assert f"keeps {agreement['kept']}/{agreement['reference_detections']} of 640's detections" in card["picker"]
    assert f"{manifest['speed']['ms']:.0f} ms native" in card["picker"]
    assert card_schema_errors(client, card) == []


@needs_weights
def test_api_runs_the_320_model_on_bus_jpg(client, yolov5n_320):
    response = client.post("/api/v1/detect?model=yolov5n-320", data=photo_bytes("bus.jpg"),
                           content_type="image/jpeg")
    assert response.status_code == 200, response.get_json()
    result = response.get_json()
    labels = [d["label"] for d in result["detections"]]
    assert result["model"] == "yolov5n-320"
    assert labels.count("bus") >= 1 and labels.count("person") >= 3, labels
    # What the API returns is the 320 model's own output (letterboxed to 320, not 640).
    expected = reference.detect(yolov5n_320, photo_rgb("bus.jpg"))
    assert sorted(d["class_id"] for d in result["detections"]) == sorted(d["class_id"] for d in expected)


# ---------------------------------------------------------------------------- in Chromium

@pytest.fixture(scope="module")
def base_url(app):
    with live_server(app) as url:
        yield url


@needs_chromium
@needs_weights
def test_detect_page_card_shows_sha256_prefix_and_parity_and_follows_the_picker(camera_browser, base_url, yolov5n):
    manifest = read_manifest(yolov5n)
    card = cards.card(manifest)
    context = camera_browser.new_context()
    page, log = open_page(context, f"{base_url}/detect?model=yolov5n&backend=wasm&camera=0")
    page.wait_for_selector("#model-card[data-model='yolov5n']", timeout=60_000)
    text = page.inner_text("#model-card")
    prefix = page.get_attribute("#model-card .sha-prefix", "data-sha256")
    hover = page.get_attribute("#model-card .sha-prefix", "title")
    options = page.eval_on_selector_all("#model-select option", "os => os.map(o => [o.value, o.textContent])")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    screenshot(page, "detect_model_card")
    page.select_option("#model-select", "yolov5n-320")
    page.wait_for_selector("#model-card[data-model='yolov5n-320']", timeout=60_000)
    text_320 = page.inner_text("#model-card")
    context.close()

    assert manifest["source"]["sha256"][:8] in text and prefix == hover == manifest["source"]["sha256"]
    assert card["parity"]["text"] in text and "max relative error" in text and "vs PyTorch on bus.jpg" in text
    assert "Licence" in text and card["licence"]["name"] in text
    labels = dict(options)
    assert re.search(r"yolov5n-320 · 320 px · \d+ ms native · keeps \d+/\d+ of 640's detections", labels["yolov5n-320"])
    assert labels["yolov5n"].startswith("yolov5n · 640 px")
    assert "320×320 input" in text_320 and "keeps" in text_320
    assert log.outside_requests == [] and log.console_errors == []


@needs_chromium
@needs_weights
def test_320_model_finds_the_bus_and_the_persons_through_the_fake_camera(camera_browser, base_url, bus_camera,
                                                                         yolov5n_320):
    context, page, log = open_ready(camera_browser, f"{base_url}/detect?model=yolov5n-320&backend=wasm")
    wait_frames(page, 2)
    found = page_detections(page)
    screenshot(page, "detect_320_camera_bus")
    context.close()

    labels = [d["label"] for d in found]
    assert labels.count("bus") >= 1 and labels.count("person") >= 3, labels
    # The page ran the 320 model at 320 px: its confident detections are the Python reference's.
    expected = reference.detect(yolov5n_320, read_y4m_rgb(bus_camera))
    assert sorted(d["class_id"] for d in found if d["score"] >= 0.3) == \
        sorted(d["class_id"] for d in expected if d["score"] >= 0.3)
    assert log.outside_requests == [] and log.console_errors == []
