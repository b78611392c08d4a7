"""The offline, installable app in headless Chromium: the web app manifest and service worker
(server/offline.py, templates/sw.js, static/js/runtime/offline.js).

After one online visit the network goes off — ``context.set_offline(True)`` for the page
*and* the app's server stopped: Playwright 1.55 does not take service workers offline
(only behind PW_EXPERIMENTAL_SERVICE_WORKER_NETWORK_EVENTS), so only a stopped server shows
that the worker answers from its cache. Each test serves the app on a fixed port of its own
(an origin keeps its worker and caches across a server restart)."""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import threading
import time

import pytest
from werkzeug.serving import make_server

from harness.browser import CHROMIUM, FLAGS, LAUNCHER, fake_camera_flags, launch, open_page, screenshot, wait_frames
from harness.clips import write_y4m
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import letterbox_rgb, photo_file, photo_rgb

browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")
needs_yolov5n = pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(), reason="shared yolov5n.pt is absent")

PORTS = {"installable": 8470, "detect": 8471, "server": 8472, "classify_hands": 8473, "rebuild": 8474,
         "cameras": 8475, "split_report": 8476}
READY = "#model-status[data-state='ready']"
# Every file /classify (lite0, TF.js) and /hands (full models, LiteRT.js) load: the worker
# caches them in the background after each response, so a test waits for all before going offline.
CLASSIFY_HANDS_FILES = ("/models/efficientnet-lite0/manifest.json",
                        "/models/efficientnet-lite0/tfjs/model.json?sha256=",
                        *(f"/models/efficientnet-lite0/tfjs/group1-shard{i}of5.bin?sha256=" for i in range(1, 6)),
                        "/models/handpose/manifest.json", "/models/handpose/tflite/palm_detection_full.tflite?sha256=",
                        "/models/handpose/tflite/hand_landmark_full.tflite?sha256=")

# Every entry of the app's caches: [[cache name, url], ...]
CACHE_ENTRIES = """async () => {
  const out = [];
  for (const name of await caches.keys()) {
    for (const request of await (await caches.open(name)).keys()) out.push([name, request.url]);
  }
  return out;
}"""
CACHED_BYTES = """async ([name, url]) => {
  const response = await (await caches.open(name)).match(url);
  return response ? (await response.arrayBuffer()).byteLength : -1;
}"""


class AppServer:
    """The app on 127.0.0.1:<port>, stoppable and restartable; records the paths it served."""

    def __init__(self, config: dict, port: int):
        self.config, self.port, self.paths = config, port, []
        self.url = f"http://127.0.0.1:{port}"
        self._server = None

    def start(self, **overrides):
        from server import create_app

        app = create_app({**self.config, "TESTING": True, **overrides})

        def recording(environ, start_response):
            self.paths.append(environ["PATH_INFO"])
            return app(environ, start_response)

        self._server = make_server("127.0.0.1", self.port, recording, threaded=True)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        if self._server:
            self._server.shutdown()
            self._server.server_close()
            self._thread.join(timeout=5)
            self._server = None


@pytest.fixture
def serve():
    started = []

    def start(name: str, **config) -> AppServer:
        server = AppServer(config, PORTS[name]).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def cache_entries(page) -> list[tuple[str, str]]:
    return [tuple(e) for e in page.evaluate(CACHE_ENTRIES)]


def wait_cached(page, *parts: str, timeout: float = 120):
    """Until every ``part`` (a path, maybe with its ?sha256=) is in some cache entry's URL."""
    deadline = time.monotonic() + timeout
    while True:
        urls = [url for _, url in cache_entries(page)]
        missing = [p for p in parts if not any(p in url for url in urls)]
        if not missing:
            return urls
        assert time.monotonic() < deadline, f"never cached: {missing}"
        time.sleep(0.5)


def wait_worker_active(page):
    page.wait_for_function("() => navigator.serviceWorker.ready.then((r) => !!r.active)", timeout=60_000)


