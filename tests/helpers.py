"""What the tests and the benches share, in one place: paths, photos and image makers, the
installed models' manifests, the converter CLI and its clean-error check, Node runs of the
pages' own modules, the servers (werkzeug in a thread, gunicorn as in production) and
headless Chromium. Test modules import from here, never from each other; bench/ too.

Fixtures live in tests/conftest.py."""
from __future__ import annotations

import base64
import functools
import http.client
import io
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("DATARAILROAD_SHARED", ROOT.parent / "shared"))
YOLOV5N_WEIGHTS = SHARED / "models" / "yolov5n.pt"
HAND_FIXTURES = SHARED / "fixtures" / "hands"
GESTURE_FIXTURES = ROOT / "tests" / "fixtures" / "gestures"   # in the repo: see its README
ARTIFACTS = ROOT / "test-artifacts"
JS = ROOT / "static" / "js"


# ---------------------------------------------------------------------------- photos and images

def photo_file(name: str) -> Path:
    """bus.jpg / zidane.jpg (shipped in the ultralytics wheel), a gesture photo (in the repo)
    or a shared hand fixture; skips the test when a shared hand fixture is absent."""
    if name in ("bus.jpg", "zidane.jpg"):
        from converters.sources import photo_path

        return Path(photo_path(name))
    if (GESTURE_FIXTURES / name).is_file():
        return GESTURE_FIXTURES / name
    path = HAND_FIXTURES / name
    if not path.is_file():
        pytest.skip(f"hand fixture absent: {path}")
    return path


def photo_bytes(name: str) -> bytes:
    """A photo as stored (what an upload sends)."""
    return photo_file(name).read_bytes()


def photo_rgb(name: str) -> np.ndarray:
    """RGB uint8 as the browser decodes a photo (EXIF orientation applied)."""
    return rgb_like_browser(photo_file(name))


def rgb_like_browser(path: Path) -> np.ndarray:
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


# The hand photos and the gesture each shows: the shared fixtures, then the repo's.
HAND_GESTURES = {"up_1.jpg": "thumbs_up", "up_3.jpg": "thumbs_up", "down_1.jpg": "thumbs_down",
                 "down_3.jpg": "thumbs_down", "none_2.jpg": "open_palm",
                 **{p.name: p.stem.rsplit("_", 1)[0] for p in sorted(GESTURE_FIXTURES.glob("*.jpg"))}}


@functools.lru_cache(maxsize=None)
def mediapipe_hands(name: str, variant: str = "full", min_detection_confidence: float = 0.3) -> tuple:
    """MediaPipe's own Python solution (solutions.hands, static image mode) on a photo: per
    hand the model's handedness label, score, 21 image landmarks [x px, y px, z (x scale)]
    and 21 world landmarks."""
    return mediapipe_on(photo_rgb(name), variant, min_detection_confidence)


def mediapipe_on(image: np.ndarray, variant: str = "full", min_detection_confidence: float = 0.3) -> tuple:
    import mediapipe as mp

    image = np.ascontiguousarray(image)
    h, w = image.shape[:2]
    with mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=2,
                                  model_complexity=1 if variant == "full" else 0,
                                  min_detection_confidence=min_detection_confidence) as hands:
        result = hands.process(image)
    out = []
    for lm, world, handedness in zip(result.multi_hand_landmarks or [], result.multi_hand_world_landmarks or [],
                                     result.multi_handedness or []):
        out.append({"handedness": handedness.classification[0].label, "score": handedness.classification[0].score,
                    "image": np.array([[p.x * w, p.y * h, p.z * w] for p in lm.landmark]),
                    "world": np.array([[p.x, p.y, p.z] for p in world.landmark])})
    return tuple(out)


def decoded(data: bytes) -> np.ndarray:
    """RGB as the server decodes an upload."""
    from server.images import decode

    return decode(data, 10**9).rgb


def encode(rgb: np.ndarray, fmt: str = "PNG", **kwargs) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(buf, fmt, **kwargs)
    return buf.getvalue()


