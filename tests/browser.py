"""Headless Chromium (Debian's) driven by Playwright, plus a live app server on 127.0.0.1.

Used by the browser tests; see shared docs "browser-testing" for the flags. Every page is
opened with a route that aborts any request not to 127.0.0.1 and records it, so a test
can assert that the app is truly offline.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from werkzeug.serving import make_server

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"

FLAGS = [
    "--no-sandbox", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--enable-unsafe-swiftshader",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


def fake_camera_flags(y4m: Path) -> list[str]:
    return ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-video-capture={y4m}"]


@contextmanager
def live_server(app):
    """Serve ``app`` on an ephemeral 127.0.0.1 port in a thread; yields the base URL."""
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


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


def screenshot(page, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def letterbox_rgb(image, width: int = 640, height: int = 480, fill: int = 0):
    """Fit an RGB uint8 photo into width x height (centred, aspect kept), like a camera frame."""
    import numpy as np
    from PIL import Image

    h, w = image.shape[:2]
    scale = min(width / w, height / h)
    new_w, new_h = round(w * scale), round(h * scale)
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), Image.BILINEAR))
    canvas = np.full((height, width, 3), fill, np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[top:top + new_h, left:left + new_w] = resized
    return canvas


def write_y4m(path: Path, rgb, frames: int = 2) -> Path:
    """A YUV4MPEG2 (4:2:0, BT.601 studio range) file Chromium's fake camera plays in a loop."""
    import numpy as np

    rgb = np.asarray(rgb, dtype=np.float32)
    h, w = rgb.shape[:2]
    assert h % 2 == 0 and w % 2 == 0, "4:2:0 needs even sizes"
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255

    def sub(plane):  # 2x2 average for the chroma planes
        return plane.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))

    planes = [np.clip(np.round(p), 0, 255).astype(np.uint8) for p in (y, sub(u), sub(v))]
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F30:1 Ip A1:1 C420jpeg\n".encode())
        for _ in range(frames):
            f.write(b"FRAME\n")
            for p in planes:
                f.write(p.tobytes())
    return Path(path)


def launch(playwright, extra_args=()):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS + list(extra_args))


def read_y4m_rgb(path: Path):
    """First frame of a y4m written by write_y4m, back to RGB (what the camera shows)."""
    import numpy as np

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


def drop_files(page, selector: str, files: list[tuple[str, str, bytes]]):
    """Simulate dropping files (name, mime type, bytes) on an element."""
    import base64

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
