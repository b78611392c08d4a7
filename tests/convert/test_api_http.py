"""Server-side inference API over HTTP: the same answers as the pages (TF.js files run in the
real TF.js runtime, decoded by static/js/*.js), the OpenAPI document against real responses,
and every kind of bad input answered with a 4xx JSON error (never a 500; the next request
works). The contract underneath without HTTP: tests/convert/test_contract.py."""
from __future__ import annotations

import io
import json
import threading

import numpy as np
import pytest

from converters import parity
from modelcontract.boxes import box_iou
from modelcontract.decode import top_classes
from modelcontract.geometry import prepare
from server import create_app
from harness.models import need, read_manifest
from harness.node import detector_js_decode
from harness.photos import HAND_GESTURES, decoded, encode, photo_bytes, png_bomb

PHOTOS = ("bus.jpg", "zidane.jpg")


@pytest.fixture(scope="module")
def app(api_models):
    folder = next(iter(api_models.values())).parent
    return create_app({"MODELS_DIR": folder, "TESTING": True})


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


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
    decoded by static/js/contract/decode.js."""
    manifest = read_manifest(folder)
    assert manifest["outputs"]["format"] == "nms"
    x, transform = prepare(image, manifest["input"])
    names = [t["name"] for t in manifest["outputs"]["tensors"]]
    run = parity.run_tfjs(folder / manifest["tfjs"]["model"], {manifest["input"]["name"]: x}, outputs=names)
    height, width = image.shape[:2]
    return detector_js_decode(manifest, [{"outputs": [run["outputs"][n] for n in names], "transform": transform,
                                          "width": width, "height": height,
                                          "options": {"score": score, "iou": manifest["nms"]["iou"],
                                                      "maxDet": max_det}}])[0]


def page_classify(folder, image, k=5):
    """The classify page: TF.js probabilities, ranked as static/js/contract/scores.js ranks them."""
    manifest = read_manifest(folder)
    x, _ = prepare(image, manifest["input"])
    tensors = manifest["outputs"]["tensors"]
    name = next(t["name"] for t in tensors if t.get("key", "probabilities") == "probabilities")
    run = parity.run_tfjs(folder / manifest["tfjs"]["model"], {manifest["input"]["name"]: x}, outputs=[name])
    return top_classes(run["outputs"][name].reshape(-1), manifest["labels"], k)


def page_and_api(client, api_models, model_id, endpoint, page, photo):
    """(what the page shows, what the API answers) for one photo and model."""
    data = photo_bytes(photo)
    expected = page(need(api_models, model_id), decoded(data))
    got = post(client, endpoint, data, query=f"?model={model_id}").get_json()
    assert got["model"] == model_id
    return expected, got


@pytest.mark.parametrize("photo", PHOTOS)
def test_detect_equals_the_page(client, api_models, photo):
    expected, got = page_and_api(client, api_models, "yolov5n", "detect", page_detect, photo)
    assert [d["class_id"] for d in got["detections"]] == [d["class_id"] for d in expected]
    assert [d["label"] for d in got["detections"]] == [d["label"] for d in expected]
    assert len(expected) >= 3  # real detections, not an empty match
    for g, e in zip(got["detections"], expected):
        assert box_iou([g["box"]], [e["box"]])[0, 0] >= 0.9
        assert abs(g["score"] - e["score"]) < 1e-3
        assert max(abs(a - b) for a, b in zip(g["box"], e["box"])) < 0.5  # px, in practice ~1e-3


@pytest.mark.parametrize("photo", PHOTOS)
def test_classify_equals_the_page(client, api_models, photo):
    expected, got = page_and_api(client, api_models, "efficientnet-lite0", "classify", page_classify, photo)
    assert [t["class_id"] for t in got["top"]] == [t["class_id"] for t in expected]
    assert [t["label"] for t in got["top"]] == [t["label"] for t in expected]
    for g, e in zip(got["top"], expected):
        assert abs(g["probability"] - e["probability"]) < 1e-3


def test_hands_equal_the_library(client, api_models):
    """@tensorflow-models/hand-pose-detection in Node (what the hands page runs) vs the API,
    both variants, on hand photos and on zidane.jpg."""
    from converters.handpose.library import run_library

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


@pytest.mark.parametrize("photo,gesture", list(HAND_GESTURES.items()))
def test_hands_gesture_on_photos(client, api_models, photo, gesture):
    need(api_models, "handpose")
    hands = post(client, "hands", photo_bytes(photo)).get_json()["hands"]
    assert [h["gesture"] for h in hands] == [gesture]


def post_custom(client, photo: str, custom):
    form = {"image": (io.BytesIO(photo_bytes(photo)), photo)}
    if custom is not None:
        form["custom"] = (io.BytesIO(custom if isinstance(custom, bytes) else json.dumps(custom).encode()),
                          "gestures.json")
    return client.post("/api/v1/hands", data=form, content_type="multipart/form-data")


def test_hands_custom_gestures_answer_the_recorded_names(client, api_models):
    """A set recorded from the server's own hands (as the page records the page's): each photo
    answers its gesture's name, a third gesture none of them; without the part, no `custom`."""
    from modelcontract import custom_gestures as cg

    need(api_models, "handpose")
    recorded = {}
    for name, photo in (("like", "up_3.jpg"), ("palm", "none_2.jpg")):
        hand = post_custom(client, photo, None).get_json()["hands"][0]
        assert "custom" not in hand
        recorded[name] = cg.normalise_hand(hand["keypoints"], hand["handedness"])
    gesture_set = {"format": cg.GESTURE_SETS.format, "version": 1,
                   "classes": [{"name": n, "examples": [v]} for n, v in recorded.items()]}
    answers = {photo: post_custom(client, photo, gesture_set) for photo in ("up_3.jpg", "none_2.jpg", "victory_1.jpg")}
    assert all(r.status_code == 200 for r in answers.values())
    custom = {photo: r.get_json()["hands"][0]["custom"] for photo, r in answers.items()}
    assert custom["up_3.jpg"]["name"] == "like" and custom["up_3.jpg"]["distance"] < 1e-3
    assert custom["none_2.jpg"]["name"] == "palm" and custom["none_2.jpg"]["confidence"] == 1.0
    assert custom["victory_1.jpg"] is None
    assert answers["up_3.jpg"].get_json()["hands"][0]["gesture"] == "thumbs_up"   # the built-in one stays


