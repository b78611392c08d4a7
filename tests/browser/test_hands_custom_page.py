"""/hands' "Your gestures" in headless Chromium, as a user does it: two gestures recorded
live from two photos played by the fake camera (a thumbs-up, an open palm), each told apart
live from the other; the set kept in IndexedDB across browser restarts (one profile on
disk); exported, imported into a fresh profile with the same answers; the API given the
exported file answers the page's names; bad imports and empty names refused with the set
unchanged."""
from __future__ import annotations

import io
import json
import os

import pytest

from server import create_app
from harness.browser import CHROMIUM, screenshot, wait_frames
from harness.clips import write_y4m
from harness.photos import letterbox_rgb, photo_file, photo_rgb
from harness.servers import serving
from tests.teach_steps import READY, open_on_profile, record, yours

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

@pytest.fixture(scope="module")
def handpose(built_model):
    return built_model("handpose")


@pytest.fixture(scope="module")
def base_url(handpose):
    with serving(handpose.parent) as url:
        yield url


@pytest.fixture(scope="module")
def cameras(tmp_path_factory):
    folder = tmp_path_factory.mktemp("custom-cams")
    return {name: write_y4m(folder / f"{name}.y4m", letterbox_rgb(photo_rgb(name)))
            for name in ("up_3.jpg", "none_2.jpg")}


def open_hands(pw, profile, camera, base_url, query="backend=wasm"):
    return open_on_profile(pw, profile, camera, f"{base_url}/hands?{query}")


def live_custom(page) -> list[str]:
    """Each hand's match, a few frames on."""
    shown = int(page.evaluate("() => +(document.getElementById('results').dataset.frame || 0)"))
    wait_frames(page, shown + 3, timeout=120_000)
    return page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.custom)")


def message(page) -> str:
    return page.inner_text("#custom-message")


def test_two_gestures_taught_live_kept_exported_and_imported(pw, base_url, cameras, handpose, tmp_path):
    profile = tmp_path / "profile"
    # 1. The thumbs-up camera: record "like" for 3 s.
    context, page, log = open_hands(pw, profile, cameras["up_3.jpg"], base_url)
    wait_frames(page, 3, timeout=120_000)
    like_examples = record(page, "like")
    like_live = live_custom(page)
    context.close()
    assert like_examples >= 3, like_examples
    assert like_live == ["like"]

    # 2. The same profile, a new browser on the open-palm camera: "like" was kept; the palm is not it.
    context, page, log2 = open_hands(pw, profile, cameras["none_2.jpg"], base_url)
    kept = yours(page)
    before_palm = live_custom(page)
    palm_examples = record(page, "palm")
    palm_live = live_custom(page)
    confidence = page.get_attribute("#custom-list li[data-name='palm']", "data-confidence")
    badge = page.get_attribute("#gesture", "data-custom")
    screenshot(page, "hands_custom_palm")
    with page.expect_download() as download:
        page.click("#custom-export")
    exported = tmp_path / "gestures.json"
    download.value.save_as(exported)
    context.close()
    assert kept == {"like": like_examples}
    assert before_palm == [""]
    assert palm_examples >= 3 and palm_live == ["palm"] and badge == "palm" and float(confidence) == 1.0

    # 3. Back on the thumbs-up camera with both: "like" again, live.
    context, page, log3 = open_hands(pw, profile, cameras["up_3.jpg"], base_url)
    again = live_custom(page)
    context.close()
    assert again == ["like"]

    # 4. A fresh profile: import the file; the same answers, live and on an image.
    context, page, log4 = open_hands(pw, tmp_path / "fresh", cameras["none_2.jpg"], base_url)
    assert yours(page) == {}
    page.set_input_files("#custom-import", str(exported))
    page.wait_for_function("() => +document.getElementById('custom-list').dataset.count === 2")
    imported = yours(page)
    imported_live = live_custom(page)
    page.set_input_files("#image-file", str(photo_file("up_3.jpg")))
    page.wait_for_function("() => document.getElementById('results').dataset.image === 'up_3.jpg'")
    on_image = page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.custom)")
    context.close()
    assert imported == {"like": like_examples, "palm": palm_examples}
    assert imported_live == ["palm"] and on_image == ["like"]

    # 5. The API with the exported file: the page's names on the same photos.
    client = create_app({"MODELS_DIR": handpose.parent, "TESTING": True}).test_client()
    for photo, want in (("up_3.jpg", "like"), ("none_2.jpg", "palm"), ("victory_1.jpg", None)):
        response = client.post("/api/v1/hands", content_type="multipart/form-data", data={
            "image": (io.BytesIO(photo_file(photo).read_bytes()), photo),
            "custom": (io.BytesIO(exported.read_bytes()), "gestures.json")})
        custom = response.get_json()["hands"][0]["custom"]
        assert (custom and custom["name"]) == want, (photo, custom)
    data = json.loads(exported.read_text())
    assert data["format"] == "datarailroad-hand-gestures" and [g["name"] for g in data["classes"]] == ["like", "palm"]
    for lg in (log, log2, log3, log4):
        assert lg.console_errors == [] and lg.outside_requests == []


def test_bad_imports_and_names_leave_the_set_as_it_was(pw, base_url, cameras, tmp_path):
    context, page, log = open_hands(pw, tmp_path / "profile", cameras["up_3.jpg"], base_url)
    wait_frames(page, 3, timeout=120_000)
    page.click("#custom-record")                       # no name
    no_name = message(page)
    record(page, "like")
    before = yours(page)
    bad = {"corrupt.json": b"{not json", "foreign.json": json.dumps({"format": "teachable-machine"}).encode(),
           "photo.json": photo_file("up_3.jpg").read_bytes()[:2000]}
    said = {}
    for name, body in bad.items():
        path = tmp_path / name
        path.write_bytes(body)
        page.set_input_files("#custom-import", str(path))
        page.wait_for_function("() => document.getElementById('custom-message').dataset.kind === 'error'"
                               " && document.getElementById('custom-message').textContent.includes('unchanged')")
        said[name] = message(page)
        page.evaluate("() => { document.getElementById('custom-message').dataset.kind = ''; }")
    after = yours(page)
    page.reload()
    page.wait_for_selector(READY, timeout=300_000)
    page.wait_for_function("() => +document.getElementById('custom-list').dataset.count === 1")
    reloaded = yours(page)
    context.close()
    assert "name" in no_name
    assert after == before == reloaded and list(before) == ["like"]
    assert all(m.startswith("Not a gesture file") for m in said.values()), said
    assert "JSON" in said["corrupt.json"] and "format" in said["foreign.json"]
    assert log.console_errors == [] and log.outside_requests == []
