"""/classify's live camera and "Your classes" (Teach) in headless Chromium: the live top-5
updating on each backend; two classes taught live from two photos played by the fake
camera (bus.jpg, zidane.jpg), told apart live; the set kept in IndexedDB across browser
restarts (one profile on disk); exported and imported into a fresh profile with the same
answers, live and on an uploaded image; the API given the exported file answers the page's
classes; bad input (no name, a corrupt or foreign file, Record with no live camera) is
refused with the set unchanged."""
from __future__ import annotations

import io
import json
import os

import pytest

from converters.sources import photo_path
from server import create_app
from harness.browser import CHROMIUM, screenshot
from harness.clips import write_y4m
from harness.photos import letterbox_rgb, photo_rgb
from harness.servers import serving
from tests.teach_steps import open_on_profile, record, yours

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

BUS_TYPES = {"school bus", "trolleybus", "minibus", "passenger car", "police van", "recreational vehicle"}


@pytest.fixture(scope="module")
def lite0(built_model):
    return built_model("efficientnet-lite0")


@pytest.fixture(scope="module")
def base_url(lite0):
    with serving(lite0.parent) as url:
        yield url


@pytest.fixture(scope="module")
def cameras(tmp_path_factory):
    folder = tmp_path_factory.mktemp("teach-cams")
    return {name: write_y4m(folder / f"{name}.y4m", letterbox_rgb(photo_rgb(name))) for name in ("bus.jpg", "zidane.jpg")}


def open_classify(pw, profile, camera, base_url, query="backend=wasm&live=1"):
    return open_on_profile(pw, profile, camera, f"{base_url}/classify?{query}")


def live_frames(page) -> int:
    return int(page.get_attribute("#live-top5", "data-frames") or 0)


def wait_live(page, n: int = 2) -> dict:
    """n more live frames; then the live top-5 labels and your class."""
    start = live_frames(page)
    page.wait_for_function("n => +document.getElementById('live-top5').dataset.frames >= n", arg=start + n,
                           timeout=120_000)
    return {"top": page.eval_on_selector_all("#live-top5 li", "items => items.map(li => li.dataset.label)"),
            "custom": page.get_attribute("#live-custom", "data-custom"),
            "backend": page.get_attribute("#live-top5", "data-backend")}


@pytest.mark.parametrize("backend", ["wasm", "litert-wasm", "server"])
def test_live_camera_top5_updates_on_each_backend(pw, base_url, cameras, tmp_path, backend):
    context, page, log = open_classify(pw, tmp_path / "profile", cameras["bus.jpg"], base_url,
                                       f"backend={backend}&live=1")
    first = wait_live(page)
    later = wait_live(page, 3)
    context.close()
    assert first["backend"] == later["backend"] == backend
    assert len(later["top"]) == 5 and later["top"][0] in BUS_TYPES, later
    assert log.console_errors == [] and log.outside_requests == []