def go_offline(context, server: AppServer):
    context.set_offline(True)
    server.stop()


def detections(page):
    return page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.label)")


def upload_and_wait(page, path, width):
    page.set_input_files("#image-file", str(path))
    page.wait_for_function("w => +document.getElementById('results').dataset.width === w", arg=width,
                           timeout=120_000)


def unexpected_errors(log) -> list[str]:
    """Console errors but the network failures of going offline (the API, the worker update)."""
    return [e for e in log.console_errors if "ERR_INTERNET_DISCONNECTED" not in e
            and "Failed to load resource" not in e and "sw.js" not in e]


# ------------------------------------------------------------------------- routes (no browser)

def test_worker_script_and_web_app_manifest_routes(tmp_path):
    from server import create_app, offline

    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    worker = client.get("/sw.js")
    body = worker.get_data(as_text=True)
    precache = json.loads(re.search(r"const PRECACHE = (\[.*?\]);", body).group(1))
    manifest = client.get("/app.webmanifest")
    data = manifest.get_json(force=True)
    pinned = create_app({"MODELS_DIR": tmp_path, "APP_BUILD": "deploy-7"}).test_client().get("/sw.js")

    assert worker.status_code == 200 and worker.mimetype == "text/javascript"
    assert worker.headers["Cache-Control"] == "no-cache"   # update checks always see the deploy's worker
    assert f'const BUILD = "{offline.compute_build_id()}";' in body
    assert 'const BUILD = "deploy-7";' in pinned.get_data(as_text=True)
    assert {"/", "/detect", "/classify", "/hands", "/static/js/runtime/offline.js", "/static/css/app.css",
            "/vendor/tfjs/tf.es2017.min.js", "/vendor/tfjs-wasm/tfjs-backend-wasm-simd.wasm",
            "/vendor/litertjs/core/index.js", "/vendor/litertjs/wasm/litert_wasm_threaded_internal.js"} <= set(precache)
    assert not [u for u in precache if "mediapipe" in u or (u.startswith("/vendor/litertjs/") and u.endswith(".wasm"))]
    assert manifest.mimetype == "application/manifest+json"
    assert data["start_url"] == "/" and data["scope"] == "/" and data["display"] == "standalone"
    assert all(client.get(icon["src"]).status_code == 200 for icon in data["icons"])


def test_build_id_follows_the_served_files(tmp_path, monkeypatch):
    from server import offline

    for folder in ("static", "templates"):
        shutil.copytree(offline.ROOT / folder, tmp_path / folder)
    monkeypatch.setattr(offline, "ROOT", tmp_path)
    first = offline.compute_build_id()
    assert offline.compute_build_id() == first
    (tmp_path / "static" / "css" / "app.css").write_text("body { color: red }")
    assert offline.compute_build_id() != first


# ------------------------------------------------------------------------------ in Chromium

@browser_only
def test_installable_manifest_and_worker(pw, serve, tmp_path):
    server = serve("installable", MODELS_DIR=tmp_path / "no-models")
    # A profile on disk: Chromium never offers to install from an incognito context.
    context = pw.chromium.launch_persistent_context(tmp_path / "profile", executable_path=LAUNCHER, args=FLAGS)
    page, log = open_page(context, server.url + "/")
    wait_worker_active(page)
    cdp = context.new_cdp_session(page)
    manifest = cdp.send("Page.getAppManifest")
    installability = cdp.send("Page.getInstallabilityErrors")
    scope = page.evaluate("() => navigator.serviceWorker.ready.then((r) => r.scope)")
    names = sorted({name for name, _ in cache_entries(page)})
    urls = {url.removeprefix(server.url) for _, url in cache_entries(page)}
    context.close()

    assert manifest["url"].endswith("/app.webmanifest") and manifest["errors"] == [], manifest
    parsed = json.loads(manifest["data"])
    assert parsed["start_url"] == "/" and parsed["display"] == "standalone"
    assert installability["installabilityErrors"] == [], installability
    assert scope == server.url + "/"
    assert len(names) == 1 and names[0].startswith("datarailroad-app-"), names
    # Precached at install: the pages, the app's JS, the TF.js and LiteRT runtimes; of the
    # three 9 MB LiteRT .wasm builds only the one this browser ran (the index page probes it).
    assert {"/", "/detect", "/classify", "/hands", "/static/js/pages/detect.js",
            "/vendor/tfjs/tf.es2017.min.js", "/vendor/litertjs/core/index.js"} <= urls, urls
    assert len([u for u in urls if u.startswith("/vendor/litertjs/") and u.endswith(".wasm")]) <= 1, urls
    assert log.console_errors == [] and log.outside_requests == [] and log.failed_requests == []


