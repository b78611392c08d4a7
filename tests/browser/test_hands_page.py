"""/hands in headless Chromium: the page's hand pipeline (static/js/contract/hands.js, the steps of
hand-pose-detection's 'tfjs' runtime) on our converted MediaPipe Hands graphs — and on the same
.tflite files with LiteRT.js — against MediaPipe's own Python solution on the same real
photos — through the image input (file picker and drag-and-drop) and through the fake camera
(the photo letterboxed into a 640x480 y4m), on WASM, once on WebGL; 60 live frames of tensor
hygiene (a per-frame leak shows within 100); zero requests outside 127.0.0.1."""
from __future__ import annotations

import os

import numpy as np
import pytest

from modelcontract.hands import SWAP
from modelcontract.twins import TWINS
from harness.browser import (CHROMIUM, RECORD_FRAMES, drop_files, fake_camera_flags, launch, open_page,
                                   recorded_figures, screenshot, wait_frames)
from harness.clips import read_y4m_rgb, write_y4m
from harness.photos import HAND_GESTURES, letterbox_rgb, mediapipe_hands, mediapipe_on, photo_file, photo_rgb
from harness.servers import serving

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

KEYPOINT_TOLERANCE_PX = 12.0
# The gesture table the page shows (twins.json, which gesture.js and gesture.py read).
EMOJI = {name: g["emoji"] for name, g in TWINS["gesture"]["gestures"].items()}
LABEL = {name: g["label"] for name, g in TWINS["gesture"]["gestures"].items()}


@pytest.fixture(scope="module")
def handpose(built_model):
    return built_model("handpose")


@pytest.fixture(scope="module")
def base_url(handpose):
    with serving(handpose.parent) as url:
        yield url


@pytest.fixture(scope="module")
def figures():
    """Measured figures, written to test-artifacts/hands-figures.json at the end."""
    with recorded_figures("hands-figures.json") as data:
        yield data


# Records every value the load progress bar is given (byte progress of the library's loads).
RECORD_PROGRESS = """
window.__progress = [];
const own = Object.getOwnPropertyDescriptor(HTMLProgressElement.prototype, 'value');
Object.defineProperty(HTMLProgressElement.prototype, 'value', {
  set(v) { window.__progress.push(v); own.set.call(this, v); }, get() { return own.get.call(this); }});
"""


def open_hands(browser, base_url, query):
    context = browser.new_context()
    context.add_init_script(RECORD_PROGRESS)
    page, log = open_page(context, f"{base_url}/hands?{query}")
    page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
    return context, page, log


def frame(page) -> int:
    return page.evaluate("() => +(document.getElementById('results').dataset.frame || 0)")


def page_hands(page) -> list[dict]:
    return page.eval_on_selector_all(
        "#results li",
        "items => items.map(li => ({handedness: li.dataset.handedness, model_handedness: li.dataset.modelHandedness,"
        " score: +li.dataset.score, gesture: li.dataset.gesture,"
        " emoji: li.querySelector('.gesture-emoji').textContent, text: li.textContent,"
        " keypoints: li.dataset.keypoints.split(';').map(p => p.split(',').map(Number))}))")


def badge(page) -> dict:
    return page.eval_on_selector("#gesture", "el => ({gesture: el.dataset.gesture,"
                                 " emoji: el.querySelector('.gesture-emoji').textContent,"
                                 " label: el.querySelector('.gesture-label').textContent})")


def keypoint_error(found: dict, reference: dict) -> tuple[float, float]:
    d = np.linalg.norm(np.asarray(found["keypoints"]) - np.asarray(reference["image"])[:, :2], axis=1)
    return float(d.mean()), float(d.max())


