"""The app on a local 2-node Ray Serve cluster (server/cluster): the same pages, answers and
4xx errors as the Flask app, model replicas on both nodes (Ray's state API), and a replica
killed mid-load costs at most the requests it held before Serve brings it back.

One cluster for the module (about 30 s to start); ports 8431 (HTTP), 6392-6393 (GCS,
dashboard), 10400-10599 (nodes)."""
from __future__ import annotations

import os
import shutil
import signal
import threading
import time

import pytest

pytest.importorskip("ray.serve")
requests = pytest.importorskip("requests")

from server import create_app  # noqa: E402
from harness.models import need  # noqa: E402
from harness.photos import photo_bytes, png_bomb  # noqa: E402

HTTP_PORT, RAY_PORT, NODE_PORTS = 8431, 6392, 10400
UPLOAD_LIMIT = 2 * 1024 * 1024  # both apps: a smaller limit keeps the 413 case light
PHOTOS = ("bus.jpg", "zidane.jpg")
DETECT_MAX_ONGOING = 4  # serve.yaml: requests one detect replica holds at most
INGRESS_THREADS = 16  # serve.yaml's wsgi_threads
IDLE_TIMEOUT = 3  # seconds a body may stall (15 by default): keeps the stall test short


@pytest.fixture(scope="module")
def models_folder(api_models):
    return next(iter(api_models.values())).parent


@pytest.fixture(scope="module")
def cluster(models_folder):
    from server.cluster.local import LocalCluster, down

    down(RAY_PORT)  # leftovers of an interrupted run
    c = LocalCluster(nodes=2, http_port=HTTP_PORT, ray_port=RAY_PORT, node_ports=NODE_PORTS,
                     models_dir=str(models_folder), env={"DATARAILROAD_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT),
                                                         "DATARAILROAD_IDLE_TIMEOUT": str(IDLE_TIMEOUT)})
    c.up({"detect": {"num_replicas": 2}})  # no autoscaling: the replica count is asserted below
    yield c
    down(RAY_PORT)


@pytest.fixture(scope="module")
def flask_client(models_folder):
    return create_app({"MODELS_DIR": models_folder, "TESTING": True, "MAX_CONTENT_LENGTH": UPLOAD_LIMIT}).test_client()


def without_timing(body):
    if isinstance(body, dict):
        return {k: without_timing(v) for k, v in body.items() if k != "timing_ms"}
    return body


def cluster_post(cluster, path, **kwargs):
    return requests.post(f"{cluster.url}{path.lstrip('/')}", timeout=60, **kwargs)


def flask_post(client, path, data=None, files=None, headers=None, params=None):
    """The same request on Flask's test client (multipart as requests would build it)."""
    if files or (data is not None and isinstance(data, dict)):
        prepared = requests.Request("POST", "http://x" + path, data=data, files=files, params=params).prepare()
        return client.post(prepared.path_url, data=prepared.body, headers=dict(prepared.headers))
    query = requests.Request("GET", "http://x" + path, params=params).prepare().path_url
    return client.post(query, data=data, headers=headers or {})


def assert_same(cluster_response, flask_response):
    assert cluster_response.status_code == flask_response.status_code, cluster_response.text[:300]
    assert cluster_response.headers["Content-Type"] == flask_response.headers["Content-Type"]
    if flask_response.mimetype == "application/json":
        assert without_timing(cluster_response.json()) == without_timing(flask_response.get_json())
    else:
        assert cluster_response.content == flask_response.get_data()


# ---------------------------------------------------------------------------- same answers

def api_cases(api_models):
    cases = [("classify", {"top_k": "3"}), ("hands", {}), ("hands", {"detect_score": "0.3", "variant": "lite"})]
    if "yolov5n" in api_models:
        cases += [("detect", {}), ("detect", {"score": "0.5", "max_det": "3"})]
    return cases


@pytest.mark.parametrize("photo", PHOTOS)
def test_photos_answer_as_the_flask_api(cluster, flask_client, api_models, photo):
    data = photo_bytes(photo)
    for endpoint, params in api_cases(api_models):
        path = f"/api/v1/{endpoint}"
        raw = cluster_post(cluster, path, data=data, params=params, headers={"Content-Type": "image/jpeg"})
        assert_same(raw, flask_post(flask_client, path, data=data, params=params,
                                    headers={"Content-Type": "image/jpeg"}))
        assert raw.status_code == 200
        multipart = cluster_post(cluster, path, data=params, files={"image": (photo, data, "image/jpeg")})
        assert_same(multipart, flask_post(flask_client, path, data=params,
                                          files={"image": (photo, data, "image/jpeg")}))
        assert without_timing(multipart.json()) == without_timing(raw.json())


