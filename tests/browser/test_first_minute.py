"""A visitor's first minute: a photo picked (or the camera started) while the model is still
loading, or while it is switching, waits for it and runs once it is ready, on /detect,
/classify and /hands. The model's files are held back by a route until the test lets them
go, so "before the model is ready" is certain, not a race."""
from __future__ import annotations

import os
import threading

import pytest

from harness.browser import CHROMIUM, drop_files, open_page, page_detections, wait_frames
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import photo_file
from harness.servers import serving

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")

WAITING = "runs as soon as the model is ready"


class HeldModels:
    """Holds every request for a model's files (/models/...) until release(); routing also
    turns Chromium's HTTP cache off, so a reopen fetches again and is held too."""

    def __init__(self, context):
        self.routes: list = []
        self.holding = threading.Event()
        self.holding.set()
        context.route("**/models/**", self._take)

    def _take(self, route):
        if self.holding.is_set():
            self.routes.append(route)
        else:
            route.continue_()

    def hold(self):
        self.holding.set()

    def release(self):
        self.holding.clear()
        held, self.routes = self.routes, []
        for route in held:
            route.continue_()


def status(page) -> tuple[str, str]:
    return page.eval_on_selector("#model-status", "el => [el.dataset.state || '', "
                                 "document.getElementById('status-line').textContent]")


def message(page) -> str:
    return page.eval_on_selector("#camera-message", "el => el.hidden ? '' : el.textContent")


def frames_shown(page) -> int:
    return page.evaluate("() => +(document.getElementById('results').dataset.frame || 0)")


def wait_held(page, held: HeldModels):
    """Until the page has asked for a model file (and so is loading, not ready)."""
    for _ in range(600):
        if held.routes:
            return
        page.wait_for_timeout(100)
    raise AssertionError("the page never asked for its model")


@pytest.fixture(scope="module")
def base_url(built_model):
    built = [built_model("efficientnet-lite0"), built_model("handpose")]
    if YOLOV5N_WEIGHTS.is_file():
        built.append(built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)))
    with serving(built[0].parent) as url:
        yield url


def open_held(browser, url):
    context = browser.new_context()
    held = HeldModels(context)
    page, log = open_page(context, url)
    return context, held, page, log


# ---------------------------------------------------------------- /detect

needs_yolo = pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent")


@needs_yolo
def test_detect_photo_picked_while_loading_runs_once_ready(browser, base_url):
    context, held, page, log = open_held(browser, f"{base_url}/detect?model=yolov5n&backend=wasm&camera=0")
    # At once, as an impatient visitor: the model's files have not even arrived.
    page.set_input_files("#image-file", str(photo_file("zidane.jpg")))
    wait_held(page, held)
    page.wait_for_function("w => document.getElementById('camera-message').textContent.includes(w)", arg=WAITING)
    assert status(page)[0] != "ready"
    assert "zidane.jpg" in message(page)
    assert frames_shown(page) == 0

    held.release()
    wait_frames(page, 1, timeout=180_000)
    found = page_detections(page)
    shown = message(page)
    context.close()
    assert [d["label"] for d in found].count("person") == 2, found
    assert shown == "", shown   # the waiting note is gone once it ran
    assert log.console_errors == [] and log.outside_requests == []


@needs_yolo
def test_detect_newer_pick_replaces_the_waiting_one(browser, base_url):
    context, held, page, log = open_held(browser, f"{base_url}/detect?model=yolov5n&backend=wasm&camera=0")
    page.set_input_files("#image-file", str(photo_file("zidane.jpg")))
    wait_held(page, held)
    drop_files(page, "#stage", [("bus.jpg", "image/jpeg", photo_file("bus.jpg").read_bytes())])
    page.wait_for_function("() => document.getElementById('camera-message').textContent.includes('bus.jpg')")

    held.release()
    wait_frames(page, 1, timeout=180_000)
    page.wait_for_timeout(1500)   # a second run (the replaced pick) would show by now
    size = page.eval_on_selector("#results", "el => [+el.dataset.width, +el.dataset.height, +el.dataset.frame]")
    labels = [d["label"] for d in page_detections(page)]
    context.close()
    assert size == [810, 1080, 1], size   # bus.jpg, run once; zidane.jpg (1280x720) never ran
    assert "bus" in labels
    assert log.console_errors == []