def tolerance(reference: dict) -> float:
    """12 px, or 3% of the hand's size for hands larger than ~400 px (down_1.jpg's fist fills
    an 817x1200 photo: hand-pose-detection itself, run in Node on the same files, lands 28 px
    from MediaPipe's Python graph there; the page adds nothing to that)."""
    xy = np.asarray(reference["image"])[:, :2]
    return max(KEYPOINT_TOLERANCE_PX, 0.03 * float(np.linalg.norm(xy.max(axis=0) - xy.min(axis=0))))


def upload(page, name, drop=False):
    before = frame(page)
    if drop:
        drop_files(page, "#stage", [(name, "image/jpeg", photo_file(name).read_bytes())])
    else:
        page.set_input_files("#image-file", str(photo_file(name)))
    wait_frames(page, before + 1)
    assert page.get_attribute("#results", "data-image") == name


def assert_gesture_shown(hand, shown, expected):
    """The hand's entry (data-gesture, emoji, text) and the badge over the stage agree."""
    assert hand["gesture"] == expected
    assert hand["emoji"] == EMOJI[expected]
    assert (LABEL[expected] in hand["text"]) if expected != "none" else "thumbs" not in hand["text"]
    assert shown == {"gesture": expected, "emoji": EMOJI[expected], "label": LABEL[expected]}


# ---------------------------------------------------------------- image input (WASM)

@pytest.fixture(scope="module")
def image_page(browser, base_url):
    """One WASM page for the still images, detection threshold 0.3 as the Python reference."""
    context, page, log = open_hands(browser, base_url, "backend=wasm&camera=0&score=0.3")
    yield page, log
    context.close()
    assert log.outside_requests == [] and log.console_errors == [] and log.failed_requests == []


def test_load_progress_counts_the_library_loads(image_page):
    """The two graphs (palm detector, landmarks) load under one byte-progress bar."""
    page, _ = image_page
    values = page.evaluate("() => window.__progress")
    assert len([v for v in values if 0 < v < 1]) >= 3, values
    assert values == sorted(values) and values[-1] == 1
    assert "wasm" in page.inner_text("#status-line")


def test_zidane_one_hand_within_12px_of_mediapipe(image_page, figures):
    page, log = image_page
    upload(page, "zidane.jpg")
    hands = page_hands(page)
    size = page.eval_on_selector("#results", "el => [+el.dataset.width, +el.dataset.height]")
    reference = mediapipe_hands("zidane.jpg", "full", 0.3)
    assert size == [1280, 720]
    assert len(reference) == 1 and len(hands) == 1
    hand = hands[0]
    assert len(hand["keypoints"]) == 21
    mean, worst = keypoint_error(hand, reference[0])
    figures["zidane.jpg:image:wasm:full"] = {"mean_px": mean, "max_px": worst, "score": hand["score"],
                                            "gesture": hand["gesture"]}
    assert mean <= KEYPOINT_TOLERANCE_PX, (mean, worst)
    # The model's label is for a mirrored picture; a photo is not: the page reports the person's hand.
    assert hand["model_handedness"] == reference[0]["handedness"]
    assert hand["handedness"] == SWAP[reference[0]["handedness"]]
    assert hand["gesture"] == "none"    # index finger pointing sideways: not pointing up
    assert log.outside_requests == [] and log.console_errors == []


@pytest.mark.parametrize("name", list(HAND_GESTURES))
def test_photo_gesture_through_image_input(image_page, figures, name):
    page, log = image_page
    upload(page, name, drop=name == "down_3.jpg")   # one through drag-and-drop
    hands = page_hands(page)
    reference = mediapipe_hands(name, "full", 0.3)
    assert len(hands) == 1 == len(reference)
    mean, worst = keypoint_error(hands[0], reference[0])
    figures[f"{name}:image:wasm:full"] = {"mean_px": mean, "max_px": worst, "score": hands[0]["score"],
                                         "gesture": hands[0]["gesture"], "handedness": hands[0]["handedness"]}
    if name == "down_1.jpg":
        screenshot(page, "hands_image_down_1")
    assert mean <= tolerance(reference[0]), (mean, worst)
    assert hands[0]["handedness"] == SWAP[reference[0]["handedness"]]
    assert_gesture_shown(hands[0], badge(page), HAND_GESTURES[name])
    assert log.outside_requests == [] and log.console_errors == []


