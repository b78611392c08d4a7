"""Peak memory per request holds the documented bound (server/images.py
request_memory_bound: MAX_DECODE_BYTES_PER_PIXEL per image pixel plus REQUEST_BASE_BYTES),
measured in a worker of its own: the peak resident set (VmHWM, reset before each request
through /proc/self/clear_refs) minus the resident set just before it.

Cases: the issue's probes (600x1 and 16384x1 strips in PNG and WebP, which took 1.6 GB to
23 GB in the centre crop; now refused from the header) and the worst shapes of a 40 M pixel
image (at the aspect-ratio limit, the costliest decoders: an RGBA PNG through Pillow, a
JPEG through OpenCV, an RGBA WebP at WebP's largest side), on all three endpoints."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from server import images
from harness.paths import ROOT

pytestmark = pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")

ENDPOINTS = ("detect", "classify", "hands")
MAX_PIXELS = 40_000_000

WORKER = r"""
import gc, io, json, sys
from pathlib import Path

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024

from server import create_app, memory
memory.keep_freed_memory()  # as gunicorn.conf.py does in production: freed heap is kept for reuse
app = create_app({"MODELS_DIR": sys.argv[1], "TESTING": True, "MAX_IMAGE_PIXELS": int(sys.argv[2])})
client = app.test_client()
cases = json.loads(sys.stdin.read())
warm = Path(cases[0]["file"]).read_bytes()
for endpoint in ("detect", "classify", "hands"):  # load every model, first inference
    assert client.post(f"/api/v1/{endpoint}", data=warm, content_type="image/jpeg").status_code == 200
idle = status("VmRSS")
results = []
for case in cases[1:]:
    data = Path(case["file"]).read_bytes()
    gc.collect()
    open("/proc/self/clear_refs", "w").write("5")  # VmHWM := VmRSS
    before = status("VmRSS")
    response = client.post(f"/api/v1/{case['endpoint']}", data=data, content_type=case["type"])
    results.append({**case, "status": response.status_code, "code": (response.get_json() or {}).get("error", {}).get("code"),
                    "peak": status("VmHWM") - before, "rss_after": status("VmRSS")})
    del data, response
print(json.dumps({"idle": idle, "results": results}))
"""


def webp_header_width(data: bytes, width: int) -> bytes:
    """A lossless WebP with its VP8L header saying ``width`` (libwebp encodes at most 16383;
    the issue's 16384x1 probe was such a file): only the header is read before the refusal."""
    out = bytearray(data)
    at = out.index(b"VP8L") + 8 + 1  # chunk tag, size, signature byte 0x2f
    bits = int.from_bytes(out[at:at + 4], "little")
    bits = (bits & ~0x3FFF) | (width - 1)
    out[at:at + 4] = bits.to_bytes(4, "little")
    return bytes(out)


def save(path: Path, im: Image.Image, fmt: str, **kwargs) -> Path:
    buf = io.BytesIO()
    im.save(buf, fmt, **kwargs)
    path.write_bytes(buf.getvalue())
    return path


def strips(folder: Path) -> list[tuple[Path, str, tuple[int, int]]]:
    out = []
    for w in (600, 16384):
        strip = Image.new("RGB", (w, 1), (200, 30, 90))
        out.append((save(folder / f"strip{w}.png", strip, "PNG"), "image/png", (w, 1)))
        webp = save(folder / "strip.webp", Image.new("RGB", (min(w, 16383), 1), (200, 30, 90)), "WEBP",
                    lossless=True).read_bytes()
        (folder / f"strip{w}.webp").write_bytes(webp_header_width(webp, w))
        out.append((folder / f"strip{w}.webp", "image/webp", (w, 1)))
    return out


def worst_shapes(folder: Path) -> list[tuple[Path, str, tuple[int, int]]]:
    """~40 M pixels at the aspect limit (and WebP's largest side), half transparent."""
    short = int((MAX_PIXELS / images.MAX_ASPECT_RATIO) ** 0.5)
    wide = (short * images.MAX_ASPECT_RATIO, short)
    rgba = Image.new("RGBA", wide, (30, 140, 220, 255))
    rgba.paste((0, 0, 0, 0), (0, 0, wide[0] // 2, wide[1]))
    webp_size = (16383, MAX_PIXELS // 16383)
    webp = Image.new("RGBA", webp_size, (30, 140, 220, 255))
    webp.paste((0, 0, 0, 0), (0, 0, webp_size[0] // 2, webp_size[1]))
    return [(save(folder / "wide.png", rgba, "PNG", compress_level=1), "image/png", wide),
            (save(folder / "wide.jpg", rgba.convert("RGB"), "JPEG", quality=90), "image/jpeg", wide),
            (save(folder / "big.webp", webp, "WEBP", quality=50, method=0), "image/webp", webp_size)]


def test_peak_memory_per_request_is_bounded(api_models, tmp_path):
    if "yolov5n" not in api_models:
        pytest.skip("yolov5n is not built here")
    folder = next(iter(api_models.values())).parent
    warm = save(tmp_path / "warm.jpg", Image.new("RGB", (64, 48), (120, 120, 120)), "JPEG")
    refused, accepted = strips(tmp_path), worst_shapes(tmp_path)
    cases = [{"file": str(warm)}] + [
        {"file": str(path), "type": mime, "size": size, "endpoint": endpoint, "refused": (path, mime, size) in refused}
        for path, mime, size in refused + accepted for endpoint in ENDPOINTS]
    proc = subprocess.run([sys.executable, "-c", WORKER, str(folder), str(MAX_PIXELS)], cwd=ROOT, input=json.dumps(cases),
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "DATARAILROAD_INFER_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    worst = 0
    for r in report["results"]:
        pixels = r["size"][0] * r["size"][1]
        bound = images.request_memory_bound(pixels)
        print(f"{r['endpoint']:8} {Path(r['file']).name:14} {r['size'][0]}x{r['size'][1]} -> {r['status']} "
              f"peak {r['peak'] / 2**20:.0f} MB (bound {bound / 2**20:.0f} MB)")
        if r["refused"]:
            assert (r["status"], r["code"]) == (422, "image_aspect_ratio"), r
        else:
            assert r["status"] == 200, r
            assert pixels <= MAX_PIXELS
        assert r["peak"] <= bound, r
        worst = max(worst, report["idle"] + r["peak"])
    # The worker as a whole: loaded and warm, plus one request's bound at the pixel limit.
    assert worst <= report["idle"] + images.request_memory_bound(MAX_PIXELS)
    assert report["results"][-1]["rss_after"] <= report["idle"] + images.REQUEST_BASE_BYTES  # nothing kept
