"""Slow and stalled clients against the server as `make serve` runs it, under load, and the
same against another revision's server, side by side in one run (--against REV).

Opened together, on a server with 2 workers and the default timeouts:
  - STALLED uploads: headers and 16 bytes of a 100 KB body, then nothing;
  - SLOWLORIS clients: part of the headers, then nothing;
  - READERS slow readers: GET /models/yolov5n/model.tflite (8 MB), then nothing read;
while CLIENTS clients post detects (bus.jpg) and GET /healthz for --seconds. Printed: when
each kind was cut (s after opening; a reader counts as cut once the server holds nothing of
its connection), how many were still held at the end, the load's answers and errors, and the
/healthz median under load.

usage: .venv/bin/python -m bench.front [--against 8624696] [--models DIR] [--seconds 45]
       [--wait 80] [--out bench/results/front.json]
--models must hold a yolov5n build (default ./models). --against starts that revision's
server (its gunicorn.conf.py, from a git worktree) with this venv's gunicorn.
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench._results import add_out_option, write_results
from harness.photos import photo_bytes
from harness.servers import ProductionServer, free_port, holds_connection

ROOT = Path(__file__).resolve().parent.parent
STALLED, SLOWLORIS, READERS, CLIENTS = 64, 64, 20, 16


class Revision:
    """Another revision's server: `gunicorn -c gunicorn.conf.py` in a worktree of ``rev``."""

    def __init__(self, rev: str, models: Path):
        self.folder = Path(tempfile.mkdtemp(prefix="front-bench-"))
        subprocess.run(["git", "worktree", "add", "--detach", str(self.folder), rev], cwd=ROOT, check=True,
                       capture_output=True)
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(Path(sys.executable).parent / "gunicorn"), "-c", "gunicorn.conf.py", "--bind",
             f"127.0.0.1:{self.port}", "--workers", "2", "--access-logfile", "/dev/null", "server:create_app()"],
            cwd=self.folder, env={**os.environ, "DATARAILROAD_MODELS": str(models), "PYTHONPATH": str(self.folder)},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        for _ in range(600):
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    if s.recv(12).endswith(b"200"):
                        return
            except OSError:
                time.sleep(0.5)
        raise RuntimeError(f"{rev}'s server did not start")

    def stop(self):
        os.killpg(self.proc.pid, 15)
        self.proc.wait(30)
        subprocess.run(["git", "worktree", "remove", "--force", str(self.folder)], cwd=ROOT, check=False)


def request(port: int, raw: bytes, rcvbuf: int | None = None) -> socket.socket:
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(120)
    s.connect(("127.0.0.1", port))
    s.sendall(raw)
    return s


def ended(s: socket.socket, since: float) -> float | None:
    """Seconds until the server ended the connection (its answer and close, or a reset)."""
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass
    return time.monotonic() - since


def load(port: int, seconds: float, jpeg: bytes) -> dict:
    import http.client

    outcomes: dict = {}
    healthz: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client(_):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while time.monotonic() < end:
            for method, path, body in (("POST", "/api/v1/detect", jpeg), ("GET", "/healthz", None)):
                t0 = time.perf_counter()
                try:
                    conn.request(method, path, body=body, headers={"Content-Type": "image/jpeg"} if body else {})
                    response = conn.getresponse()
                    response.read()
                    outcome = response.status
                except OSError as exc:
                    outcome = type(exc).__name__
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
                with lock:
                    outcomes[outcome] = outcomes.get(outcome, 0) + 1
                    if path == "/healthz" and outcome == 200:
                        healthz.append((time.perf_counter() - t0) * 1e3)
        conn.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return {"answers": outcomes, "healthz_median_ms": statistics.median(healthz) if healthz else None}


def attack(port: int, seconds: float, wait: float) -> dict:
    jpeg = photo_bytes("bus.jpg")
    opened = time.monotonic()
    stalled = [request(port, b"POST /api/v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                             b"Content-Length: 100000\r\n\r\n" + jpeg[:16]) for _ in range(STALLED)]
    slowloris = [request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ") for _ in range(SLOWLORIS)]
    readers = [request(port, b"GET /models/yolov5n/model.tflite HTTP/1.1\r\nHost: x\r\n\r\n", rcvbuf=4096)
               for _ in range(READERS)]
    reader_cut: dict[int, float] = {}

    def watch_readers():
        while len(reader_cut) < READERS and time.monotonic() - opened < wait:
            for i, s in enumerate(readers):
                if i not in reader_cut and not holds_connection(port, s):
                    reader_cut[i] = time.monotonic() - opened
            time.sleep(0.1)

    with ThreadPoolExecutor(3) as pool:
        cut_stalled = pool.submit(lambda: [ended(s, opened) for s in stalled])
        cut_slowloris = pool.submit(lambda: [ended(s, opened) for s in slowloris])
        watcher = pool.submit(watch_readers)
        under_load = load(port, seconds, jpeg)
        watcher.result()
        stalled_times, slowloris_times = cut_stalled.result(), cut_slowloris.result()
    # The client's view: a reader whose server side was dropped silently (no reset reached it)
    # still sees its connection open until it sends.
    connected = sum(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] == 1 for s in readers)
    for s in stalled + slowloris + readers:
        s.close()

    def span(times):
        return [round(min(times), 1), round(max(times), 1)] if times else None

    return {"stalled_cut_s": span(stalled_times), "slowloris_cut_s": span(slowloris_times),
            "readers_cut_s": span(list(reader_cut.values())), "readers_held_at_end": READERS - len(reader_cut),
            "readers_connected_client_side_at_end": connected,
            **under_load}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=str(ROOT / "models"))
    parser.add_argument("--against", help="another revision's server to run the same against (e.g. 8624696)")
    parser.add_argument("--seconds", type=float, default=45, help="the load's length")
    parser.add_argument("--wait", type=float, default=80, help="how long to watch the slow readers")
    add_out_option(parser, "front")
    args = parser.parse_args()
    models = Path(args.models)
    if not (models / "yolov5n" / "manifest.json").is_file():
        print(f"no yolov5n build in {models}: make models", file=sys.stderr)
        return 2
    report = {}
    front = ProductionServer(models, 2, log="bench_front.log")
    try:
        report["front"] = attack(front.port, args.seconds, args.wait)
    finally:
        front.stop()
    if args.against:
        other = Revision(args.against, models)
        try:
            report[args.against] = attack(other.port, args.seconds, args.wait)
        finally:
            other.stop()
    print(f"{STALLED} stalled uploads, {SLOWLORIS} slowloris, {READERS} slow readers opened at once; "
          f"{CLIENTS} clients' load for {args.seconds:.0f} s; defaults (2 workers)")
    for name, r in report.items():
        print(f"{name:>10}: stalled cut {r['stalled_cut_s']} s, slowloris cut {r['slowloris_cut_s']} s, readers cut "
              f"{r['readers_cut_s']} s ({r['readers_held_at_end']} still held by the server, "
              f"{r['readers_connected_client_side_at_end']} open on the client's side at {args.wait:.0f} s); load "
              f"{r['answers']}, /healthz median {r['healthz_median_ms']:.1f} ms")
    write_results("front", args, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