# The lite models are weak on two photos, in MediaPipe's own Python graph too: neither finds
# the hand on up_1.jpg, and on down_1.jpg (a fist filling the frame) the lite landmarks land
# 50-80 px apart between hand-pose-detection and MediaPipe, with the fingers read as straight
# (no gesture). The full model is the one tested on every photo.
LITE_UNRELIABLE = {"down_1.jpg"}


def test_lite_model_matches_mediapipe_lite(browser, base_url, figures):
    """Lite on every photo: where MediaPipe's own lite model finds the hand, ours does, with the
    right gesture (but on LITE_UNRELIABLE); where it misses (up_1.jpg), ours misses too."""
    context, page, log = open_hands(browser, base_url, "backend=wasm&camera=0&score=0.3&variant=lite")
    assert page.get_attribute("#model-status", "data-variant") == "lite"
    seen = {}
    for name in HAND_GESTURES:
        upload(page, name)
        seen[name] = page_hands(page)
    context.close()
    for name, hands in seen.items():
        reference = mediapipe_hands(name, "lite", 0.3)
        figures[f"{name}:image:wasm:lite"] = {"hands": len(hands), "mediapipe_hands": len(reference),
                                             "gesture": hands[0]["gesture"] if hands else None}
        assert len(hands) == len(reference), name
        if hands:
            mean, _ = keypoint_error(hands[0], reference[0])
            figures[f"{name}:image:wasm:lite"]["mean_px"] = mean
            if name in LITE_UNRELIABLE:
                continue
            assert mean <= tolerance(reference[0]), (name, mean)
            assert hands[0]["gesture"] == HAND_GESTURES[name], name
    assert log.outside_requests == [] and log.console_errors == []


def test_settings_switch_model_size_and_max_hands(image_page):
    page, log = image_page
    upload(page, "up_3.jpg")
    before = frame(page)
    page.select_option("#variant-select", "lite")
    page.wait_for_selector("#model-status[data-state='ready'][data-variant='lite']", timeout=300_000)
    wait_frames(page, before + 1)   # the image is re-run on the new model
    assert page.get_attribute("#results", "data-variant") == "lite"
    assert [h["gesture"] for h in page_hands(page)] == ["thumbs_up"]
    page.select_option("#variant-select", "full")
    page.select_option("#max-hands", "1")
    page.wait_for_selector("#model-status[data-state='ready'][data-variant='full']", timeout=300_000)
    wait_frames(page, before + 3)
    assert page.get_attribute("#results", "data-variant") == "full"
    assert [h["gesture"] for h in page_hands(page)] == ["thumbs_up"]
    assert log.outside_requests == [] and log.console_errors == []


def test_webgl_once(browser, base_url, figures):
    """SwiftShader WebGL is slow here: one photo, once."""
    context, page, log = open_hands(browser, base_url, "backend=webgl&camera=0&score=0.3")
    assert page.get_attribute("body", "data-backend") == "webgl"
    upload(page, "up_3.jpg")
    hands = page_hands(page)
    context.close()
    assert len(hands) == 1
    mean, worst = keypoint_error(hands[0], mediapipe_hands("up_3.jpg", "full", 0.3)[0])
    figures["up_3.jpg:image:webgl:full"] = {"mean_px": mean, "max_px": worst, "gesture": hands[0]["gesture"]}
    assert mean <= KEYPOINT_TOLERANCE_PX
    assert hands[0]["gesture"] == "thumbs_up"
    assert log.outside_requests == [] and log.console_errors == []


# ---------------------------------------------------------------- fake camera (WASM)