@pytest.mark.parametrize("bad", ["not json", "nested past the limit", "a list", "other format", "empty name",
                                 "short example", "NaN",
                                 "too many examples", "twice"])
def test_hands_custom_bad_file_is_a_400_and_the_server_goes_on(client, api_models, bad):
    from tests.unit.test_custom_gestures import BAD

    need(api_models, "handpose")
    body = BAD[bad]
    response = post_custom(client, "up_3.jpg", body.encode() if isinstance(body, str) else body)
    assert_error(response, 400, "bad_custom")
    assert "not a gesture file" in response.get_json()["error"]["message"]
    assert post_custom(client, "up_3.jpg", None).status_code == 200


def test_hands_custom_part_must_be_one_file(client, api_models):
    need(api_models, "handpose")
    image = (io.BytesIO(photo_bytes("up_3.jpg")), "up_3.jpg")
    as_field = client.post("/api/v1/hands", data={"image": image, "custom": "{}"}, content_type="multipart/form-data")
    assert_error(as_field, 400, "bad_custom")
    empty = {"format": "datarailroad-hand-gestures", "version": 1, "classes": []}
    twice = client.post("/api/v1/hands", content_type="multipart/form-data", data={
        "image": (io.BytesIO(photo_bytes("up_3.jpg")), "up_3.jpg"),
        "custom": [(io.BytesIO(json.dumps(empty).encode()), "a.json"), (io.BytesIO(json.dumps(empty).encode()), "b.json")]})
    assert_error(twice, 400, "bad_custom")


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
        # Declared: what any schema-valid body gets accepted as (tests/convert/test_openapi_schemathesis.py);
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


def classes_file(client, photos: dict) -> dict:
    """Your classes as the page records them: one example each, the model's features (here
    the server's own .tflite's, via the API runner)."""
    from modelcontract.custom_classes import CLASS_SETS
    from server.inference import registry

    runner = registry(client.application).get("classify", "efficientnet-lite0")
    classes = []
    for name, photo in photos.items():
        x, _ = prepare(decoded(photo_bytes(photo)), runner.manifest["input"])
        classes.append({"name": name, "examples": [runner.model.run1(x)["features"].reshape(-1).tolist()]})
    return CLASS_SETS.validate({"format": CLASS_SETS.format, "version": 1, "classes": classes})


def post_classify_custom(client, photo: str, custom, query=""):
    body = custom if isinstance(custom, bytes) else json.dumps(custom).encode()
    return client.post(f"/api/v1/classify{query}", content_type="multipart/form-data", data={
        "image": (io.BytesIO(photo_bytes(photo)), photo), "custom": (io.BytesIO(body), "classes.json")})


def test_classify_custom_classes_answer_the_taught_names(client, api_models):
    need(api_models, "efficientnet-lite0")
    taught = classes_file(client, {"bus": "bus.jpg", "people": "zidane.jpg"})
    for photo, want in (("bus.jpg", "bus"), ("zidane.jpg", "people")):
        answer = post_classify_custom(client, photo, taught).get_json()
        assert answer["custom"]["name"] == want and answer["custom"]["distance"] < 1e-6
        assert len(answer["top"]) == 5                          # the ImageNet top-5 stays
    plain = post(client, "classify", photo_bytes("bus.jpg")).get_json()
    assert "custom" not in plain


@pytest.mark.parametrize("bad", ["not json", "gesture file", "short example", "too many classes"])
def test_classify_custom_bad_file_is_a_400(client, api_models, bad):
    need(api_models, "efficientnet-lite0")
    body = {"not json": b"{nope",
            "gesture file": {"format": "datarailroad-hand-gestures", "version": 1, "classes": []},
            "short example": {"format": "datarailroad-image-classes", "version": 1,
                              "classes": [{"name": "a", "examples": [[0.0] * 40]}]},
            "too many classes": {"format": "datarailroad-image-classes", "version": 1,
                                 "classes": [{"name": f"c{i}", "examples": [[0.0] * 1280]} for i in range(11)]}}[bad]
    response = post_classify_custom(client, "bus.jpg", body)
    assert_error(response, 400, "bad_custom")
    assert "not a class file" in response.get_json()["error"]["message"]
    assert post(client, "classify", photo_bytes("bus.jpg")).status_code == 200


def test_classify_custom_on_a_model_without_features_is_a_400(api_models, tmp_path):
    from harness.models import edit_manifest, install_copy

    folder = install_copy(need(api_models, "efficientnet-lite0"), tmp_path, "old-lite0")
    edit_manifest(folder, lambda m: m["server"].pop("features"))
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    empty = {"format": "datarailroad-image-classes", "version": 1, "classes": []}
    response = post_classify_custom(client, "bus.jpg", empty, "?model=old-lite0")
    assert_error(response, 400, "bad_custom")
    assert "no feature output" in response.get_json()["error"]["message"]
