"""A bounded load test through the production front (HAProxy + gunicorn) on 127.0.0.1 (random port): 8 concurrent clients post
a mix of detect / classify / hands requests for DATARAILROAD_LOAD_SECONDS (default 20; the
issue's figure is 60) after a concurrent warm-up. Passes with 0 errors and flat worker
memory (RSS per worker at start and end, written to test-artifacts/api_load.json).

Also checks, against the real server, that uploads over the size limit get a 413 JSON for
Content-Length, multipart and chunked bodies."""
from __future__ import annotations

import http.client
import json
import os
import re
import threading
import time

import pytest

from harness.paths import ARTIFACTS
from harness.photos import photo_bytes
from harness.servers import ProductionServer, multipart, proc_stat, rss_mb

SECONDS = float(os.environ.get("DATARAILROAD_LOAD_SECONDS", 20))
WARMUP_SECONDS = float(os.environ.get("DATARAILROAD_LOAD_WARMUP", 5))
CLIENTS = int(os.environ.get("DATARAILROAD_LOAD_CLIENTS", 8))
WORKERS = int(os.environ.get("DATARAILROAD_LOAD_WORKERS", 2))
RSS_GROWTH_LIMIT_MB = 64.0  # per worker; request-to-request noise (malloc arenas) is ~20-30 MB
UPLOAD_LIMIT = 2 * 1024 * 1024