@browser_only
@needs_yolov5n
def test_detect_runs_offline_on_camera_and_image_after_one_visit(camera_browser, serve, built_model):
    built_model("efficientnet-lite0")   # installed, never visited: /classify's model was not kept
    server = serve("detect", MODELS_DIR=built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)).parent)
    context = camera_browser.new_context()
    url = f"{server.url}/detect?model=yolov5n&backend=litert-wasm"
    page, log = open_page(context, url)
    page.wait_for_selector(READY, timeout=300_000)
    # The first visit was not controlled by the worker: it reports what it fetched.
    wait_cached(page, "/models/yolov5n/manifest.json", "/models/yolov5n/model.tflite?sha256=",
                "/vendor/litertjs/wasm/litert_wasm_threaded_internal.wasm")

    go_offline(context, server)
    page.reload()
    page.wait_for_selector(READY, timeout=300_000)
    wait_frames(page, 2, timeout=120_000)
    camera = detections(page)
    state = page.evaluate("""() => ({isolated: crossOriginIsolated, online: navigator.onLine,
        controlled: !!navigator.serviceWorker.controller, backend: document.body.dataset.backend,
        server: document.querySelector('#backend-select option[value=server]').textContent})""")
    upload_and_wait(page, photo_file("zidane.jpg"), 1280)
    image = detections(page)
    screenshot(page, "offline_detect_zidane")
    errors = unexpected_errors(log)
    # A page never visited opens (precached), and says its model was never kept.
    page.goto(f"{server.url}/classify?backend=wasm")
    page.wait_for_selector("#model-status[data-state='error']", timeout=60_000)
    not_kept = page.inner_text("#status-line")
    context.close()

    assert state == {"isolated": True, "online": False, "controlled": True, "backend": "litert-wasm",
                     "server": "Server (unreachable)"}, state
    assert camera.count("bus") >= 1 and camera.count("person") >= 3, camera
    assert image.count("person") == 2, image
    assert "not in this browser's offline copy: open this page once while online" in not_kept, not_kept
    assert log.outside_requests == [] and errors == [], errors


@browser_only
@needs_yolov5n
def test_server_backend_says_it_is_unreachable_offline(browser, serve, built_model):
    server = serve("server", MODELS_DIR=built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)).parent)
    context = browser.new_context()
    page, log = open_page(context, f"{server.url}/detect?model=yolov5n&backend=server&camera=0")
    page.wait_for_selector(READY, timeout=300_000)
    upload_and_wait(page, photo_file("zidane.jpg"), 1280)   # online: the API answers
    online = detections(page)
    go_offline(context, server)
    page.set_input_files("#image-file", str(photo_file("bus.jpg")))
    page.wait_for_selector("#camera-message:not([hidden])", timeout=60_000)
    message = page.inner_text("#camera-message")
    entries = cache_entries(page)
    context.close()

    assert online.count("person") == 2
    assert "server cannot be reached" in message and "offline" in message, message
    assert "TypeError" not in message and "Failed to fetch" not in message
    assert not any("/api/" in url for _, url in entries), entries