RECORD = """() => {
  window.__frames = [];
  const results = document.getElementById('results');
  new MutationObserver(() => window.__frames.push({
    frame: +results.dataset.frame,
    gestures: Array.from(results.children).map((li) => li.dataset.gesture),
    badge: document.getElementById('gesture').dataset.gesture,
    tensors: +document.getElementById('hud').dataset.numTensors,
  })).observe(results, {attributes: true, attributeFilter: ['data-frame']});
}"""

# Column means of the displayed canvas' luminance: tells a mirrored preview from a plain one.
COLUMNS = """() => {
  const c = document.getElementById('view');
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  const cols = new Array(c.width).fill(0);
  for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) {
    const i = (y * c.width + x) * 4;
    cols[x] += (d[i] + d[i + 1] + d[i + 2]) / 3;
  }
  return cols.map((v) => v / c.height);
}"""


@pytest.fixture(scope="module")
def cameras(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hand-cams")
    return {name: write_y4m(folder / f"{name}.y4m", letterbox_rgb(photo_rgb(name))) for name in HAND_GESTURES}


LIVE_FRAMES = 60  # frames of the live tests: 40 after a warm-up show any per-frame leak


# The camera path once per gesture in make test (a browser launch each, ~13 s); every photo's
# gesture is also checked as an upload above, and all of them on the camera in make test-all.
CAMERA_EACH_GESTURE = ("up_3.jpg", "down_1.jpg", "none_2.jpg", "closed_fist_1.jpg", "pointing_up_1.jpg",
                       "victory_1.jpg")


@pytest.mark.parametrize("name", [name if name in CAMERA_EACH_GESTURE else pytest.param(name, marks=pytest.mark.slow)
                                  for name in HAND_GESTURES])
def test_photo_gesture_through_fake_camera(pw, base_url, cameras, figures, name):
    frames_wanted = LIVE_FRAMES if name == "up_3.jpg" else 25
    browser = launch(pw, fake_camera_flags(cameras[name]))
    try:
        context = browser.new_context()
        page, log = open_page(context, f"{base_url}/hands?backend=wasm")
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        page.evaluate(RECORD)
        wait_frames(page, frames_wanted, timeout=600_000)
        hands = page_hands(page)
        size = page.eval_on_selector("#results", "el => [+el.dataset.width, +el.dataset.height]")
        columns = np.array(page.evaluate(COLUMNS))
        recorded = page.evaluate("() => window.__frames")
        hud = page.get_attribute("#hud", "data-fps")
        shown = badge(page)
        if name == "up_3.jpg":
            screenshot(page, "hands_camera_up_3")
        context.close()
    finally:
        browser.close()

    assert size == [640, 480]
    frame_rgb = read_y4m_rgb(cameras[name])
    reference = mediapipe_on(frame_rgb, "full", 0.3)
    assert len(hands) == 1 == len(reference)
    mean, worst = keypoint_error(hands[0], reference[0])
    # Live frames after the first come from the tracked ROI, not a fresh palm detection.
    figures[f"{name}:camera:wasm:full"] = {"mean_px": mean, "max_px": worst, "frames": len(recorded),
                                          "fps": float(hud or 0), "gesture": hands[0]["gesture"]}
    assert mean <= tolerance(reference[0]), (mean, worst)
    assert hands[0]["handedness"] == SWAP[reference[0]["handedness"]]
    expected = HAND_GESTURES[name]
    assert_gesture_shown(hands[0], shown, expected)
    # Stable: from the 4th frame on (3 agreeing frames to show a gesture) every frame shows it.
    after = [r for r in recorded if r["frame"] >= 4]
    assert len(after) >= frames_wanted - 10
    assert all(r["gestures"] == [expected] and r["badge"] == expected for r in after), \
        [r for r in after if r["gestures"] != [expected]][:5]
    # The preview is mirrored (a selfie view): its columns match the flipped frame.
    luma = frame_rgb.mean(axis=2).mean(axis=0)
    mirrored, plain = np.corrcoef(columns, luma[::-1])[0, 1], np.corrcoef(columns, luma)[0, 1]
    assert mirrored > 0.9 and mirrored > plain, (mirrored, plain)
    if name == "up_3.jpg":
        tensors = [r["tensors"] for r in recorded if r["frame"] >= 10]
        figures["numTensors"] = {"frames": recorded[-1]["frame"], "min": min(tensors), "max": max(tensors)}
        assert recorded[-1]["frame"] >= LIVE_FRAMES
        assert min(tensors) == max(tensors), f"numTensors drifts: {min(tensors)}..{max(tensors)}"
    assert log.outside_requests == [] and log.console_errors == [] and log.failed_requests == []


def test_server_backend_gives_the_same_hands_as_the_browser(browser, base_url, figures):
    """The "Server" backend (POST /api/v1/hands): same gesture, keypoints within a pixel."""
    found = {}
    for backend in ("wasm", "server"):
        context, page, log = open_hands(browser, base_url, f"backend={backend}&camera=0&score=0.3")
        assert page.get_attribute("body", "data-backend") == backend
        for name in ("up_3.jpg", "down_3.jpg"):
            upload(page, name)
            found[backend, name] = page_hands(page)
        if backend == "server":
            screenshot(page, "hands_server_down_3")
        context.close()
        assert log.outside_requests == [] and log.console_errors == []
    for name in ("up_3.jpg", "down_3.jpg"):
        ours, theirs = found["wasm", name], found["server", name]
        assert len(ours) == len(theirs) == 1
        assert theirs[0]["gesture"] == ours[0]["gesture"] == HAND_GESTURES[name]
        assert theirs[0]["handedness"] == ours[0]["handedness"]
        gap = np.abs(np.subtract(ours[0]["keypoints"], theirs[0]["keypoints"])).max()
        figures[f"{name}:server-vs-wasm:max_px"] = float(gap)
        assert gap <= 1.0, gap


# ---------------------------------------------------------------- LiteRT.js (litert-wasm)
# The same pipeline (static/js/contract/hands.js) runs the palm and landmark .tflite files on
# LiteRT.js; TF.js (on WASM) only does the crops around them.

def test_litert_gives_the_wasm_hands_on_every_photo(browser, base_url, image_page, figures):
    """litert-wasm vs wasm through the image input: same hands, handedness and gestures, every
    keypoint within 1 px (the page rounds them to 0.1 px)."""
    wasm_page, _ = image_page
    context, page, log = open_hands(browser, base_url, "backend=litert-wasm&camera=0&score=0.3")
    assert page.get_attribute("body", "data-backend") == "litert-wasm"
    assert "litert-wasm" in page.inner_text("#status-line")
    assert page.evaluate("async () => (await import('/static/js/runtime/litert.js')).liteRtStats().models") == 2
    found = {}
    for name in [*HAND_GESTURES, "zidane.jpg"]:
        for backend, p in (("wasm", wasm_page), ("litert-wasm", page)):
            upload(p, name)
            found[backend, name] = page_hands(p)
    context.close()
    assert log.outside_requests == [] and log.console_errors == [] and log.failed_requests == []
    for name in [*HAND_GESTURES, "zidane.jpg"]:
        ours, theirs = found["litert-wasm", name], found["wasm", name]
        assert len(ours) == len(theirs) == 1, name
        gap = float(np.abs(np.subtract(ours[0]["keypoints"], theirs[0]["keypoints"])).max())
        figures[f"{name}:litert-vs-wasm:max_px"] = gap
        assert gap <= 1.0, (name, gap)
        assert ours[0]["gesture"] == theirs[0]["gesture"] == HAND_GESTURES.get(name, "none"), name
        assert ours[0]["handedness"] == theirs[0]["handedness"], name
        assert abs(ours[0]["score"] - theirs[0]["score"]) <= 1e-3, name


LITERT_LIVE_FRAMES = LIVE_FRAMES


def test_litert_live_memory_flat_and_across_a_backend_switch(pw, base_url, cameras, figures):
    """The fake camera (up_3.jpg) on litert-wasm: thumbs up every frame; LiteRT's live tensor
    count back to 0 after every frame, its two compiled models, a WASM heap that stops growing,
    and TF.js's tensor count flat, over LITERT_LIVE_FRAMES frames; then to wasm (LiteRT models
    freed) and back (two models again, heap no larger)."""
    browser = launch(pw, fake_camera_flags(cameras["up_3.jpg"]))
    try:
        context = browser.new_context()
        page, log = open_page(context, f"{base_url}/hands?backend=litert-wasm")
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        page.evaluate(RECORD_FRAMES)
        start = frame(page)
        wait_frames(page, start + LITERT_LIVE_FRAMES, timeout=600_000)
        fps = float(page.get_attribute("#hud", "data-fps") or 0)
        hands = page_hands(page)
        shown = badge(page)
        screenshot(page, "hands_litert_camera_up_3")
        page.select_option("#backend-select", "wasm")
        page.wait_for_function("() => document.body.dataset.backend === 'wasm'", timeout=300_000)
        wait_frames(page, frame(page) + 10)
        on_wasm = page.evaluate("async () => (await import('/static/js/runtime/litert.js')).liteRtStats()")
        page.select_option("#backend-select", "litert-wasm")
        page.wait_for_function("() => document.body.dataset.backend === 'litert-wasm'", timeout=300_000)
        wait_frames(page, frame(page) + 30)
        recorded = page.evaluate("() => window.__frames")
        context.close()
    finally:
        browser.close()
    assert log.outside_requests == [] and log.console_errors == [] and log.failed_requests == []
    reference = mediapipe_on(read_y4m_rgb(cameras["up_3.jpg"]), "full", 0.3)
    assert len(hands) == 1 == len(reference)
    mean, worst = keypoint_error(hands[0], reference[0])
    assert mean <= tolerance(reference[0]), (mean, worst)
    assert hands[0]["handedness"] == SWAP[reference[0]["handedness"]]
    assert_gesture_shown(hands[0], shown, "thumbs_up")

    first = [r for r in recorded if r["backend"] == "litert-wasm" and r["frame"] <= start + LITERT_LIVE_FRAMES]
    last = [r for r in recorded if r["backend"] == "litert-wasm" and r["frame"] > start + LITERT_LIVE_FRAMES + 10]
    settled = [r for r in first if r["frame"] >= start + 10]
    heap = [r["heapBytes"] for r in settled]
    figures["litert:live"] = {"frames": len(first), "fps": fps, "tensors": sorted({r["tensors"] for r in first}),
                              "models": sorted({r["models"] for r in first}), "heap_min": min(heap), "heap_max": max(heap),
                              "tf_tensors": sorted({r["tfTensors"] for r in settled}), "on_wasm": on_wasm,
                              "after_switch_back": last[-1] if last else None}
    assert len(first) >= LITERT_LIVE_FRAMES - 5
    assert all(r["gestures"] == ["thumbs_up"] for r in first if r["frame"] >= start + 4)
    assert {r["tensors"] for r in first} == {0} and {r["models"] for r in first} == {2}
    assert min(heap) == max(heap), f"LiteRT's WASM heap grows: {min(heap)}..{max(heap)}"
    assert len({r["tfTensors"] for r in settled}) == 1, "TF.js tensors drift around the LiteRT models"
    assert on_wasm["models"] == 0 and on_wasm["tensors"] == 0
    assert len(last) >= 10
    assert {r["tensors"] for r in last} == {0} and {r["models"] for r in last} == {2}
    assert max(r["heapBytes"] for r in last) <= max(heap), "switching backends grew LiteRT's heap"
