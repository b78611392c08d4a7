"""The production server as an attacker meets it: `python -m server.front` (HAProxy in front
of gunicorn, 2 workers) on a loopback port, real sockets.

- 64 stalled uploads (headers + a few body bytes, then nothing) starve nothing: /healthz
  answers in < 1 s and a detect of a small JPEG in < 3 s while they are open; each is then
  cut off after DATARAILROAD_SEND_TIMEOUT (3 s here; 30 s by default) with a 408 JSON; a
  client that sends nothing at all is closed without an answer.
- A truncated .tflite answers 503 for its model only, the workers do not crash.
- Malformed requests are refused by HAProxy: a request it cannot parse (bad request line,
  header name, chunk) with its own short 400; a parsed one over a limit (414, 431, 413) with
  the API's JSON; a duplicate image part is the app's 400.
"""
from __future__ import annotations

import http.client
import io
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.models import edit_manifest, install_copy, truncate
from harness.photos import photo_bytes, png_bomb
from harness.servers import ProductionServer, multipart

IDLE = 3.0
STALLED = 64
UPLOAD_LIMIT = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def served(api_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hardening-models")
    detect = "yolov5n" if "yolov5n" in api_models else None
    for model_id in filter(None, ["efficientnet-lite0", detect]):
        install_copy(api_models[model_id], folder, model_id)
    truncate(install_copy(api_models["efficientnet-lite0"], folder, "truncated") / "model.tflite")
    crashing = install_copy(api_models["efficientnet-lite0"], folder, "crashing", digests=False)
    size = truncate(crashing / "model.tflite")
    edit_manifest(crashing, lambda m: m["files"].update({"model.tflite": size}))
    srv = ProductionServer(folder, 2, log="hardening_front.log",
                   env={"DATARAILROAD_IDLE_TIMEOUT": str(IDLE), "DATARAILROAD_SEND_TIMEOUT": str(IDLE),
                                "DATARAILROAD_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT)})
    srv.detect = detect
    yield srv
    srv.stop()


def small_jpeg() -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (40, 90, 200)).save(buf, "JPEG")
    return buf.getvalue()


def timed(server: ProductionServer, method: str, path: str, body=None, headers=None):
    t0 = time.perf_counter()
    status, ctype, data = server.request(method, path, body, headers, timeout=30)
    return status, ctype, data, time.perf_counter() - t0


def raw(server: ProductionServer, data: bytes, half_close: bool = False, timeout: float = 15.0) -> bytes:
    """Send bytes as they are; the whole answer up to the server's close."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return read_all(s)


def read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def json_error(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), answer[:300]
    return int(head.split()[1]), json.loads(body)["error"]


def test_stalled_uploads_starve_nothing_and_are_cut_off(served):
    jpeg = {"Content-Type": "image/jpeg"}
    # By name: "crashing" and "truncated" are classifiers too (and sort first).
    path = f"/api/v1/detect?model={served.detect}" if served.detect else "/api/v1/classify?model=efficientnet-lite0"
    image = small_jpeg()
    # Concurrent warm-up, so both workers have loaded the model: time the requests only.
    with ThreadPoolExecutor(8) as pool:
        assert {r[0] for r in pool.map(lambda _: timed(served, "POST", path, image, jpeg), range(8))} == {200}
    workers = served.workers()
    stalled = []
    for _ in range(STALLED):
        s = socket.create_connection(("127.0.0.1", served.port), timeout=30)
        s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                  "Content-Length: 100000\r\n\r\n".encode() + image[:16])
        stalled.append(s)
    silent = socket.create_connection(("127.0.0.1", served.port), timeout=30)
    opened = time.monotonic()
    try:
        health = timed(served, "GET", "/healthz")
        inference = timed(served, "POST", path, image, jpeg)
        measured = time.monotonic() - opened
        assert health[0] == 200 and health[3] < 1.0, health
        assert inference[0] == 200 and inference[3] < 3.0, inference[:2] + inference[3:]
        print(f"\nwith {STALLED} stalled uploads: healthz {health[3] * 1e3:.1f} ms, "
              f"{path} {inference[3] * 1e3:.1f} ms")
        if measured < IDLE - 0.5:  # the stalled uploads were still held while we measured
            stalled[0].setblocking(False)
            with pytest.raises(BlockingIOError):
                stalled[0].recv(1)
            stalled[0].setblocking(True)
            stalled[0].settimeout(30)
        for s in stalled:
            status, error = json_error(read_all(s))
            assert status == 408 and error["code"] == "request_timeout", error
        assert read_all(silent) == b""  # nothing sent: closed without an answer
        waited = time.monotonic() - opened
        assert IDLE - 0.5 < waited < IDLE + 10, waited
    finally:
        for s in stalled + [silent]:
            s.close()
    assert served.workers() == workers
    assert timed(served, "GET", "/healthz")[0] == 200


def test_truncated_model_is_503_for_itself_and_workers_survive(served):
    workers = served.workers()
    bus = photo_bytes("bus.jpg")
    for model_id, reason in (("truncated", "bytes, the manifest says"), ("crashing", "not a valid Flatbuffer")):
        for _ in range(4):  # both workers, twice each (a crash used to restart the worker every time)
            status, ctype, body = served.request("POST", f"/api/v1/classify?model={model_id}", bus,
                                                 {"Content-Type": "image/jpeg"})
            assert (status, ctype) == (503, "application/json"), body[:300]
            assert reason in json.loads(body)["error"]["message"]
    status, _, body = served.request("POST", "/api/v1/classify?model=efficientnet-lite0", bus,
                                     {"Content-Type": "image/jpeg"})
    assert status == 200 and json.loads(body)["top"]
    status, _, body = served.request("GET", "/readyz")
    states = {m["id"]: m["status"] for m in json.loads(body)["models"]}
    assert status == 503 and states["truncated"] == states["crashing"] == "broken"
    assert states["efficientnet-lite0"] == "ready"
    assert served.workers() == workers, "a worker died"


CHUNKED = (b"POST /api/v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
           b"Transfer-Encoding: chunked\r\n\r\n")


# What HAProxy can't parse gets its own short 400 (HTML: there is no request to answer as the
# API); the connection is closed after it.
@pytest.mark.parametrize("name, data, half_close", [
    ("chunk size zz", CHUNKED + b"zz\r\nabc\r\n0\r\n\r\n", False),
    ("chunk without terminator", CHUNKED + b"3\r\nabcXY0\r\n\r\n", False),
    ("bad request line", b"GARBAGE\r\n\r\n", False),
    ("bad header name", b"GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", False),
    ("too many headers", b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
     + b"".join(b"X-H%d: v\r\n" % i for i in range(200)) + b"\r\n", False),
])
def test_unparsable_requests_are_400(served, name, data, half_close):
    answer = raw(served, data, half_close)
    assert answer.startswith(b"HTTP/1.1 400 "), (name, answer[:200])
    assert served.request("GET", "/healthz")[0] == 200


@pytest.mark.parametrize("name, data", [
    ("cut mid-chunk", CHUNKED + b"100\r\nabc"),
    ("body shorter than Content-Length", b"POST /api/v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
     b"Content-Length: 1000\r\n\r\nabc"),
])
def test_a_body_cut_short_never_reaches_the_app(served, name, data):
    """The client ends its side before the body is whole: HAProxy, still waiting for the body,
    closes the connection (nobody is left to read an answer); the app never sees a part-body."""
    assert raw(served, data, half_close=True) == b"", name
    assert served.request("GET", "/healthz")[0] == 200


@pytest.mark.parametrize("name, data, half_close, status, code", [
    ("headers too large", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", False, 431,
     "request_header_fields_too_large"),
    ("URL too long", b"GET /healthz?" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", False, 414, "uri_too_long"),
    ("upload far over the limit, refused before its body", b"POST /api/v1/classify HTTP/1.1\r\nHost: x\r\n"
     b"Content-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % (2 * UPLOAD_LIMIT), False, 413, "payload_too_large"),
    ("upload just over the limit, read whole", b"POST /api/v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg"
     b"\r\nContent-Length: %d\r\n\r\n" % (UPLOAD_LIMIT + 1) + b"a" * (UPLOAD_LIMIT + 1), False, 413, "payload_too_large"),
    ("chunked upload over the limit", CHUNKED + b"%x\r\n" % (UPLOAD_LIMIT + 10) + b"a" * (UPLOAD_LIMIT + 10)
     + b"\r\n0\r\n\r\n", False, 413, "payload_too_large"),
])
def test_refusals_of_a_parsed_request_are_json(served, name, data, half_close, status, code):
    got_status, error = json_error(raw(served, data, half_close))
    assert (got_status, error["code"]) == (status, code), (name, error)
    assert error["message"]
    assert served.request("GET", "/healthz")[0] == 200


def test_duplicate_image_part_and_form_limits_over_http(served):
    bus = photo_bytes("bus.jpg")
    body, ctype = multipart(bus)
    boundary = ctype.split("boundary=")[1]
    twice = body.replace(f"--{boundary}--".encode(), b"") + body
    status, _, answer = served.request("POST", "/api/v1/classify", twice, {"Content-Type": ctype})
    assert status == 400 and json.loads(answer)["error"]["code"] == "duplicate_image"
    big_field, ctype = multipart(bus, {"top_k": "1" * 600_000})  # a text field over MAX_FORM_MEMORY_SIZE
    status, _, answer = served.request("POST", "/api/v1/classify", big_field, {"Content-Type": ctype})
    error = json.loads(answer)["error"]
    assert status == 413 and error["code"] == "form_too_large" and "DATARAILROAD_MAX_UPLOAD_BYTES" not in error["message"]


def test_headers_of_api_answers_and_pages(served):
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=30)
    try:
        for path in ("/api/v1/models", "/healthz", "/api/v1/nothing"):
            conn.request("GET", path)
            response = conn.getresponse()
            response.read()
            assert response.getheader("Cache-Control") == "no-store", path
        conn.request("GET", "/")
        response = conn.getresponse()
        response.read()
        assert response.getheader("X-Frame-Options") == "DENY"
        assert "frame-ancestors 'none'" in response.getheader("Content-Security-Policy")
    finally:
        conn.close()


def test_cluster_ingress_bounds_the_bodies_it_holds():
    """The cluster's ingress reads bodies whole before the app (Ray's HAProxy passes them
    through): their total is capped (DATARAILROAD_BUFFER_BYTES), past which a new body is a 503
    until others are answered."""
    from server.cluster.app import BodyBudget
    from server.errors import Problem

    budget = BodyBudget(1000)
    budget.take(600)
    with pytest.raises(Problem) as busy:
        budget.take(600)
    assert busy.value.status == 503 and busy.value.code == "server_busy"
    budget.give_back(600)
    budget.take(600)
    assert budget.held == 600


def test_pixel_limit_413_cites_our_setting(api_models):
    """Past the pixel limit, and far past it (where Pillow itself refuses the file), the 413
    names DATARAILROAD_MAX_IMAGE_PIXELS, not Pillow's limit."""
    from server import create_app

    client = create_app({"MODELS_DIR": next(iter(api_models.values())).parent, "TESTING": True}).test_client()
    for bomb in (png_bomb(8000, 8000), png_bomb(20000, 20000)):  # 64 M pixels; 400 M (Pillow's bomb error)
        response = client.post("/api/v1/classify", data=bomb, headers={"Content-Type": "image/png"})
        error = response.get_json()["error"]
        assert response.status_code == 413 and error["code"] == "image_too_large"
        assert "DATARAILROAD_MAX_IMAGE_PIXELS" in error["message"] and "DOS" not in error["message"], error