def _classify_top5(page, path=None):
    """The top-5 labels of the card for the photo at ``path``, or of a camera snapshot."""
    before = int(page.evaluate("() => +(document.getElementById('cards').dataset.done || 0)"))
    if path is None:
        page.click("#camera-button")
    else:
        page.set_input_files("#image-files", str(path))
    page.wait_for_function("n => +(document.getElementById('cards').dataset.done || 0) > n", arg=before,
                           timeout=120_000)
    return page.eval_on_selector_all(".result-card:last-child .top5 li", "items => items.map(li => li.dataset.label)")


def _hand(page, path):
    before = int(page.evaluate("() => +(document.getElementById('results').dataset.frame || 0)"))
    page.set_input_files("#image-file", str(path))
    wait_frames(page, before + 1, timeout=120_000)
    return page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.gesture)")


@browser_only
def test_classify_and_hands_offline_and_the_index_cache_panel(browser, serve, built_model):
    lite0 = built_model("efficientnet-lite0")
    built_model("handpose")
    server = serve("classify_hands", MODELS_DIR=lite0.parent)
    context = browser.new_context()
    # /classify on TF.js WASM (its graph and shards), /hands on LiteRT.js (its .tflite files).
    page, log = open_page(context, f"{server.url}/classify?model=efficientnet-lite0&backend=wasm")
    page.wait_for_selector(READY, timeout=300_000)
    online_top5 = _classify_top5(page, photo_file("bus.jpg"))
    # The second page is controlled by the worker already: it caches what passes through it.
    page.goto(f"{server.url}/hands?backend=litert-wasm&camera=0")
    page.wait_for_selector(READY, timeout=300_000)
    online_gesture = _hand(page, photo_file("up_3.jpg"))
    wait_cached(page, *CLASSIFY_HANDS_FILES)

    go_offline(context, server)
    page.goto(f"{server.url}/classify?model=efficientnet-lite0&backend=wasm")
    page.wait_for_selector(READY, timeout=300_000)
    offline_top5 = _classify_top5(page, photo_file("bus.jpg"))
    page.goto(f"{server.url}/hands?backend=litert-wasm&camera=0")
    page.wait_for_selector(READY, timeout=300_000)
    offline_gesture = _hand(page, photo_file("up_3.jpg"))

    page.goto(f"{server.url}/")
    page.wait_for_selector("#cache-summary[data-entries]:not([data-entries='0'])", timeout=60_000)
    rows = page.eval_on_selector_all(
        "#cache-table tbody tr", "rows => rows.map(r => [r.dataset.group, +r.dataset.files, +r.dataset.bytes])")
    summary = page.inner_text("#cache-summary")
    page.wait_for_selector("#backend-table tbody tr[data-backend='litert-wasm']", timeout=60_000)
    litert_note = page.inner_text("#backend-table tbody tr[data-backend='litert-wasm'] td:nth-child(3)")
    total = int(page.get_attribute("#cache-summary", "data-bytes"))
    screenshot(page, "offline_index_cache_panel")
    page.click("#cache-clear")
    page.wait_for_selector("#cache-summary[data-entries='0']", timeout=60_000)
    after_clear = cache_entries(page)
    context.close()

    print("offline cache:", rows, "total bytes", total)
    assert len(online_top5) == 5 and offline_top5 == online_top5, (online_top5, offline_top5)
    assert online_gesture == ["thumbs_up"] and offline_gesture == online_gesture
    groups = {g: (files, size) for g, files, size in rows}
    manifest = json.loads((lite0 / "manifest.json").read_text())
    graph = {name: size for name, size in manifest["files"].items() if name.startswith("tfjs/")}
    assert groups["model efficientnet-lite0"][0] == len(graph) + 1, groups   # + its manifest
    assert groups["model efficientnet-lite0"][1] >= sum(graph.values()), groups
    assert "model handpose" in groups and "pages" in groups and "runtimes (TF.js, LiteRT.js)" in groups
    assert total == sum(size for _, size in groups.values()) and f"{total / 1048576:.1f} MB" in summary, summary
    assert after_clear == []
    # Kept pages keep their COOP/COEP headers: cross-origin isolated, so LiteRT runs threaded.
    assert litert_note.startswith("threads"), litert_note
    assert log.outside_requests == [] and unexpected_errors(log) == [], log.console_errors


