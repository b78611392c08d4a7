"""Property-based tests of the upload path: whatever the body, content type, multipart
layout or parameter text, the API answers 200 or a 4xx JSON error, never a 5xx, and keeps
serving. DATARAILROAD_FUZZ_EXAMPLES sets the examples per property (default 80)."""
from __future__ import annotations

import io
import os
import struct
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from server import create_app
from harness.photos import encode, photo_bytes

EXAMPLES = int(os.environ.get("DATARAILROAD_FUZZ_EXAMPLES", 80))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

CONTENT_TYPES = ["image/jpeg", "image/png", "image/webp", "application/octet-stream", "text/plain",
                 "application/json", "image/gif", "multipart/form-data", "multipart/form-data; boundary=x",
                 "application/x-www-form-urlencoded", "image/jpeg; charset=binary", "", "*/*", "image/*"]


@pytest.fixture(scope="module")
def client(api_models):
    folder = next(iter(api_models.values())).parent
    return create_app({"MODELS_DIR": folder, "TESTING": True}).test_client()


@pytest.fixture(scope="module")
def endpoints(api_models):
    return ["classify", "hands"] + (["detect"] if "yolov5n" in api_models else [])


@pytest.fixture(scope="module")
def seeds():
    """Small valid images of each accepted format, the material mutations start from."""
    rgb = np.random.default_rng(1).integers(0, 255, (48, 64, 3)).astype(np.uint8)
    return [encode(rgb, "JPEG", quality=80), encode(rgb, "PNG"), encode(rgb, "WEBP"),
            encode(rgb[:, :, 0], "PNG"), encode(np.dstack([rgb, rgb[:, :, :1]]), "PNG")]


def check(response):
    assert response.status_code < 500, (response.status_code, response.get_data(as_text=True)[:300])
    assert response.mimetype == "application/json"
    body = response.get_json()
    if response.status_code >= 400:
        assert set(body["error"]) == {"code", "message"}
    return body


def still_serving(client):
    r = client.post("/api/v1/classify", data=photo_bytes("zidane.jpg"), content_type="image/jpeg")
    assert r.status_code == 200


@FUZZ
@given(body=st.binary(max_size=2048), content_type=st.sampled_from(CONTENT_TYPES), which=st.integers(0, 2))
def test_random_bodies(client, endpoints, body, content_type, which):
    check(client.post(f"/api/v1/{endpoints[which % len(endpoints)]}", data=body, content_type=content_type))


def _mutate(data: bytes, ops, rng_bytes: bytes) -> bytes:
    data = bytearray(data)
    for op, position, value in ops:
        if not data:
            break
        i = position % len(data)
        if op == "flip":
            data[i] ^= value or 1
        elif op == "cut":
            del data[i:]
        elif op == "insert":
            data[i:i] = rng_bytes[: (value % 64) + 1]
        elif op == "delete":
            del data[i:i + (value % 32) + 1]
    return bytes(data)


@FUZZ
@given(which=st.integers(0, 4), ops=st.lists(st.tuples(st.sampled_from(["flip", "cut", "insert", "delete"]),
                                                       st.integers(0, 10**6), st.integers(0, 255)),
                                             min_size=1, max_size=6),
       noise=st.binary(min_size=64, max_size=64), endpoint=st.integers(0, 2))
def test_mutated_images(client, endpoints, seeds, which, ops, noise, endpoint):
    data = _mutate(seeds[which], ops, noise)
    check(client.post(f"/api/v1/{endpoints[endpoint % len(endpoints)]}", data=data,
                      content_type="application/octet-stream"))


def _png(width: int, height: int, bit_depth: int, color_type: int, idat: bytes) -> bytes:
    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


@FUZZ
@given(width=st.integers(0, 2**31 - 1), height=st.integers(0, 2**31 - 1),
       bit_depth=st.sampled_from([1, 2, 4, 8, 16, 3]), color_type=st.sampled_from([0, 2, 3, 4, 6, 5]),
       payload=st.binary(max_size=256), compress=st.booleans())
def test_png_headers(client, width, height, bit_depth, color_type, payload, compress):
    """Valid-CRC PNGs with any declared size and sample format: pixel limit, then decode errors."""
    body = _png(width, height, bit_depth, color_type, zlib.compress(payload) if compress else payload)
    check(client.post("/api/v1/classify", data=body, content_type="image/png"))


TEXT = st.text(max_size=24)
PARAMS = st.fixed_dictionaries({}, optional={
    "score": st.one_of(TEXT, st.floats(allow_nan=True, allow_infinity=True).map(str)),
    "iou": st.one_of(TEXT, st.floats(-2, 2).map(str)),
    "max_det": st.one_of(TEXT, st.integers(-10, 10**12).map(str)),
    "top_k": st.one_of(TEXT, st.integers(-10, 10**6).map(str)),
    "model": st.one_of(TEXT, st.sampled_from(["yolov5n", "efficientnet-lite0", "handpose", "nope", ".", ".."])),
    "variant": st.one_of(TEXT, st.sampled_from(["full", "lite"])),
})


@FUZZ
@given(params=PARAMS, endpoint=st.integers(0, 2), as_form=st.booleans())
def test_parameters(client, endpoints, params, endpoint, as_form):
    image = photo_bytes("zidane.jpg")
    path = f"/api/v1/{endpoints[endpoint % len(endpoints)]}"
    if as_form:
        response = client.post(path, data={"image": (io.BytesIO(image), "z.jpg"), **params},
                               content_type="multipart/form-data")
    else:
        response = client.post(path, query_string=params, data=image, content_type="image/jpeg")
    check(response)


@FUZZ
@given(field=st.sampled_from(["image", "Image", "file", ""]), filename=st.text(max_size=40),
       part_type=st.sampled_from(["image/jpeg", "text/plain", "application/octet-stream", ""]),
       payload=st.one_of(st.binary(max_size=512), st.just(b"REAL")), extra=st.dictionaries(TEXT, TEXT, max_size=3))
def test_multipart_layouts(client, field, filename, part_type, payload, extra):
    if payload == b"REAL":
        payload = photo_bytes("zidane.jpg")
    data = {**extra, field: (io.BytesIO(payload), filename, part_type or None)}
    check(client.post("/api/v1/classify", data=data, content_type="multipart/form-data"))


def test_still_serving_after_fuzzing(client):
    still_serving(client)