def test_a_photo_bigger_than_grpcs_default_message_answers_as_the_flask_api(cluster, flask_client, api_models):
    """A decoded upload travels to the model replica in one gRPC message (serve.env's
    throughput mode): 2400x1800 RGB is 13 MB, past gRPC's default limit of 4 MB, which
    serve.env's RAY_SERVE_REPLICA_GRPC_MAX_MESSAGE_LENGTH raises."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(photo_bytes("zidane.jpg"))) as im:
        big = io.BytesIO()
        im.convert("RGB").resize((2400, 1800)).save(big, "JPEG", quality=70)
    data = big.getvalue()
    assert len(data) < UPLOAD_LIMIT
    endpoint = "detect" if "yolov5n" in api_models else "classify"
    got = cluster_post(cluster, f"/api/v1/{endpoint}", data=data, headers={"Content-Type": "image/jpeg"})
    assert got.status_code == 200, got.text[:300]
    assert_same(got, flask_post(flask_client, f"/api/v1/{endpoint}", data=data, headers={"Content-Type": "image/jpeg"}))


def test_pages_files_and_documents_as_the_flask_app(cluster, flask_client, api_models):
    model = next(iter(api_models))
    paths = ["/", "/detect", "/classify", "/hands", "/healthz", "/readyz", "/api/v1/models",
             "/api/v1/openapi.json", f"/models/{model}/manifest.json", "/static/js/contract/decode.js",
             "/no-such-page", "/models/no-such-model/manifest.json"]
    for path in paths:
        got = requests.get(f"{cluster.url}{path.lstrip('/')}", timeout=30, headers={"Accept": "text/html"})
        want = flask_client.get(path, headers={"Accept": "text/html"})
        assert got.status_code == want.status_code, path
        assert got.headers["Content-Type"] == want.headers["Content-Type"], path
        assert got.content == want.get_data(), path
        for name in ("Content-Security-Policy", "Cross-Origin-Embedder-Policy", "X-Content-Type-Options"):
            assert got.headers.get(name) == want.headers.get(name), (path, name)


def test_bad_input_keeps_the_flask_api_errors(cluster, flask_client, api_models):
    bus = photo_bytes("bus.jpg")
    jpeg = {"Content-Type": "image/jpeg"}
    cases = [  # (path, data, headers, params)
        ("/api/v1/classify", b"", jpeg, None),
        ("/api/v1/classify", b"not an image at all", jpeg, None),
        ("/api/v1/classify", bus[: len(bus) // 3], jpeg, None),
        ("/api/v1/classify", bus, {"Content-Type": "text/plain"}, None),
        ("/api/v1/classify", bus, jpeg, {"top_k": "0"}),
        ("/api/v1/classify", bus, jpeg, {"model": "no-such-model"}),
        ("/api/v1/classify", bus, jpeg, {"model": "handpose"}),
        ("/api/v1/hands", bus, jpeg, {"variant": "huge"}),
        *([("/api/v1/detect", bus, jpeg, {"score": "2"})] if "yolov5n" in api_models else []),
        ("/api/v1/classify", png_bomb(), {"Content-Type": "image/png"}, None),
        ("/api/v1/classify", b"\xff" * (UPLOAD_LIMIT + 1), jpeg, None),
    ]
    for path, data, headers, params in cases:
        got = cluster_post(cluster, path, data=data, headers=headers, params=params)
        want = flask_post(flask_client, path, data=data, headers=headers, params=params)
        assert 400 <= want.status_code < 500, (path, params, want.status_code)
        assert_same(got, want)
    # Over the limit without a Content-Length (chunked): 413 as well, and the next request works.
    chunked = cluster_post(cluster, "/api/v1/classify", data=iter([b"\xff" * 65536] * 40), headers=jpeg)
    assert chunked.status_code == 413 and chunked.json()["error"]["code"] == "payload_too_large"
    assert requests.get(f"{cluster.url}api/v1/detect", timeout=30).status_code == 405
    assert cluster_post(cluster, "/api/v1/classify", data=bus, headers=jpeg).status_code == 200


# ---------------------------------------------------------------------------- placement and failover

def replicas(cluster, deployment: str):
    from ray.util.state import list_actors

    actors = list_actors(address=cluster.dashboard, filters=[("state", "=", "ALIVE")], raise_on_missing_output=False)
    return [a for a in actors if a.class_name == f"ServeReplica:datarailroad:{deployment}"]


def test_stalled_uploads_hold_no_ingress_thread(cluster):
    """More stalled uploads than the ingress has threads: the others are still answered at
    once, and each stalled one gets the Flask API's 408 JSON after the idle timeout
    (app.bodies_read_first; without it /healthz went unanswered for 100 s)."""
    import http.client
    import json
    import socket

    stalled = []
    for _ in range(INGRESS_THREADS + 4):
        sock = socket.create_connection(("127.0.0.1", cluster.http_port), timeout=60)
        sock.sendall(b"POST /api/v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                     b"Content-Length: 100000\r\n\r\n" + photo_bytes("bus.jpg")[:1000])
        stalled.append(sock)
    try:
        time.sleep(1)
        t0 = time.monotonic()
        assert requests.get(f"{cluster.url}healthz", timeout=30).status_code == 200
        assert cluster_post(cluster, "/api/v1/classify", data=photo_bytes("bus.jpg"),
                            headers={"Content-Type": "image/jpeg"}).status_code == 200
        assert time.monotonic() - t0 < IDLE_TIMEOUT, "the other requests waited for the stalled ones"
        for sock in stalled:
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert response.status == 408
            assert json.loads(response.read())["error"]["code"] == "request_timeout"
    finally:
        for sock in stalled:
            sock.close()


def test_model_replicas_run_on_both_nodes(cluster):
    from ray.util.state import list_nodes

    nodes = {n.node_id for n in list_nodes(address=cluster.dashboard, filters=[("state", "=", "ALIVE")])}
    assert len(nodes) == 2
    detect = replicas(cluster, "detect")
    assert len(detect) == 2
    assert {a.node_id for a in detect} == nodes
    models = [a for task in ("detect", "classify", "handpose") for a in replicas(cluster, task)]
    assert {a.node_id for a in models} == nodes


def test_killed_replica_loses_only_its_requests_and_comes_back(cluster, api_models):
    need(api_models, "yolov5n")
    data = photo_bytes("bus.jpg")
    results: list[tuple[float, int, dict | None]] = []
    stop = threading.Event()

    def client():
        with requests.Session() as session:
            while not stop.is_set():
                r = session.post(f"{cluster.url}api/v1/detect", data=data, headers={"Content-Type": "image/jpeg"},
                                 timeout=120)
                body = r.json() if r.headers.get("Content-Type") == "application/json" else None
                results.append((time.monotonic(), r.status_code, body))

    before = replicas(cluster, "detect")
    victim = next((a for a in before if a.node_id != before[0].node_id), before[-1])
    threads = [threading.Thread(target=client) for _ in range(6)]  # more than one replica holds
    for t in threads:
        t.start()
    try:
        time.sleep(4)
        killed_at = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        back = None
        deadline = killed_at + 90
        while time.monotonic() < deadline:
            now = replicas(cluster, "detect")
            if len(now) == 2 and victim.pid not in {a.pid for a in now}:
                back = time.monotonic()
                break
            time.sleep(1)
        assert back is not None, "Serve did not bring the killed replica back"
        time.sleep(3)  # load on the restored deployment
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    failed = [(s, b) for _, s, b in results if s != 200]
    assert len(failed) <= DETECT_MAX_ONGOING, failed
    for status, body in failed:  # those the replica held: a JSON 503 the client may retry
        assert status == 503 and body["error"]["code"] == "unavailable", (status, body)
    assert sum(1 for t, s, _ in results if t < killed_at and s == 200) > 0
    assert sum(1 for t, s, _ in results if t > back and s == 200) > 0


def test_cluster_stop_ends_a_process_known_only_by_its_open_files(tmp_path):
    """Ray's agents overwrite their environment block (the marker) with their process title
    and can outlive their raylet: down() also ends processes holding a file in the cluster's
    temp dirs (seen: a DashboardAgent and a RuntimeEnvAgent left running after a stop)."""
    import json
    import subprocess
    import sys

    from server.cluster.local import STATE_ROOT, cluster_processes, down

    ray_port = 6399  # no cluster: only this test's state dir
    state_dir = STATE_ROOT / str(ray_port)
    state_dir.mkdir(parents=True, exist_ok=True)
    node_dir = tmp_path / "n0"
    node_dir.mkdir()
    (state_dir / "cluster.json").write_text(json.dumps({"started": [str(node_dir)]}))
    log = node_dir / "agent.log"
    env = {k: v for k, v in os.environ.items() if k != "DATARAILROAD_CLUSTER"}
    agent = subprocess.Popen([sys.executable, "-c", f"import time; f = open({str(log)!r}, 'w'); "
                              "f.write('up'); f.flush(); time.sleep(120)"], env=env)
    try:
        deadline = time.monotonic() + 30
        while not (log.exists() and log.read_text() == "up") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert agent.pid in cluster_processes(state_dir)
        assert down(ray_port) == 1
        assert agent.wait(timeout=15) is not None
        assert not node_dir.exists()
    finally:
        agent.kill()
        shutil.rmtree(state_dir, ignore_errors=True)
