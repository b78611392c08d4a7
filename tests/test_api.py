"""Server-side inference API: same answers as the pages (TF.js files run in the real TF.js
runtime, decoded as static/js/*.js do), the OpenAPI document against real responses, and
every kind of bad input answered with a 4xx JSON error (never a 500; the next request works)."""
from __future__ import annotations

import io
import json
import threading

import numpy as np
import pytest

from converters import parity
from server import create_app
from server.preprocess import prepare
from tests.api_helpers import api_models, box_iou, decoded, encode, need, photo_bytes, png_bomb  # noqa: F401

PHOTOS = ("bus.jpg", "zidane.jpg")


@pytest.fixture(scope="module")
def app(api_models):
    folder = next(iter(api_models.values())).parent
    return create_app({"MODELS_DIR": folder, "TESTING": True})


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


def manifest_of(folder):
    return json.loads((folder / "manifest.json").read_text())


def post(client, endpoint, data, content_type="image/jpeg", query=""):
    return client.post(f"/api/v1/{endpoint}{query}", data=data, content_type=content_type)


def assert_error(response, status, code=None):
    assert response.status_code == status, response.get_data(as_text=True)[:300]
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    assert body["error"]["message"]
    if code:
        assert body["error"]["code"] == code, body


# ---------------------------------------------------------------------------- the pages' answers

def page_detect(folder, image, score=0.25, max_det=100):
    """What the detect page shows: the TF.js files in TF.js (WASM) on the manifest's input,
    decoded like static/js/detector.js decodeNms."""
    manifest = manifest_of(folder)
    assert manifest["outputs"]["format"] == "nms"
    x, transform = prepare(image, manifest["input"])
    tensors = manifest["outputs"]["tensors"]
    run = parity.run_tfjs(folder / manifest["tfjs"]["model"], {manifest["input"]["name"]: x},
                          outputs=[t["name"] for t in tensors])
    out = {t["key"]: run["outputs"][t["name"]] for t in tensors}
    _, in_h, in_w, _ = manifest["input"]["shape"]
    height, width = image.shape[:2]
    detections = []
    for i in range(int(out["valid_detections"].reshape(-1)[0])):
        if len(detections) >= max_det:
            break
        s = float(out["scores"].reshape(-1)[i])
        if s < score:
            continue
        b = out["boxes"].reshape(-1, 4)[i].astype(np.float64) * [in_w, in_h, in_w, in_h]
        xy = transform.to_source(b)
        box = [min(max(float(v), 0), hi) for v, hi in zip(xy, (width, height, width, height))]
        c = int(round(float(out["classes"].reshape(-1)[i])))
        detections.append({"class_id": c, "label": manifest["labels"][c], "score": s, "box": box})
    return detections


def page_classify(folder, image, k=5):
    """The classify page: TF.js probabilities, top-k by value then index."""
    manifest = manifest_of(folder)
    x, _ = prepare(image, manifest["input"])
    run = parity.run_tfjs(folder / manifest["tfjs"]["model"], {manifest["input"]["name"]: x})
    values = next(iter(run["outputs"].values())).reshape(-1).astype(np.float64)
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))[:k]
    return [{"class_id": i, "label": manifest["labels"][i], "probability": values[i]} for i in order]


@pytest.mark.parametrize("photo", PHOTOS)
def test_detect_equals_the_page(client, api_models, photo):
    folder = need(api_models, "yolov5n")
    data = photo_bytes(photo)
    expected = page_detect(folder, decoded(data))
    got = post(client, "detect", data, query="?model=yolov5n").get_json()
    assert got["model"] == "yolov5n"
    assert [d["class_id"] for d in got["detections"]] == [d["class_id"] for d in expected]
    assert [d["label"] for d in got["detections"]] == [d["label"] for d in expected]
    assert len(expected) >= 3  # real detections, not an empty match
    for g, e in zip(got["detections"], expected):
        assert box_iou(g["box"], e["box"]) >= 0.9
        assert abs(g["score"] - e["score"]) < 1e-3
        assert max(abs(a - b) for a, b in zip(g["box"], e["box"])) < 0.5  # px, in practice ~1e-3