@needs_yolo
def test_detect_camera_started_while_loading_runs_once_ready(camera_browser, base_url):
    context, held, page, log = open_held(camera_browser, f"{base_url}/detect?model=yolov5n&backend=wasm")
    wait_held(page, held)
    page.wait_for_function("w => document.getElementById('camera-message').textContent.includes(w)", arg=WAITING)
    assert frames_shown(page) == 0

    held.release()
    wait_frames(page, 2, timeout=180_000)
    labels = [d["label"] for d in page_detections(page)]
    context.close()
    assert "bus" in labels and labels.count("person") >= 3, labels
    assert log.console_errors == []


@needs_yolo
def test_detect_photo_picked_during_a_switch_runs_on_the_new_backend(browser, base_url):
    context, held, page, log = open_held(browser, f"{base_url}/detect?model=yolov5n&backend=wasm&camera=0")
    held.release()
    page.wait_for_selector("#model-status[data-state='ready']", timeout=180_000)
    held.hold()
    page.select_option("#backend-select", "litert-wasm")
    wait_held(page, held)
    page.set_input_files("#image-file", str(photo_file("zidane.jpg")))
    page.wait_for_function("w => document.getElementById('camera-message').textContent.includes(w)", arg=WAITING)
    assert frames_shown(page) == 0

    held.release()
    wait_frames(page, 1, timeout=300_000)
    backend = page.evaluate("() => document.body.dataset.backend")
    labels = [d["label"] for d in page_detections(page)]
    context.close()
    assert backend == "litert-wasm"
    assert labels.count("person") == 2, labels
    assert log.console_errors == []


# ---------------------------------------------------------------- /classify

def cards(page) -> list[dict]:
    return page.eval_on_selector_all(
        ".result-card", "cs => cs.map(c => ({state: c.dataset.state, text: c.querySelector('.body').textContent,"
        " top: Array.from(c.querySelectorAll('.top5 li')).map(li => li.dataset.label)}))")


def test_classify_photos_picked_while_loading_run_once_ready(browser, base_url):
    context, held, page, log = open_held(browser, f"{base_url}/classify?model=efficientnet-lite0&backend=wasm")
    page.set_input_files("#image-files", [str(photo_file("bus.jpg")), str(photo_file("zidane.jpg"))])
    wait_held(page, held)
    waiting = cards(page)
    assert len(waiting) == 2 and all(c["state"] == "pending" for c in waiting), waiting
    assert "Waiting for the model" in waiting[-1]["text"]

    held.release()
    page.wait_for_function("() => +(document.getElementById('cards').dataset.done || 0) >= 2", timeout=180_000)
    done = cards(page)
    context.close()
    assert [c["state"] for c in done] == ["done", "done"], done
    bus = done[-1]["top"]   # the newest card is first: bus.jpg was picked first
    assert {"school bus", "minibus", "trolleybus", "passenger car"} & set(bus[:3]), bus
    assert log.console_errors == []


def test_classify_live_started_while_loading_runs_once_ready(camera_browser, base_url):
    context, held, page, log = open_held(camera_browser, f"{base_url}/classify?model=efficientnet-lite0&backend=wasm")
    page.click("#live-button")
    wait_held(page, held)
    page.wait_for_function("w => document.getElementById('live-ms').textContent.includes(w)", arg=WAITING)

    held.release()
    page.wait_for_function("() => +(document.getElementById('live-top5').dataset.frames || 0) >= 2", timeout=180_000)
    top = page.eval_on_selector_all("#live-top5 li", "items => items.map(li => li.dataset.label)")
    context.close()
    assert len(top) == 5
    assert log.console_errors == []


# ---------------------------------------------------------------- /hands

def test_hands_photo_picked_while_loading_runs_once_ready(browser, base_url):
    context, held, page, log = open_held(browser, f"{base_url}/hands?backend=wasm&camera=0&score=0.3")
    page.set_input_files("#image-file", str(photo_file("up_3.jpg")))
    wait_held(page, held)
    page.wait_for_function("w => document.getElementById('camera-message').textContent.includes(w)", arg=WAITING)
    assert frames_shown(page) == 0

    held.release()
    wait_frames(page, 1, timeout=180_000)
    gesture = page.eval_on_selector("#gesture", "el => el.dataset.gesture")
    image = page.get_attribute("#results", "data-image")
    context.close()
    assert image == "up_3.jpg"
    assert gesture == "thumbs_up"
    assert log.console_errors == []