@pytest.fixture(scope="module")
def server(api_models):
    folder = next(iter(api_models.values())).parent
    srv = ProductionServer(folder, WORKERS, env={"DATARAILROAD_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT)}, log="api_front.log")
    yield srv
    srv.stop()


def run_load(server: ProductionServer, seconds: float, clients: int, mix: list) -> dict:
    """clients threads, each with a keep-alive connection, cycling through ``mix`` until the
    deadline. Any non-200 or transport error counts as an error."""
    stop_at = time.time() + seconds
    stats = {"requests": 0, "errors": 0, "error_samples": [], "latencies": []}
    lock = threading.Lock()

    def client(index):
        conn = None
        i = index
        while time.time() < stop_at:
            method, path, body, headers, key = mix[i % len(mix)]
            i += 1
            t0 = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
                ok = response.status == 200 and key in json.loads(data)
                problem = None if ok else f"{path}: {response.status} {data[:120]!r}"
            except (OSError, http.client.HTTPException, ValueError) as exc:
                problem = f"{path}: {type(exc).__name__}: {exc}"
                conn = None
            with lock:
                stats["requests"] += 1
                stats["latencies"].append(time.perf_counter() - t0)
                if problem:
                    stats["errors"] += 1
                    if len(stats["error_samples"]) < 5:
                        stats["error_samples"].append(problem)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return stats


def request_mix(api_models) -> list:
    bus, zidane = photo_bytes("bus.jpg"), photo_bytes("zidane.jpg")
    jpeg = {"Content-Type": "image/jpeg"}
    form, form_type = multipart(bus, {"top_k": "3"})
    mix = [("POST", "/api/v1/classify", zidane, jpeg, "top"),
           ("POST", "/api/v1/hands", zidane, jpeg, "hands"),
           ("POST", "/api/v1/classify", form, {"Content-Type": form_type}, "top"),
           ("POST", "/api/v1/hands", bus, jpeg, "hands"),
           ("GET", "/api/v1/models", None, {}, "models")]
    if "yolov5n" in api_models:
        mix += [("POST", "/api/v1/detect", bus, jpeg, "detections"),
                ("POST", "/api/v1/detect?score=0.4", zidane, jpeg, "detections")]
    return mix


def test_workers_load_every_model_before_they_answer(server, api_models):
    """Ready means loaded: each worker loaded every installed model before its first request
    (gunicorn.conf.py's post_worker_init), and /readyz says so model by model."""
    for pid in server.workers():  # a worker still loading takes no request: the others answer meanwhile
        for _ in range(300):
            log = server.log_path.read_text()
            line = re.search(rf"Worker {pid} loaded (\d+) model\(s\): (.*)", log)
            if line:
                break
            time.sleep(0.2)
        assert line, f"worker {pid} logged no model load in 60 s:\n{log[-2000:]}"
        assert set(line.group(2).split(", ")) >= set(api_models), line.group(0)
    status, _, body = server.request("GET", "/readyz")
    models = json.loads(body)["models"]
    assert status == 200 and {m["id"] for m in models if m.get("loaded")} >= set(api_models), models


def test_load_no_errors_flat_memory(server, api_models):
    mix = request_mix(api_models)
    workers = server.workers()
    # Warm-up under the same load until every worker has loaded every runner: rounds until
    # the workers' total RSS moves by less than 8 MB (at most 8 rounds).
    previous = None
    for _ in range(8):
        warm = run_load(server, WARMUP_SECONDS, CLIENTS, mix)
        assert warm["errors"] == 0, warm["error_samples"]
        total = sum(rss_mb(p) for p in workers)
        if previous is not None and abs(total - previous) < 8:
            break
        previous = total
    start = {pid: rss_mb(pid) for pid in workers}
    samples = []
    sampling = threading.Event()

    def sample():
        while not sampling.wait(2.0):
            samples.append(sum(rss_mb(p) for p in workers))

    sampler = threading.Thread(target=sample)
    sampler.start()
    t0 = time.time()
    stats = run_load(server, SECONDS, CLIENTS, mix)
    elapsed = time.time() - t0
    sampling.set()
    sampler.join()
    end = {pid: rss_mb(pid) for pid in workers}
    assert server.workers() == workers, "a worker died or was replaced during the run"
    latencies = sorted(stats["latencies"])
    report = {
        "seconds": round(elapsed, 1), "clients": CLIENTS, "workers": len(workers),
        "requests": stats["requests"], "errors": stats["errors"], "error_samples": stats["error_samples"],
        "throughput_rps": round(stats["requests"] / elapsed, 2),
        "latency_ms": {"p50": round(latencies[len(latencies) // 2] * 1e3, 1),
                       "p95": round(latencies[int(len(latencies) * 0.95)] * 1e3, 1),
                       "max": round(latencies[-1] * 1e3, 1)} if latencies else None,
        "rss_mb_start": {str(p): round(v, 1) for p, v in start.items()},
        "rss_mb_end": {str(p): round(v, 1) for p, v in end.items()},
        "rss_mb_total_min_max": [round(min(samples), 1), round(max(samples), 1)] if samples else None,
        "mix": [m[1] for m in mix],
    }
    print("\napi load:", json.dumps(report))
    if ARTIFACTS.is_dir():
        (ARTIFACTS / f"api_load_{int(SECONDS)}s.json").write_text(json.dumps(report, indent=1))
    assert stats["errors"] == 0, stats["error_samples"]
    assert stats["requests"] >= CLIENTS
    for pid in workers:
        assert end[pid] - start[pid] < RSS_GROWTH_LIMIT_MB, report


def test_workers_reuse_freed_memory(server, api_models):
    """gunicorn.conf.py's memory.keep_freed_memory(): a request reuses the pages the one before
    it freed. Without it each detect of bus.jpg page-faults its ~18 MB of arrays in again
    (~3400 faults); with it, a warm worker takes next to none."""
    path = "/api/v1/detect" if "yolov5n" in api_models else "/api/v1/classify"
    bus, workers = photo_bytes("bus.jpg"), server.workers()
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    for _ in range(4 * len(workers)):  # warm: every worker's heap has grown to a request's size
        assert server.request("POST", path, bus, {"Content-Type": "image/jpeg"}, conn=conn)[0] == 200
    before = sum(int(proc_stat(p)[7]) for p in workers)
    requests = 10
    for _ in range(requests):
        assert server.request("POST", path, bus, {"Content-Type": "image/jpeg"}, conn=conn)[0] == 200
    conn.close()
    per_request = (sum(int(proc_stat(p)[7]) for p in workers) - before) / requests
    assert per_request < 500, f"{per_request:.0f} page faults per request"


def test_upload_limit_over_real_http(server):
    """413 JSON for Content-Length, multipart and chunked bodies over the limit (the front's);
    a body within the limit still works, chunked included."""
    too_big = b"\xff\xd8" + os.urandom(UPLOAD_LIMIT + 1000)
    status, ctype, body = server.request("POST", "/api/v1/classify", too_big, {"Content-Type": "image/jpeg"})
    assert (status, ctype) == (413, "application/json") and json.loads(body)["error"]["code"] == "payload_too_large"
    form, form_type = multipart(too_big)
    status, ctype, body = server.request("POST", "/api/v1/classify", form, {"Content-Type": form_type})
    assert (status, ctype) == (413, "application/json")

    def chunked(payload: bytes, content_type: str):
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        try:
            conn.putrequest("POST", "/api/v1/classify")
            conn.putheader("Content-Type", content_type)
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            try:
                for i in range(0, len(payload), 65536):
                    piece = payload[i:i + 65536]
                    conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
                conn.send(b"0\r\n\r\n")
            except OSError:
                pass  # the server may answer and close before the whole body is sent
            response = conn.getresponse()
            return response.status, response.getheader("Content-Type"), response.read()
        finally:
            conn.close()

    status, ctype, body = chunked(too_big, "image/jpeg")
    assert (status, ctype) == (413, "application/json"), body[:200]
    status, ctype, body = chunked(form, form_type)
    assert (status, ctype) == (413, "application/json"), body[:200]
    status, _, body = chunked(photo_bytes("bus.jpg"), "image/jpeg")
    assert status == 200 and json.loads(body)["top"]
    small_form, small_type = multipart(photo_bytes("zidane.jpg"))
    status, _, body = chunked(small_form, small_type)
    assert status == 200 and json.loads(body)["top"]