@pytest.mark.parametrize("photo", PHOTOS)
def test_classify_equals_the_page(client, api_models, photo):
    folder = need(api_models, "efficientnet-lite0")
    data = photo_bytes(photo)
    expected = page_classify(folder, decoded(data))
    got = post(client, "classify", data, query="?model=efficientnet-lite0").get_json()
    assert [t["class_id"] for t in got["top"]] == [t["class_id"] for t in expected]
    assert [t["label"] for t in got["top"]] == [t["label"] for t in expected]
    for g, e in zip(got["top"], expected):
        assert abs(g["probability"] - e["probability"]) < 1e-3


def test_hands_equal_the_library(client, api_models):
    """@tensorflow-models/hand-pose-detection in Node (what the hands page runs) vs the API,
    both variants, on hand photos and on zidane.jpg."""
    from converters.handpose import run_library

    folder = need(api_models, "handpose")
    photos = {name: photo_bytes(name) for name in ("up_1.jpg", "down_1.jpg")}
    photos["zidane.jpg"] = photo_bytes("zidane.jpg")
    images = {name: decoded(data) for name, data in photos.items()}
    seen = 0
    for variant in ("full", "lite"):
        library = run_library(folder, variant, images)
        for name, data in photos.items():
            got = post(client, "hands", data, query=f"?variant={variant}").get_json()
            expected = library[name]["hands"]
            assert len(got["hands"]) == len(expected), (variant, name)
            assert got["variant"] == variant
            for g, e in zip(got["hands"], expected):
                seen += 1
                assert g["model_handedness"] == e["handedness"]
                assert g["handedness"] == {"Left": "Right", "Right": "Left"}[e["handedness"]]  # as hands.js shows it
                assert abs(g["score"] - e["score"]) < 1e-3
                assert len(g["keypoints"]) == 21
                distance = np.linalg.norm(np.asarray(g["keypoints"]) - np.asarray(e["keypoints"]), axis=1)
                assert distance.max() < 0.5, (variant, name, distance.max())  # px; ~0.01 in practice
    assert seen >= 3


DETECTOR_RUNNER = """
import {createRequire} from 'node:module';
const require = createRequire(%s);
const tf = require('@tensorflow/tfjs');
globalThis.tf = tf;
await tf.setBackend('cpu');
const {decode} = await import(%s);
const {makeTransform} = await import(%s);
let text = '';
process.stdin.on('data', (d) => { text += d; });
process.stdin.on('end', async () => {
  const req = JSON.parse(text);
  const out = [];
  for (const c of req.cases) {
    const raw = tf.tensor(c.raw, c.shape, 'float32');
    const frame = {transform: makeTransform(...c.transform), width: c.width, height: c.height};
    out.push(await decode(req.manifest, [raw], frame, {...c.options, classes: null}));
    raw.dispose();
  }
  process.stdout.write(JSON.stringify(out));
});
"""


def test_yolo_raw_decode_equals_detector_js():
    """The "yolo-raw" format (ultralytics export; no such model is built here offline):
    the server's decode vs static/js/detector.js's decodeRaw in TF.js (Node, CPU backend)
    on synthetic heads with clustered, overlapping boxes."""
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    rng = np.random.default_rng(3)
    anchors, nc = 900, 80
    raw = np.zeros((1, 4 + nc, anchors), np.float32)
    raw[0, 4:] = rng.uniform(0, 0.2, (nc, anchors))
    for k, start in enumerate(range(0, 600, 12)):  # 50 objects, 12 jittered anchors each
        cx, cy, w, h = rng.uniform(40, 600), rng.uniform(40, 600), rng.uniform(10, 200), rng.uniform(10, 200)
        cls = int(rng.integers(nc))
        for j in range(start, start + 12):
            raw[0, 0:4, j] = [cx + rng.normal(0, 4), cy + rng.normal(0, 4), w * rng.uniform(0.8, 1.2),
                              h * rng.uniform(0.8, 1.2)]
            raw[0, 4 + cls, j] = rng.uniform(0.2, 0.95)
    labels = [f"class{i}" for i in range(nc)]
    transform = (0.75, 0.75, 0.0, 80.0)
    option_sets = [(0.25, 0.45, 100), (0.5, 0.7, 5), (0.1, 0.3, 50), (0.3, 0.9, 300)]
    cases = [{"raw": raw.ravel().tolist(), "shape": list(raw.shape), "transform": list(transform),
              "width": 853, "height": 640, "options": {"score": s, "iou": i, "maxDet": m}} for s, i, m in option_sets]
    # Class-agnostic (no "nms" in the manifest) and per-class NMS (the ultralytics default).
    for agnostic in (True, False):
        _compare_raw_decode(node, raw, labels, transform, cases, option_sets, agnostic)