def png_bomb(width: int = 20000, height: int = 20000) -> bytes:
    """A valid 1-bit greyscale PNG of width x height zeros: a few tens of KB that would
    decode to width*height pixels (400 M for the default)."""
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte + packed bits
    comp = zlib.compressobj(9)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def letterbox_rgb(image, width: int = 640, height: int = 480, fill: int = 0):
    """Fit an RGB uint8 photo into width x height (centred, aspect kept), like a camera frame."""
    from PIL import Image

    h, w = image.shape[:2]
    scale = min(width / w, height / h)
    new_w, new_h = round(w * scale), round(h * scale)
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), Image.BILINEAR))
    canvas = np.full((height, width, 3), fill, np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[top:top + new_h, left:left + new_w] = resized
    return canvas


def write_y4m(path: Path, rgb, frames: int = 2, fps: int = 30) -> Path:
    """A YUV4MPEG2 (4:2:0, BT.601 studio range) file Chromium's fake camera plays in a loop:
    one RGB image ``frames`` times, or a clip [N, H, W, 3] frame by frame."""
    clip = np.asarray(rgb)
    clip = clip[None].repeat(frames, 0) if clip.ndim == 3 else clip
    h, w = clip.shape[1:3]
    assert h % 2 == 0 and w % 2 == 0, "4:2:0 needs even sizes"
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for image in clip:
            f.write(b"FRAME\n")
            for p in yuv420(image):
                f.write(p.tobytes())
    return Path(path)


def write_webm(path: Path, clip, fps: int) -> Path:
    """A clip [N, H, W, 3] (RGB uint8) as a VP8 WebM, which Chromium plays as a video file."""
    import cv2

    h, w = clip.shape[1:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"VP80"), fps, (w, h))
    assert writer.isOpened(), "this OpenCV cannot write VP8 WebM"
    for image in clip:
        writer.write(np.ascontiguousarray(image[..., ::-1]))
    writer.release()
    return Path(path)


def yuv420(rgb) -> list[np.ndarray]:
    """RGB uint8 -> the Y, U, V planes of 4:2:0 (chroma averaged over 2x2)."""
    rgb = np.asarray(rgb, dtype=np.float32)
    h, w = rgb.shape[:2]
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255

    def sub(plane):
        return plane.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))

    return [np.clip(np.round(p), 0, 255).astype(np.uint8) for p in (y, sub(u), sub(v))]