@browser_only
def test_a_first_visit_reported_in_two_messages_is_cached_whole(browser, serve, built_model):
    # A first visit's page reports what it fetched as its resource entries arrive: the model's
    # manifest in one message, a shard fetched right after it in the next. The shard is stored
    # under the version the manifest gives, so the second message must wait for the first.
    lite0 = built_model("efficientnet-lite0")
    server = serve("split_report", MODELS_DIR=lite0.parent)
    context = browser.new_context()
    page, log = open_page(context, server.url + "/")
    wait_worker_active(page)
    shards = [f"/models/efficientnet-lite0/tfjs/group1-shard{i}of5.bin" for i in range(1, 6)]
    page.evaluate("""async (shards) => {
      const worker = (await navigator.serviceWorker.ready).active;
      worker.postMessage({type: 'cache-used', urls: ['/models/efficientnet-lite0/manifest.json']});
      for (const shard of shards) worker.postMessage({type: 'cache-used', urls: [shard]});
    }""", shards)
    urls = wait_cached(page, *(f"{s}?sha256=" for s in shards), timeout=60)
    context.close()

    digests = json.loads((lite0 / "manifest.json").read_text())["files_sha256"]
    for shard in shards:
        version = digests[shard.removeprefix("/models/efficientnet-lite0/")]
        assert any(url.endswith(f"{shard}?sha256={version}") for url in urls), (shard, urls)
    assert log.outside_requests == [] and unexpected_errors(log) == [], log.console_errors


def _live_gestures(page):
    """The gestures /hands shows on its live camera, a few frames on."""
    shown = int(page.evaluate("() => +(document.getElementById('results').dataset.frame || 0)"))
    wait_frames(page, shown + 3, timeout=120_000)
    return page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.gesture)")