def _compare_raw_decode(node, raw, labels, transform, cases, option_sets, agnostic):
    import subprocess

    from server.inference.detect import DetectOptions, decode_raw
    from server.preprocess import Transform
    from tests.conftest import ROOT

    manifest = {"outputs": {"format": "yolo-raw", "tensors": [{"name": "Identity", "shape": list(raw.shape)}]},
                "labels": labels, "input": {"shape": [1, 640, 640, 3]}}
    if not agnostic:
        manifest["nms"] = {"agnostic": False}
    script = DETECTOR_RUNNER % (json.dumps(str(ROOT) + "/"),
                                json.dumps((ROOT / "static" / "js" / "detector.js").as_uri()),
                                json.dumps((ROOT / "static" / "js" / "geometry.js").as_uri()))
    proc = subprocess.run([node, "--input-type=module", "-e", script], cwd=ROOT, capture_output=True, text=True,
                          input=json.dumps({"manifest": manifest, "cases": cases}), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected_all = json.loads(proc.stdout)
    for (score, iou, max_det), expected in zip(option_sets, expected_all):
        got = decode_raw(raw, labels, Transform(*transform), 853, 640, DetectOptions(score, iou, max_det), agnostic)
        assert len(expected) > 3
        assert [d["class_id"] for d in got] == [d["class_id"] for d in expected], (score, iou, max_det)
        for g, e in zip(got, expected):
            assert g["label"] == e["label"] and abs(g["score"] - e["score"]) < 1e-7
            assert np.allclose(g["box"], e["box"], atol=1e-4)


def test_nms_matches_torchvision_without_ties():
    import torch
    import torchvision

    from server.inference.nms import non_max_suppression

    rng = np.random.default_rng(5)
    for _ in range(20):
        xy = rng.uniform(0, 500, (300, 2))
        boxes = np.concatenate([xy, xy + rng.uniform(5, 120, (300, 2))], 1).astype(np.float32)
        scores = rng.permutation(300).astype(np.float32) / 300  # distinct
        for iou in (0.3, 0.5, 0.7):
            ours = non_max_suppression(boxes[:, [1, 0, 3, 2]], scores, 1000, iou)
            ref = torchvision.ops.nms(torch.from_numpy(boxes).double(), torch.from_numpy(scores).double(), iou)
            assert ours.tolist() == ref.tolist()


def test_resize_bilinear_is_the_plain_formula():
    """server/preprocess.resize_bilinear gathers before casting and works in place; it must
    stay bit-identical to the plain float32 formula (cast the image, gather, lerp)."""
    from server.preprocess import resize_bilinear

    def plain(image, height, width):
        src = np.asarray(image, dtype=np.float32)
        in_h, in_w = src.shape[:2]
        if (in_h, in_w) == (height, width):
            return src.copy()

        def axis(out_size, in_size):
            pos = np.clip((np.arange(out_size, dtype=np.float64) + 0.5) * (in_size / out_size) - 0.5, 0, None)
            lo = np.minimum(np.floor(pos).astype(np.int64), in_size - 1)
            return lo, np.minimum(lo + 1, in_size - 1), (pos - lo).astype(np.float32)

        y0, y1, fy = axis(height, in_h)
        x0, x1, fx = axis(width, in_w)
        top = src[y0][:, x0] * (1 - fx)[None, :, None] + src[y0][:, x1] * fx[None, :, None]
        bottom = src[y1][:, x0] * (1 - fx)[None, :, None] + src[y1][:, x1] * fx[None, :, None]
        return top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]

    rng = np.random.default_rng(0)
    images = [decoded(photo_bytes("bus.jpg")), rng.integers(0, 256, (37, 1000, 3), dtype=np.uint8),
              rng.random((50, 70, 3)) * 255, rng.integers(0, 256, (3, 2, 3), dtype=np.uint8)]
    for image in images:
        for size in ((640, 480), (5, 7), (224, 300), image.shape[:2]):
            ours, ref = resize_bilinear(image, *size), plain(image, *size)
            assert ours.dtype == ref.dtype == np.float32 and np.array_equal(ours, ref)
    # prepare's normalisation, also in place and skipping exact no-ops: (pixel * scale - mean) / std
    spec = {"shape": [1, 64, 48, 3], "resize": "stretch", "scale": 1 / 255}
    for extra in ({}, {"mean": [127.0, 127.0, 127.0], "std": [128.0, 128.0, 128.0], "scale": 1.0},
                  {"mean": [0.0, 0.5, 0.0], "std": [1.0, 1.0, 0.25]}):
        full = {**spec, **extra}
        ours, _ = prepare(images[0], full)
        ref = (plain(images[0], 64, 48) * np.float32(full["scale"]) - np.float32(full.get("mean", [0.0] * 3))) \
            / np.asarray(full.get("std", [1.0] * 3), np.float32)
        assert np.array_equal(ours[0], ref.astype(np.float32))