def test_two_classes_taught_live_kept_exported_and_imported(pw, base_url, cameras, lite0, tmp_path):
    profile = tmp_path / "profile"
    context, page, log = open_classify(pw, profile, cameras["bus.jpg"], base_url)
    wait_live(page)
    bus_examples = record(page, "bus")
    bus_live = wait_live(page)
    context.close()
    assert bus_examples >= 3 and bus_live["custom"] == "bus"

    context, page, log2 = open_classify(pw, profile, cameras["zidane.jpg"], base_url)
    kept = yours(page)
    people_examples = record(page, "people")
    people_live = wait_live(page)
    confidence = page.get_attribute("#live-custom", "data-confidence")
    screenshot(page, "classify_teach_people")
    with page.expect_download() as download:
        page.click("#custom-export")
    exported = tmp_path / "classes.json"
    download.value.save_as(exported)
    context.close()
    assert kept == {"bus": bus_examples}
    assert people_examples >= 3 and people_live["custom"] == "people" and float(confidence) == 1.0

    context, page, log3 = open_classify(pw, profile, cameras["bus.jpg"], base_url)
    again = wait_live(page)
    context.close()
    assert again["custom"] == "bus"

    context, page, log4 = open_classify(pw, tmp_path / "fresh", cameras["zidane.jpg"], base_url)
    assert yours(page) == {}
    page.set_input_files("#custom-import", str(exported))
    page.wait_for_function("() => +document.getElementById('custom-list').dataset.count === 2")
    imported = yours(page)
    imported_live = wait_live(page)
    page.set_input_files("#image-files", str(photo_path("bus.jpg")))
    page.wait_for_selector(".result-card[data-state='done']", timeout=120_000)
    on_image = page.get_attribute(".result-card", "data-custom")
    context.close()
    assert imported == {"bus": bus_examples, "people": people_examples}
    assert imported_live["custom"] == "people" and on_image == "bus"

    client = create_app({"MODELS_DIR": lite0.parent, "TESTING": True}).test_client()
    for photo, want in (("bus.jpg", "bus"), ("zidane.jpg", "people")):
        response = client.post("/api/v1/classify", content_type="multipart/form-data", data={
            "image": (io.BytesIO(photo_path(photo).read_bytes()), photo),
            "custom": (io.BytesIO(exported.read_bytes()), "classes.json")})
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.get_json()["custom"]["name"] == want, (photo, response.get_json()["custom"])
    data = json.loads(exported.read_text())
    assert data["format"] == "datarailroad-image-classes" and len(data["classes"][0]["examples"][0]) == 1280
    for lg in (log, log2, log3, log4):
        assert lg.console_errors == [] and lg.outside_requests == []


def test_teach_from_images_and_bad_input_leave_the_set_as_it_was(pw, base_url, cameras, tmp_path):
    context, page, log = open_classify(pw, tmp_path / "profile", cameras["bus.jpg"], base_url, "backend=wasm")
    page.fill("#custom-name", "bus")
    page.click("#custom-record")                         # no live camera
    no_camera = page.inner_text("#custom-message")
    page.set_input_files("#custom-files", str(photo_path("bus.jpg")))
    page.wait_for_selector("#custom-list li[data-name='bus']", timeout=60_000)
    one = page.inner_text("#custom-message")
    page.fill("#custom-name", "  ")
    page.set_input_files("#custom-files", str(photo_path("zidane.jpg")))
    page.wait_for_function("() => document.getElementById('custom-message').textContent.includes('name')")
    no_name = page.inner_text("#custom-message")
    before = yours(page)
    said = {}
    for name, body in {"corrupt.json": b"{nope", "gestures.json": json.dumps(
            {"format": "datarailroad-hand-gestures", "version": 1, "classes": []}).encode()}.items():
        path = tmp_path / name
        path.write_bytes(body)
        page.set_input_files("#custom-import", str(path))
        page.wait_for_function("() => document.getElementById('custom-message').textContent.includes('unchanged')")
        said[name] = page.inner_text("#custom-message")
        page.evaluate("() => { document.getElementById('custom-message').textContent = ''; }")
    after = yours(page)
    context.close()
    assert "live camera" in no_camera
    assert "Only 1" in one and "name" in no_name
    assert before == after == {"bus": 1}
    assert all(m.startswith("Not a class file") for m in said.values()), said
    assert log.console_errors == [] and log.outside_requests == []


def test_holding_record_records_while_held(pw, base_url, cameras, tmp_path):
    """Pressed 2 s: examples from those 2 s, and none after the release."""
    context, page, log = open_classify(pw, tmp_path / "profile", cameras["bus.jpg"], base_url)
    wait_live(page)
    page.fill("#custom-name", "bus")
    box = page.locator("#custom-record").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.wait_for_timeout(2000)
    recording = page.get_attribute("#custom-panel", "data-recording")
    page.mouse.up()
    page.wait_for_selector("#custom-list li[data-name='bus']", timeout=30_000)
    held = yours(page)["bus"]
    wait_live(page, 5)
    after = yours(page)["bus"]
    context.close()
    assert recording == "true"
    assert held >= 3 and after == held, (held, after)
    assert log.console_errors == [] and log.outside_requests == []