@browser_only
def test_classify_and_hands_cameras_run_offline(pw, serve, built_model, tmp_path):
    """The camera path with the network off too: after one online visit, a /classify camera
    snapshot and the live /hands camera (a thumbs-up photo as the fake camera) give what they
    gave online, with the server stopped; a class (Teach, on the live /classify camera) and a
    gesture of yours recorded online are still there and still recognised (IndexedDB)."""
    lite0 = built_model("efficientnet-lite0")
    built_model("handpose")
    camera = write_y4m(tmp_path / "up_3.y4m", letterbox_rgb(photo_rgb("up_3.jpg")))
    browser = launch(pw, fake_camera_flags(camera))
    try:
        server = serve("cameras", MODELS_DIR=lite0.parent)
        context = browser.new_context()
        page, log = open_page(context, f"{server.url}/classify?model=efficientnet-lite0&backend=wasm")
        page.wait_for_selector(READY, timeout=300_000)
        online_top5 = _classify_top5(page)
        page.click("#live-button")
        page.fill("#custom-name", "thumb")
        page.click("#custom-record")
        # recorded from live frames: slow while the other worker builds a model
        page.wait_for_selector("#custom-list li[data-name='thumb']", timeout=180_000)
        page.goto(f"{server.url}/hands?backend=litert-wasm")
        page.wait_for_selector(READY, timeout=300_000)
        online_gestures = _live_gestures(page)
        page.fill("#custom-name", "like")
        page.click("#custom-record")
        # recorded from live frames: slow while the other worker builds a model
        page.wait_for_selector("#custom-list li[data-name='like']", timeout=180_000)
        wait_cached(page, *CLASSIFY_HANDS_FILES)

        go_offline(context, server)
        page.goto(f"{server.url}/classify?model=efficientnet-lite0&backend=wasm")
        page.wait_for_selector(READY, timeout=300_000)
        offline_top5 = _classify_top5(page)
        page.click("#live-button")
        page.wait_for_function("() => document.getElementById('live-custom').dataset.custom === 'thumb'",
                               timeout=120_000)
        page.goto(f"{server.url}/hands?backend=litert-wasm")
        page.wait_for_selector(READY, timeout=300_000)
        offline_gestures = _live_gestures(page)
        offline_yours = page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.custom)")
        online = page.evaluate("() => navigator.onLine")
        screenshot(page, "offline_hands_camera")
        context.close()
    finally:
        browser.close()

    assert online is False
    assert len(online_top5) == 5 and offline_top5 == online_top5, (online_top5, offline_top5)
    assert online_gestures == ["thumbs_up"] and offline_gestures == online_gestures, (online_gestures,
                                                                                      offline_gestures)
    assert offline_yours == ["like"]
    assert log.outside_requests == [] and unexpected_errors(log) == [], log.console_errors


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _rebuild(folder, extra: bytes):
    """What a rebuild does to the manifest: new bytes of model.tflite, its size and sha256.
    (Trailing bytes after a .tflite flatbuffer leave the model as it was.)"""
    tflite = folder / "model.tflite"
    tflite.write_bytes(tflite.read_bytes() + extra)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["model.tflite"] = tflite.stat().st_size
    manifest["litert"]["model"]["bytes"] = tflite.stat().st_size
    manifest.setdefault("files_sha256", {name: _sha256(folder / name) for name in manifest["files"]})
    manifest["files_sha256"]["model.tflite"] = _sha256(tflite)
    manifest["created"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest["files_sha256"]["model.tflite"], tflite.stat().st_size


@browser_only
@needs_yolov5n
def test_rebuilt_model_and_new_deploy_replace_the_cached_ones(browser, serve, built_model, tmp_path):
    models = tmp_path / "models"
    shutil.copytree(built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)), models / "yolov5n")
    old_sha, _ = _rebuild(models / "yolov5n", b"")   # records files_sha256 if the build predates it
    server = serve("rebuild", MODELS_DIR=models, APP_BUILD="build-1")
    context = browser.new_context()
    url = f"{server.url}/detect?model=yolov5n&backend=litert-wasm&camera=0"
    page, log = open_page(context, url)
    page.wait_for_selector(READY, timeout=300_000)
    wait_cached(page, f"/models/yolov5n/model.tflite?sha256={old_sha}")

    new_sha, new_size = _rebuild(models / "yolov5n", b"\0" * 1024)
    served_before = server.paths.count("/models/yolov5n/model.tflite")
    page.goto(url)
    page.wait_for_selector(READY, timeout=300_000)
    backend = page.get_attribute("body", "data-backend")
    urls = wait_cached(page, f"/models/yolov5n/model.tflite?sha256={new_sha}")
    key = next(u for u in urls if new_sha in u)
    cached_size = page.evaluate(CACHED_BYTES, ["datarailroad-models", key])
    fetched_again = server.paths.count("/models/yolov5n/model.tflite") - served_before

    # A new deploy (another build id): the next visit installs its worker, which replaces the
    # app cache and keeps the models (they have their own versions).
    server.stop()
    server.start(APP_BUILD="build-2")
    page.goto(f"{server.url}/")
    deadline = time.monotonic() + 60
    while {n for n, _ in cache_entries(page)} != {"datarailroad-app-build-2", "datarailroad-models"}:
        assert time.monotonic() < deadline, {n for n, _ in cache_entries(page)}
        time.sleep(0.5)
    new_build = {url.removeprefix(server.url) for n, url in cache_entries(page) if n == "datarailroad-app-build-2"}
    context.close()

    assert backend == "litert-wasm"   # the rebuilt file compiled: no fallback to TF.js
    assert fetched_again >= 1 and cached_size == new_size
    assert not any(old_sha in u for u in urls), urls
    # The LiteRT build the first visit used (not precached: 9 MB) came along to the new build.
    assert "/vendor/litertjs/wasm/litert_wasm_threaded_internal.wasm" in new_build, new_build
    assert log.outside_requests == [] and log.console_errors == [], log.console_errors