GESTURE_RUNNER = """
import {classifyGesture} from %s;
let text = '';
process.stdin.on('data', (d) => { text += d; });
process.stdin.on('end', () => {
  const out = {};
  for (const c of JSON.parse(text)) out[c.id] = classifyGesture(c.points, {world: c.world, hold: c.hold});
  process.stdout.write(JSON.stringify(out));
});
"""


def gesture_js(cases: list[dict]) -> dict:
    import shutil
    import subprocess

    from tests.conftest import ROOT

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = GESTURE_RUNNER % json.dumps((ROOT / "static" / "js" / "gesture.js").as_uri())
    proc = subprocess.run([node, "--input-type=module", "-e", script], input=json.dumps(cases),
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_gesture_twin_equals_gesture_js(app, api_models):
    """server/inference/gesture.py vs static/js/gesture.js on the same landmarks: the hand
    photos' (image keypoints + world landmarks from the server runner), rotated, mirrored,
    scaled and jittered, with and without world landmarks, every hold state."""
    from server.inference import registry
    from server.inference.gesture import classify_gesture, hand_features

    need(api_models, "handpose")
    runner = registry(app).get("handpose")
    rng = np.random.default_rng(7)
    cases = []
    for name in ("up_1.jpg", "up_3.jpg", "down_1.jpg", "down_3.jpg", "none_2.jpg"):
        for hand in runner.estimate(decoded(photo_bytes(name)))[0]:
            base_points, base_world = hand["keypoints"], hand["world"]
            for k in range(24):
                angle = rng.uniform(-np.pi, np.pi) if k else 0.0
                rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
                points = base_points @ rot.T * rng.uniform(0.5, 2.0) + rng.normal(0, 2.0 * (k > 0), base_points.shape)
                world = base_world.copy()
                world[:, :2] = world[:, :2] @ rot.T
                if k % 3 == 1:
                    points[:, 0] *= -1
                    world[:, 0] *= -1
                for hold in ("none", "thumbs_up", "thumbs_down"):
                    cases.append({"id": f"{name}/{k}/{hold}/w", "points": points.tolist(), "world": world.tolist(),
                                  "hold": hold})
                    cases.append({"id": f"{name}/{k}/{hold}/2d", "points": points.tolist(), "world": None,
                                  "hold": hold})
    expected = gesture_js(cases)
    seen = set()
    for case in cases:
        js = expected[case["id"]]
        assert classify_gesture(case["points"], case["world"], case["hold"]) == js["gesture"], case["id"]
        seen.add(js["gesture"])
        ours = hand_features(case["points"], case["world"])
        for key, value in js["features"].items():
            assert np.allclose(ours[key], value, rtol=1e-12, atol=1e-12), (case["id"], key)
    assert seen == {"thumbs_up", "thumbs_down", "none"}


@pytest.mark.parametrize("photo,gesture", [("up_1.jpg", "thumbs_up"), ("up_3.jpg", "thumbs_up"),
                                           ("down_1.jpg", "thumbs_down"), ("down_3.jpg", "thumbs_down"),
                                           ("none_2.jpg", "none")])
def test_hands_gesture_on_photos(client, api_models, photo, gesture):
    need(api_models, "handpose")
    hands = post(client, "hands", photo_bytes(photo)).get_json()["hands"]
    assert [h["gesture"] for h in hands] == [gesture]


# ---------------------------------------------------------------------------- parameters & inputs

def test_models_lists_what_is_installed(client, api_models):
    body = client.get("/api/v1/models").get_json()
    ids = {m["id"] for m in body["models"]}
    assert set(api_models) <= ids
    assert {m["task"] for m in body["models"] if m["id"] in api_models} <= {"detect", "classify", "handpose"}


def test_default_model_per_task(client, api_models):
    data = photo_bytes("bus.jpg")
    assert post(client, "classify", data).get_json()["model"] == "efficientnet-lite0"
    assert post(client, "hands", data).get_json()["model"] == "handpose"
    if "yolov5n" in api_models:
        assert post(client, "detect", data).get_json()["model"] == "yolov5n"


def test_multipart_and_raw_body_agree(client, api_models):
    data = photo_bytes("bus.jpg")
    raw = post(client, "classify", data, query="?top_k=3").get_json()
    form = client.post("/api/v1/classify", data={"image": (io.BytesIO(data), "bus.jpg"), "top_k": "3"},
                       content_type="multipart/form-data").get_json()
    octet = post(client, "classify", data, "application/octet-stream", "?top_k=3").get_json()
    assert raw["top"] == form["top"] == octet["top"] and len(raw["top"]) == 3


def test_detect_parameters(client, api_models):
    need(api_models, "yolov5n")
    data = photo_bytes("bus.jpg")
    everything = post(client, "detect", data).get_json()["detections"]
    confident = post(client, "detect", data, query="?score=0.7").get_json()["detections"]
    assert confident == [d for d in everything if d["score"] >= 0.7] and len(confident) < len(everything)
    assert post(client, "detect", data, query="?max_det=1").get_json()["detections"] == everything[:1]
    assert post(client, "detect", data, query="?iou=0.45").status_code == 200  # the model's own IoU
    assert_error(post(client, "detect", data, query="?iou=0.6"), 400, "bad_parameter")
    result = post(client, "detect", data).get_json()
    assert set(result["timing_ms"]) >= {"decode", "preprocess", "model", "postprocess", "total"}
    assert result["image"] == {"width": 810, "height": 1080}


def test_exif_orientation_is_applied(client, api_models):
    """A PNG stored rotated with EXIF Orientation 6 gives the upright image's answer."""
    from PIL import Image

    rgb = decoded(photo_bytes("bus.jpg"))
    stored = np.asarray(Image.fromarray(rgb).transpose(Image.Transpose.ROTATE_90))  # 1080 wide, 810 high
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    rotated = encode(stored, "PNG", exif=exif.tobytes())
    upright = post(client, "classify", encode(rgb, "PNG"), "image/png").get_json()
    turned = post(client, "classify", rotated, "image/png").get_json()
    assert turned["image"] == {"width": 810, "height": 1080}
    assert turned["top"] == upright["top"]


def test_transparent_pixels_read_as_black():
    from server.images import decode

    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[..., :3] = 200
    rgba[:2, :, 3] = 255  # top half opaque, bottom half fully transparent
    rgb = decode(encode(rgba, "PNG"), 10**6).rgb
    assert (rgb[:2] == 200).all() and (rgb[2:] == 0).all()


def test_webp_and_png_decode(client, api_models):
    rgb = decoded(photo_bytes("zidane.jpg"))
    png = post(client, "classify", encode(rgb, "PNG"), "image/png").get_json()
    webp = post(client, "classify", encode(rgb, "WEBP", lossless=True), "image/webp").get_json()
    assert png["top"] == webp["top"]


def test_uploads_never_touch_the_disk(client, api_models, monkeypatch):
    """werkzeug spools multipart files over 500 KB to a temporary file; the API's request
    class keeps them in memory. Any temporary file during the request fails the test."""
    import tempfile

    import werkzeug.formparser

    def forbidden(*args, **kwargs):
        raise AssertionError("an upload went to a temporary file")

    for module in (tempfile, werkzeug.formparser):
        for name in ("TemporaryFile", "SpooledTemporaryFile", "NamedTemporaryFile"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, forbidden)
    big = encode(np.random.default_rng(0).integers(0, 255, (700, 700, 3)), "PNG")  # ~1.5 MB
    assert len(big) > 1_000_000
    response = client.post("/api/v1/classify", data={"image": (io.BytesIO(big), "noise.png")},
                           content_type="multipart/form-data")
    assert response.status_code == 200, response.get_data(as_text=True)


def test_concurrent_requests_are_consistent(app, api_models):
    """Threads sharing one worker's runners (LiteRT interpreters are not thread-safe)."""
    data = {name: photo_bytes(name) for name in PHOTOS}
    endpoints = ["classify", "hands"] + (["detect"] if "yolov5n" in api_models else [])
    client = app.test_client()
    expected = {(e, n): post(client, e, d).get_json() for e in endpoints for n, d in data.items()}
    failures = []

    def worker(seed):
        c = app.test_client()
        rng = np.random.default_rng(seed)
        for _ in range(6):
            e, n = endpoints[rng.integers(len(endpoints))], PHOTOS[rng.integers(2)]
            r = post(c, e, data[n])
            body = r.get_json()
            key = {"detect": "detections", "classify": "top", "hands": "hands"}[e]
            if r.status_code != 200 or body[key] != expected[(e, n)][key]:
                failures.append((e, n, r.status_code))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


# ---------------------------------------------------------------------------- bad input

def good_request_works(client):
    response = post(client, "classify", photo_bytes("zidane.jpg"))
    assert response.status_code == 200 and response.get_json()["top"]


BAD_BODIES = {
    "empty body": (b"", "image/jpeg", 400, "missing_image"),
    "empty octet-stream": (b"", "application/octet-stream", 400, "missing_image"),
    "text body": (b"hello, world", "text/plain", 415, "unsupported_media_type"),
    "json body": (b'{"image": "x"}', "application/json", 415, "unsupported_media_type"),
    "non-image as jpeg": (b"GIF89a not really" * 10, "image/jpeg", 415, "unsupported_media_type"),
    "html as png": (b"<html><body>hi</body></html>", "image/png", 415, "unsupported_media_type"),
}


@pytest.mark.parametrize("endpoint", ["detect", "classify", "hands"])
@pytest.mark.parametrize("case", list(BAD_BODIES))
def test_bad_bodies(client, api_models, endpoint, case):
    if endpoint == "detect":
        need(api_models, "yolov5n")
    data, content_type, status, code = BAD_BODIES[case]
    assert_error(post(client, endpoint, data, content_type), status, code)
    good_request_works(client)


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP"])
def test_truncated_image(client, api_models, fmt):
    whole = encode(decoded(photo_bytes("zidane.jpg")), fmt)
    for cut in (len(whole) // 2, len(whole) - 40):
        assert_error(post(client, "classify", whole[:cut], f"image/{fmt.lower()}"), 422, "unprocessable_image")
    good_request_works(client)


def test_other_image_formats_are_refused(client, api_models):
    rgb = decoded(photo_bytes("zidane.jpg"))[:64, :64]
    for fmt in ("GIF", "BMP", "TIFF"):
        assert_error(post(client, "classify", encode(rgb, fmt), "application/octet-stream"), 415)
    good_request_works(client)


def test_decompression_bomb(client, api_models):
    bomb = png_bomb(20000, 20000)
    assert len(bomb) < 200_000
    for endpoint in ("classify", "hands"):
        assert_error(post(client, endpoint, bomb, "image/png"), 413, "image_too_large")
    response = client.post("/api/v1/classify", data={"image": (io.BytesIO(bomb), "bomb.png")},
                           content_type="multipart/form-data")
    assert_error(response, 413, "image_too_large")
    good_request_works(client)


def test_pixel_limit_is_configurable(api_models):
    folder = next(iter(api_models.values())).parent
    small = create_app({"MODELS_DIR": folder, "TESTING": True, "MAX_IMAGE_PIXELS": 640 * 480}).test_client()
    assert_error(post(small, "classify", photo_bytes("bus.jpg")), 413, "image_too_large")  # 810x1080
    assert post(small, "classify", encode(np.zeros((480, 640, 3)), "PNG"), "image/png").status_code == 200


def test_upload_over_the_size_limit(api_models):
    """413 JSON for raw and multipart bodies (Content-Length over MAX_CONTENT_LENGTH);
    chunked bodies are checked against gunicorn in test_api_load.py."""
    folder = next(iter(api_models.values())).parent
    client = create_app({"MODELS_DIR": folder, "TESTING": True, "MAX_CONTENT_LENGTH": 100_000}).test_client()
    data = photo_bytes("bus.jpg")
    assert len(data) > 100_000
    assert_error(post(client, "classify", data), 413, "payload_too_large")
    response = client.post("/api/v1/classify", data={"image": (io.BytesIO(data), "bus.jpg")},
                           content_type="multipart/form-data")
    assert_error(response, 413, "payload_too_large")
    assert post(client, "classify", encode(np.zeros((64, 64, 3)), "PNG"), "image/png").status_code == 200


def test_default_upload_limit_is_10_mb(client, api_models):
    assert_error(post(client, "classify", b"\xff\xd8" + b"\x00" * (10 * 1024 * 1024)), 413, "payload_too_large")
    good_request_works(client)


BAD_PARAMS = [
    ("classify", "?model=nope", 404, "unknown_model"),
    ("classify", "?model=../../etc/passwd", 400, "bad_parameter"),
    ("classify", "?model=handpose", 400, "wrong_task"),
    ("classify", "?top_k=0", 400, "bad_parameter"),
    ("classify", "?top_k=-3", 400, "bad_parameter"),
    ("classify", "?top_k=1001", 400, "bad_parameter"),
    ("classify", "?top_k=2.5", 400, "bad_parameter"),
    ("classify", "?top_k=abc", 400, "bad_parameter"),
    ("classify", "?top_k=", 400, "bad_parameter"),
    ("detect", "?score=abc", 400, "bad_parameter"),
    ("detect", "?score=-0.1", 400, "bad_parameter"),
    ("detect", "?score=1.5", 400, "bad_parameter"),
    ("detect", "?score=nan", 400, "bad_parameter"),
    ("detect", "?score=inf", 400, "bad_parameter"),
    ("detect", "?score=1_0", 400, "bad_parameter"),
    ("detect", "?iou=2", 400, "bad_parameter"),
    ("detect", "?max_det=0", 400, "bad_parameter"),
    ("detect", "?max_det=99999999999999999999", 400, "bad_parameter"),
    ("detect", "?model=efficientnet-lite0", 400, "wrong_task"),
    ("hands", "?variant=huge", 400, "bad_parameter"),
    ("hands", "?max_det=11", 400, "bad_parameter"),
    ("hands", "?score=-1", 400, "bad_parameter"),
]


@pytest.mark.parametrize("endpoint,query,status,code", BAD_PARAMS)
def test_bad_parameters(client, api_models, endpoint, query, status, code):
    if endpoint == "detect":
        need(api_models, "yolov5n")
    assert_error(post(client, endpoint, photo_bytes("zidane.jpg"), query=query), status, code)
    good_request_works(client)


def test_bad_parameters_in_form_fields(client, api_models):
    data = photo_bytes("zidane.jpg")
    response = client.post("/api/v1/classify", data={"image": (io.BytesIO(data), "z.jpg"), "top_k": "0"},
                           content_type="multipart/form-data")
    assert_error(response, 400, "bad_parameter")
    response = client.post("/api/v1/classify", data={"image": "not a file"}, content_type="multipart/form-data")
    assert_error(response, 400, "missing_image")
    response = client.post("/api/v1/classify", data={"picture": (io.BytesIO(data), "z.jpg")},
                           content_type="multipart/form-data")
    assert_error(response, 400, "missing_image")
    good_request_works(client)


def test_wrong_methods_and_paths(client):
    assert_error(client.get("/api/v1/detect"), 405)
    assert_error(client.put("/api/v1/classify", data=b"x"), 405)
    assert_error(client.post("/api/v1/nothing", data=b"x"), 404)


def test_no_model_installed(tmp_path):
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    response = post(client, "detect", b"\xff\xd8\xff")
    assert_error(response, 503, "no_model")
    assert "python -m converters" in response.get_json()["error"]["message"]


def test_broken_server_artifact_is_a_503(tmp_path, api_models):
    import shutil

    folder = need(api_models, "efficientnet-lite0")
    copy = tmp_path / "efficientnet-lite0"
    shutil.copytree(folder, copy)
    (copy / "model.tflite").write_bytes(b"not a flatbuffer")
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    assert_error(post(client, "classify", photo_bytes("zidane.jpg")), 503, "model_unavailable")
    assert_error(post(client, "classify", photo_bytes("zidane.jpg")), 503, "model_unavailable")


# ---------------------------------------------------------------------------- OpenAPI

def openapi_validator(client, schema_name):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    doc = client.get("/api/v1/openapi.json").get_json()
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(doc, default_specification=DRAFT202012))
    schema = {"$ref": f"urn:openapi#/components/schemas/{schema_name}"}
    return Draft202012Validator(schema, registry=registry)


def test_openapi_document(client, app):
    doc = client.get("/api/v1/openapi.json").get_json()
    assert doc["openapi"].startswith("3.")
    documented = set(doc["paths"])
    # Flask's /models/<model_id> is OpenAPI's /models/{model_id}.
    routes = {rule.rule.replace("<", "{").replace(">", "}") for rule in app.url_map.iter_rules()
              if rule.rule.startswith("/api/v1/")}
    assert routes == documented
    for path in ("/api/v1/detect", "/api/v1/classify", "/api/v1/hands"):
        op = doc["paths"][path]["post"]
        # Declared: what any schema-valid body gets accepted as (tests/test_openapi_schemathesis.py);
        # multipart and octet-stream ("any bytes") are described, not declared.
        assert {"image/jpeg", "image/png", "image/webp"} == set(op["requestBody"]["content"])
        assert "multipart/form-data" in op["requestBody"]["description"]
        assert {"200", "400", "404", "413", "415", "422"} <= set(op["responses"])
    from jsonschema import Draft202012Validator

    for schema in doc["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)


def test_real_responses_validate_against_openapi(client, api_models):
    bus, hand = photo_bytes("bus.jpg"), photo_bytes("up_1.jpg")
    checks = [("ModelList", client.get("/api/v1/models")),
              ("ClassifyResult", post(client, "classify", bus)),
              ("HandsResult", post(client, "hands", hand)),
              ("Error", post(client, "classify", b"")),
              ("Error", post(client, "classify", bus, query="?top_k=0")),
              ("Error", post(client, "classify", png_bomb(), "image/png")),
              ("Error", client.get("/api/v1/hands"))]
    if "yolov5n" in api_models:
        checks.append(("DetectResult", post(client, "detect", bus)))
    hands = checks[2][1].get_json()["hands"]
    assert hands, "up_1.jpg should give a hand to validate"
    for name, response in checks:
        errors = list(openapi_validator(client, name).iter_errors(response.get_json()))
        assert not errors, (name, [e.message for e in errors][:3])


def test_hands_detect_score_is_the_palm_cut(client, api_models):
    """detect_score moves the palm detector's cut (the page's slider, MediaPipe's
    min_detection_confidence): zidane.jpg's pointing hand scores between 0.3 and 0.5."""
    need(api_models, "handpose")
    data = photo_bytes("zidane.jpg")
    default = post(client, "hands", data).get_json()
    lowered = post(client, "hands", data, query="?detect_score=0.3").get_json()
    assert default["hands"] == []
    assert len(lowered["hands"]) == 1 and len(lowered["hands"][0]["keypoints"]) == 21
    assert_error(post(client, "hands", data, query="?detect_score=2"), 400)