def read_y4m_rgb(path: Path):
    """First frame of a y4m written by write_y4m, back to RGB (what the camera shows)."""
    data = Path(path).read_bytes()
    header, rest = data.split(b"\n", 1)
    fields = {f[0:1]: f[1:] for f in header.split()[1:]}
    w, h = int(fields[b"W"]), int(fields[b"H"])
    frame = rest[len(b"FRAME\n"):]
    y = np.frombuffer(frame, np.uint8, w * h).reshape(h, w).astype(np.float32)
    u = np.frombuffer(frame, np.uint8, w * h // 4, w * h).reshape(h // 2, w // 2).astype(np.float32)
    v = np.frombuffer(frame, np.uint8, w * h // 4, w * h + w * h // 4).reshape(h // 2, w // 2).astype(np.float32)
    u = u.repeat(2, 0).repeat(2, 1) - 128
    v = v.repeat(2, 0).repeat(2, 1) - 128
    c = (y - 16) * 255 / 219
    r = c + 1.402 * 255 / 224 * v
    g = c - 0.344136 * 255 / 224 * u - 0.714136 * 255 / 224 * v
    b = c + 1.772 * 255 / 224 * u
    return np.clip(np.round(np.stack([r, g, b], -1)), 0, 255).astype(np.uint8)


# ---------------------------------------------------------------------------- installed models

def read_manifest(folder: Path) -> dict:
    return json.loads((Path(folder) / "manifest.json").read_text())


def edit_manifest(folder: Path, change) -> dict:
    """Apply ``change(manifest)`` in place and write it back."""
    data = read_manifest(folder)
    change(data)
    (Path(folder) / "manifest.json").write_text(json.dumps(data))
    return data


def install_copy(src: Path, models: Path, model_id: str, digests: bool = True) -> Path:
    """A copy of a built model under a new id, with files_sha256 (as the converters write it)
    or, with digests=False, without (an old manifest)."""
    from converters import manifest as manifest_io

    folder = models / model_id
    shutil.copytree(src, folder)

    def rename(m):
        m["id"] = model_id
        if digests:
            m["files_sha256"] = manifest_io.file_digests(folder)
        else:
            m.pop("files_sha256", None)

    edit_manifest(folder, rename)
    return folder


def truncate(path: Path) -> int:
    """Cut a .tflite to half its size: LiteRT segfaults on such a file (issue 11)."""
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return len(data) // 2


def assert_speed_measured(folder: Path, factor: float = 4) -> None:
    """The manifest's ``speed`` is this file's native LiteRT time in ms: within ``factor`` of
    the fastest of a few runs of it now (a constant, a unit slip or another file's figure
    fails; load between the two measurements does not), and no slower than its median."""
    from converters import tflite

    m = read_manifest(folder)
    speed = m["speed"]
    assert speed["runtime"] == "litert" and speed["threads"] == 2 and speed["runs"] >= 5
    assert 0 < speed["ms"] <= speed["median_ms"]
    zeros = [np.zeros(m["input"]["shape"], np.float32)]  # the one float32 input of a detector or classifier
    now = min(tflite.call_ms(folder / m["server"]["model"], zeros, threads=speed["threads"], runs=5))
    assert now / factor < speed["ms"] < now * factor, (speed, now)


def need(models: dict, model_id: str) -> Path:
    """The folder of a model the session could build, else skip."""
    if model_id not in models:
        pytest.skip(f"{model_id} is not built here (yolov5n needs {YOLOV5N_WEIGHTS})")
    return models[model_id]


# ---------------------------------------------------------------------------- converter CLI

def converter_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m converters ARGS` in a child process, output captured."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "converters", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def assert_clean_error(code: int, stderr: str, *needles: str) -> None:
    """The CLI's user-error shape: exit 2, an `error: ` line, a `  fix: ` line, no traceback,
    and each needle in the text."""
    assert code == 2, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("error: "), stderr[-2000:]
    assert any(line.startswith("  fix: ") for line in lines), stderr[-2000:]
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr[-2000:])


# ---------------------------------------------------------------------------- Node

def node() -> str:
    """The node binary, else skip."""
    found = shutil.which("node")
    if found is None:
        pytest.skip("node is not installed")
    return found


def js_url(path: Path) -> str:
    """A file as a quoted import specifier, to paste into a Node script."""
    return json.dumps(Path(path).as_uri())


# Prefix for scripts that use TF.js from this checkout's node_modules (CPU backend).
TFJS_PRELUDE = """
import {createRequire} from 'node:module';
const require = createRequire(%s);
const tf = require('@tensorflow/tfjs');
globalThis.tf = tf;
await tf.setBackend('cpu');
""" % json.dumps(str(ROOT) + "/")


def run_node(script: str, payload=None, timeout: float = 300):
    """Run an ES-module script in Node (cwd: the checkout) with ``payload`` as JSON on stdin;
    returns what it printed, parsed as JSON."""
    proc = subprocess.run([node(), "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True,
                          input=json.dumps(payload), timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


# static/js/detector.js's decode on given output tensors: {manifest, cases: [{outputs: [{data,
# shape}], transform: [sx, sy, ox, oy], width, height, options}]} -> [[detection]] per case.
DETECTOR_DECODE = TFJS_PRELUDE + """
const {decode} = await import(%s);
const {makeTransform} = await import(%s);
let text = '';
process.stdin.on('data', (d) => { text += d; });
process.stdin.on('end', async () => {
  const req = JSON.parse(text);
  const out = [];
  for (const c of req.cases) {
    const tensors = c.outputs.map((o) => tf.tensor(o.data, o.shape, 'float32'));
    const frame = {transform: makeTransform(...c.transform), width: c.width, height: c.height};
    out.push(await decode(req.manifest, tensors, frame, {classes: null, ...c.options}));
    tf.dispose(tensors);
  }
  process.stdout.write(JSON.stringify(out));
});
""" % (js_url(JS / "detector.js"), js_url(JS / "geometry.js"))


def detector_js_decode(manifest: dict, cases: list[dict]) -> list[list[dict]]:
    """What the detect page shows for each case: outputs (arrays in the manifest's tensor
    order), transform (a Transform), width, height, options ({score, iou, maxDet})."""
    payload = {"manifest": manifest, "cases": [
        {"outputs": [{"data": np.asarray(o, np.float32).ravel().tolist(), "shape": list(np.shape(o))}
                     for o in c["outputs"]],
         "transform": [c["transform"].scale_x, c["transform"].scale_y, c["transform"].offset_x,
                       c["transform"].offset_y],
         "width": c["width"], "height": c["height"], "options": c["options"]} for c in cases]}
    return run_node(DETECTOR_DECODE, payload)


# ---------------------------------------------------------------------------- servers

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_server(app):
    """Serve ``app`` on an ephemeral 127.0.0.1 port in a thread; yields the base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@contextmanager
def serving(models: Path):
    """The app on the models folder ``models`` (TESTING), served by live_server; yields the base URL."""
    from server import create_app

    with live_server(create_app({"MODELS_DIR": models, "TESTING": True})) as url:
        yield url


def proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name: [0] state, [1] ppid, [7] minflt,
    [11] utime, [12] stime (proc(5) numbers them from 3). OSError when the process is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()


def child_pids(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(proc_stat(int(entry.name))[1])
            except OSError:
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return sorted(found)


class Gunicorn:
    """The production server: gunicorn with gunicorn.conf.py serving ``server:create_app()`` on
    127.0.0.1 (a free port unless given), the models from ``models``; returns once /healthz
    answers 200 with every worker up. ``env`` is added to this process's environment, or is
    the whole environment with ``clean_env`` (a slim venv's gunicorn given as ``program``);
    ``log`` names a file under test-artifacts/ for gunicorn's output; ``ca``: it serves HTTPS
    (``env`` turns that on) with a certificate this CA file vouches for."""

    def __init__(self, models: Path, workers: int = 1, env: dict | None = None, port: int | None = None,
                 program: Path | None = None, clean_env: bool = False, log: str | None = None,
                 ca: Path | None = None, start_timeout: float = 60):
        self.port, self.ca = port or free_port(), ca
        # gunicorn's own output: to the named log, else to an unnamed temporary file (a pipe
        # nobody reads would fill and block the server), read back when it fails to start.
        self.log_path = ARTIFACTS / log if log else None
        if self.log_path:
            ARTIFACTS.mkdir(exist_ok=True)
        self.log = open(self.log_path, "w+") if self.log_path else tempfile.TemporaryFile("w+")
        base = {"PATH": os.environ["PATH"]} if clean_env else dict(os.environ)
        program = program or Path(sys.executable).parent / "gunicorn"
        self.proc = subprocess.Popen(
            [str(program), "-c", "gunicorn.conf.py", "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers),
             "--access-logfile", "/dev/null", "server:create_app()"],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**base, "DATARAILROAD_MODELS": str(models), **(env or {})}, start_new_session=True)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/healthz", timeout=5)[0] == 200 and len(self.workers()) == workers:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited at start: {self.stop()}")
            time.sleep(0.3)
        raise RuntimeError(f"gunicorn did not start: {self.stop()}")

    @property
    def url(self) -> str:
        return f"{'https' if self.ca else 'http'}://127.0.0.1:{self.port}"

    def client_context(self):
        import ssl

        return ssl.create_default_context(cafile=str(self.ca))

    def connection(self, host: str = "127.0.0.1", timeout: float = 60) -> http.client.HTTPConnection:
        if self.ca:
            return http.client.HTTPSConnection(host, self.port, context=self.client_context(), timeout=timeout)
        return http.client.HTTPConnection(host, self.port, timeout=timeout)

    def workers(self) -> list[int]:
        return child_pids(self.proc.pid)

    def request(self, method: str, path: str, body=None, headers=None, timeout: float = 60,
                conn: http.client.HTTPConnection | None = None, host: str = "127.0.0.1"):
        """(status, content type, body), to ``host`` (a name for 127.0.0.1 the certificate may
        or may not cover). On a given keep-alive ``conn``, a request the server closed while
        idle (DATARAILROAD_IDLE_TIMEOUT) is sent once more."""
        own = conn is None
        conn = conn or self.connection(host, timeout)
        try:
            for attempt in (0, 1):
                try:
                    conn.request(method, path, body=body, headers=headers or {})
                    response = conn.getresponse()
                    return response.status, response.getheader("Content-Type"), response.read()
                except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                    conn.close()
                    if own or attempt:
                        raise
        finally:
            if own:
                conn.close()

    def output_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-2000:]

    def stop(self) -> str:
        """Stop it; returns the end of its output."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: the workers too
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.log.closed:
            return ""
        tail = self.output_tail()
        self.log.close()
        return tail


def multipart(payload: bytes, fields: dict | None = None) -> tuple[bytes, str]:
    """A multipart/form-data body with ``payload`` as the image part; (body, content type)."""
    boundary = uuid.uuid4().hex
    parts = [f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode()
             for k, v in (fields or {}).items()]
    parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"x.jpg\"\r\n"
                 f"Content-Type: image/jpeg\r\n\r\n".encode() + payload + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


# ---------------------------------------------------------------------------- headless Chromium
# Debian's Chromium driven by Playwright (see shared docs "browser-testing" for the flags).
# Every page is opened with a route that aborts any request not to 127.0.0.1 and records it,
# so a test can assert that the app is truly offline.

CHROMIUM = "/usr/bin/chromium"

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
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS + list(extra_args))


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


def wait_frames(page, n: int, timeout: float = 300_000):
    """Until the page has shown n frames (its results' data-frame counter)."""
    # A function, not an expression: Playwright evals expressions, which our CSP forbids.
    page.wait_for_function("n => +(document.getElementById('results').dataset.frame || 0) >= n",
                           arg=n, timeout=timeout)


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
  const {liteRtStats} = await import('/static/js/litert.js');
  window.__frames = [];
  const results = document.getElementById('results');
  new MutationObserver(() => window.__frames.push({
    frame: +results.dataset.frame, backend: document.body.dataset.backend, tfTensors: tf.memory().numTensors,
    gestures: Array.from(results.children).map((li) => li.dataset.gesture), ...liteRtStats(),
  })).observe(results, {attributes: true, attributeFilter: ['data-frame']});
}"""
