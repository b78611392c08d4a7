"""Headless Chromium: Debian's Chromium driven by Playwright (see shared docs "browser-testing"
for the flags). Every page is opened with a route that aborts any request not to 127.0.0.1 and
records it, so a test can assert that the app is truly offline."""
from __future__ import annotations

import base64
import json
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from harness.paths import ARTIFACTS

CHROMIUM = "/usr/bin/chromium"
# What Playwright starts: CHROMIUM at the priority a user's Chromium gets (see the script).
LAUNCHER = str(Path(__file__).with_name("chromium"))

FLAGS = [
    "--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--enable-unsafe-swiftshader",
    # WebGPU on SwiftShader's Vulkan (software): the WebGPU paths run in the tests (answers, not speed).
    "--enable-unsafe-webgpu",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


def fake_camera_flags(y4m: Path) -> list[str]:
    return ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-video-capture={y4m}"]


def launch(playwright, extra_args=()):
    return playwright.chromium.launch(executable_path=LAUNCHER, args=FLAGS + list(extra_args))


@dataclass
class PageLog:
    console_errors: list = field(default_factory=list)
    outside_requests: list = field(default_factory=list)
    failed_requests: list = field(default_factory=list)


def _is_local(url: str) -> bool:
    parsed = urlparse(url)
    if parsed.scheme in ("data", "blob"):
        return True
    return parsed.hostname in ("127.0.0.1", "localhost")


def open_page(context, url: str):
    """New page with offline guard and console capture; returns (page, log)."""
    log = PageLog()
    page = context.new_page()

    def guard(route):
        if _is_local(route.request.url):
            route.fallback()  # to a test's own context route, if any, else the network
        else:
            log.outside_requests.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    page.on("console", lambda msg: msg.type == "error" and log.console_errors.append(msg.text))
    page.on("pageerror", lambda exc: log.console_errors.append(str(exc)))
    page.on("requestfailed", lambda req: log.failed_requests.append(req.url))
    page.goto(url)
    return page, log


def open_ready(browser, url: str, timeout: float = 300_000):
    """A new context and page at ``url`` (open_page), once the page's model has loaded;
    (context, page, log)."""
    context = browser.new_context()
    page, log = open_page(context, url)
    page.wait_for_selector("#model-status[data-state='ready']", timeout=timeout)
    return context, page, log


MODEL_MESSAGE_DONE = "() => ['ok', 'error'].includes(document.getElementById('model-message').dataset.state)"


def give_model(page, path, timeout: float = 180_000) -> None:
    """Pick the file as the visitor's model (#model-file); wait for the page to take it and open it."""
    page.eval_on_selector("#model-message", "el => { el.dataset.state = ''; }")
    page.set_input_files("#model-file", str(path))
    page.wait_for_function(MODEL_MESSAGE_DONE, timeout=timeout)
    state, text = page.eval_on_selector("#model-message", "el => [el.dataset.state, el.textContent]")
    assert state == "ok", text
    page.wait_for_selector("#model-status[data-state='ready']", timeout=timeout)


def wait_frames(page, n: int, timeout: float = 300_000):
    """Until the page has shown n frames (its results' data-frame counter)."""
    # A function, not an expression: Playwright evals expressions, which our CSP forbids.
    page.wait_for_function("n => +(document.getElementById('results').dataset.frame || 0) >= n",
                           arg=n, timeout=timeout)


# The detect page's rows with a YOLO task's extras: class_id, score, box, polygons, keypoints, corners.
TASK_ROWS = """() => Array.from(document.querySelectorAll('#results li')).map(li => {
  const points = (s) => s.split(';').map((p) => p.split(',').map(Number));
  return {class_id: +li.dataset.classId, score: +li.dataset.score, box: li.dataset.box.split(',').map(Number),
          polygons: li.dataset.polygons ? li.dataset.polygons.split('|').map(points) : null,
          keypoints: li.dataset.keypoints ? points(li.dataset.keypoints) : null,
          corners: li.dataset.corners ? points(li.dataset.corners) : null};
})"""


def page_detections(page) -> list[dict]:
    """The detections the detect page lists: class_id, label, score, box (source pixels)."""
    return page.eval_on_selector_all(
        "#results li",
        "items => items.map(li => ({class_id: +li.dataset.classId, label: li.dataset.label,"
        " score: +li.dataset.score, box: li.dataset.box.split(',').map(Number)}))")


@contextmanager
def recorded_figures(name: str):
    """A dict a test module fills with measured figures, written to test-artifacts/<name> at the end."""
    data: dict = {}
    yield data
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / name).write_text(json.dumps(data, indent=1, sort_keys=True))


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def drop_files(page, selector: str, files: list[tuple[str, str, bytes]]):
    """Simulate dropping files (name, mime type, bytes) on an element."""
    payload = [{"name": n, "type": t, "b64": base64.b64encode(b).decode()} for n, t, b in files]
    page.evaluate(
        """([selector, files]) => {
            const dt = new DataTransfer();
            for (const f of files) {
              const bytes = Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0));
              dt.items.add(new File([bytes], f.name, {type: f.type}));
            }
            const target = document.querySelector(selector);
            target.dispatchEvent(new DragEvent('dragover', {dataTransfer: dt, bubbles: true, cancelable: true}));
            target.dispatchEvent(new DragEvent('drop', {dataTransfer: dt, bubbles: true, cancelable: true}));
        }""",
        [selector, payload],
    )


# After every frame a page shows (#results data-frame, between frames: nothing in flight):
# TF.js's tensor count, LiteRT's live tensors and compiled models, and the WASM heap they sit in.
RECORD_FRAMES = """async () => {
  const {liteRtStats} = await import('/static/js/runtime/litert.js');
  window.__frames = [];
  const results = document.getElementById('results');
  new MutationObserver(() => window.__frames.push({
    frame: +results.dataset.frame, backend: document.body.dataset.backend, tfTensors: tf.memory().numTensors,
    gestures: Array.from(results.children).map((li) => li.dataset.gesture), ...liteRtStats(),
  })).observe(results, {attributes: true, attributeFilter: ['data-frame']});
}"""
