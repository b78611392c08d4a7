"""Slow readers, refused requests and everything at once, through the production front
(`python -m server.front`: HAProxy in front of gunicorn, as `make serve` runs it) on a loopback
port, real sockets.

- A client that asks for a model file and reads nothing is cut once it has taken no byte for
  DATARAILROAD_SEND_TIMEOUT (2 s here, 30 s by default): the server holds no socket for it
  after that (the kernel drops the unacknowledged rest: ``tcp-ut``), and others are served
  meanwhile; a client that reads slowly but steadily gets its whole answer, however long.
- A request refused before its body was read (a 24 KB request line with a body, an upload
  over the limit with ``Connection: close``) gets its 4xx JSON, not a reset.
- Everything at once: stalled uploads, slowloris clients and slow readers, then load. Each
  attacker is cut within its timeout; no request of the load fails.
"""
from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.models import install_copy
from harness.photos import photo_bytes
from harness.servers import ProductionServer, holds_connection, rss_mb

SEND = 2.0
IDLE = 3.0
UPLOAD_LIMIT = 1024 * 1024
BIG = "/models/efficientnet-lite0/model.tflite"   # 18 MB: more than the front's buffer holds
TCP_ESTABLISHED = 1

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="reads the TCP state (Linux)")


@pytest.fixture(scope="module")
def served(api_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("slow-clients-models")
    install_copy(api_models["efficientnet-lite0"], folder, "efficientnet-lite0")
    srv = ProductionServer(folder, 1, log="slow_clients_front.log",
                           env={"DATARAILROAD_SEND_TIMEOUT": str(SEND), "DATARAILROAD_IDLE_TIMEOUT": str(IDLE),
                                "DATARAILROAD_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT)})
    srv.big_file = folder / "efficientnet-lite0" / "model.tflite"
    yield srv
    srv.stop()


def server_holds(server: ProductionServer, client: socket.socket) -> bool:
    return holds_connection(server.port, client)


def tcp_state(s: socket.socket) -> int:
    """The connection's state in this side's kernel (tcp_info.tcpi_state): 1 established,
    7 closed (a reset came), 8 close-wait (the peer's end came)."""
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def connect(server: ProductionServer, rcvbuf: int | None = None, timeout: float = 10) -> socket.socket:
    s = socket.socket()
    if rcvbuf:  # before connect: the window it advertises stays this small
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(timeout)
    s.connect(("127.0.0.1", server.port))
    return s


def read_to_end(s: socket.socket, most: int = 64 << 20) -> bytes:
    """Everything up to the peer's end (a reset raises), at most ``most`` bytes."""
    out = bytearray()
    for _ in range(100_000):
        chunk = s.recv(65536)
        if not chunk or len(out) >= most:
            break
        out += chunk
    return bytes(out)


def json_error(answer: bytes) -> tuple[int, dict]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower(), answer[:300]
    length = int(next(line.split(b":")[1] for line in head.lower().split(b"\r\n") if line.startswith(b"content-length")))
    assert len(body) == length, (len(body), length)
    return int(head.split()[1]), json.loads(body)["error"]


def wait_cut(server: ProductionServer, clients: list[socket.socket], since: float, most: float) -> list[float]:
    """Seconds from ``since`` until the server held no socket for each client, waiting at most ``most``."""
    cut: dict[int, float] = {}
    while len(cut) < len(clients) and time.monotonic() - since < most:
        for i, s in enumerate(clients):
            if i not in cut and not server_holds(server, s):
                cut[i] = time.monotonic() - since
        time.sleep(0.05)
    assert len(cut) == len(clients), f"{len(clients) - len(cut)} of {len(clients)} still held after {most} s"
    return [cut[i] for i in range(len(clients))]


def test_a_client_that_reads_nothing_is_cut_and_others_are_served(served):
    workers = served.workers()
    readers = []
    for _ in range(4):
        s = connect(served, rcvbuf=4096)
        s.sendall(f"GET {BIG} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        readers.append(s)
    sent = time.monotonic()
    try:
        t0 = time.perf_counter()
        assert served.request("GET", "/healthz", timeout=10)[0] == 200
        status, _, spec = served.request("GET", "/api/v1/openapi.json", timeout=10)
        assert status == 200 and json.loads(spec)["paths"]
        assert time.perf_counter() - t0 < 1.5
        for elapsed in wait_cut(served, readers, sent, SEND + 8):
            assert SEND - 0.3 < elapsed < SEND + 6, elapsed
        for s in readers:  # what it had been sent: never the whole file
            assert tcp_state(s) != TCP_ESTABLISHED or len(read_available(s)) < served.big_file.stat().st_size
    finally:
        for s in readers:
            s.close()
    assert served.workers() == workers
    assert served.request("GET", "/healthz")[0] == 200


def read_available(s: socket.socket) -> bytes:
    """What has arrived, without waiting."""
    s.setblocking(False)
    out = bytearray()
    try:
        while chunk := s.recv(1 << 20):
            out += chunk
    except (BlockingIOError, ConnectionResetError):
        pass
    finally:
        s.setblocking(True)
    return bytes(out)


def test_a_slow_steady_reader_gets_the_whole_answer(served):
    """256 KB (a Range of the model file) read 4 KB at a time, 0.15 s apart (~27 KB/s): the
    server's sends wait on it far longer than the send timeout in all, it is not cut, and the
    end of the answer, left in the kernel when the server closes (Connection: close, after
    its lingering close), still reaches it."""
    size = 256 * 1024
    s = connect(served, rcvbuf=4096)
    try:
        s.sendall(f"GET {BIG} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                  f"Range: bytes=0-{size - 1}\r\n\r\n".encode())
        t0 = time.monotonic()
        data = bytearray()
        for _ in range(2000):
            chunk = s.recv(4096)  # a reset raises: the test fails
            if not chunk:
                break
            data += chunk
            time.sleep(0.15)
        elapsed = time.monotonic() - t0
    finally:
        s.close()
    head, _, body = bytes(data).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 206") and len(body) == size, (head[:200], len(body))
    assert body == served.big_file.read_bytes()[:size]
    assert elapsed > 2 * SEND, elapsed


def send_in_thread(s: socket.socket, data: bytes) -> tuple[threading.Thread, list]:
    """Send ``data`` while the caller reads; the list gets the send's error, if any."""
    errors: list = []

    def run():
        try:
            s.sendall(data)
        except OSError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


@pytest.mark.parametrize("head, body_size, status, code", [
    pytest.param("POST /api/v1/classify?q=" + "a" * 24 * 1024 + " HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                 f"Content-Length: {256 * 1024}\r\n\r\n", 256 * 1024, 414, "uri_too_long",
                 id="24 KB request line and a body"),
    pytest.param("POST /api/v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nConnection: close\r\n"
                 f"Content-Length: {UPLOAD_LIMIT + 2 ** 18}\r\n\r\n", UPLOAD_LIMIT + 2 ** 18, 413, "payload_too_large",
                 id="upload 256 KB over the limit, Connection: close"),
])
def test_a_refused_request_is_answered_not_reset(served, head, body_size, status, code):
    s = connect(served)
    try:
        thread, send_errors = send_in_thread(s, head.encode() + b"x" * body_size)
        answer = read_to_end(s)  # a reset (ConnectionResetError) fails the test
        thread.join(10)
        assert not thread.is_alive() and send_errors == [], send_errors
    finally:
        s.close()
    got_status, error = json_error(answer)
    assert (got_status, error["code"]) == (status, code), error
    assert served.request("GET", "/healthz")[0] == 200


def test_a_refused_client_is_let_go_and_keep_alive_is_not_slowed(served):
    """A client that is refused, reads the answer and then neither sends nor closes is let go
    at once (the front closes after a refusal); requests on a keep-alive connection still
    answer at once."""
    s = connect(served)
    try:
        s.sendall(b"GARBAGE\r\n\r\n")
        # A request HAProxy can't parse gets its own short answer (not the API's JSON: there is
        # no request to answer), then the end of the connection.
        assert read_to_end(s).startswith(b"HTTP/1.1 400 ")
        time.sleep(0.5)
        assert not server_holds(served, s)
    finally:
        s.close()
    conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
    try:
        for _ in range(5):
            t0 = time.perf_counter()
            status, _, _ = served.request("GET", "/healthz", conn=conn)
            assert status == 200 and time.perf_counter() - t0 < 0.5
    finally:
        conn.close()


def test_send_timeout_setting():
    from server.settings import Settings

    assert Settings.from_env({}).send_timeout == 30.0
    assert Settings.from_env({"DATARAILROAD_SEND_TIMEOUT": "2.5"}).send_timeout == 2.5
    with pytest.raises(ValueError, match="DATARAILROAD_SEND_TIMEOUT"):
        Settings.from_env({"DATARAILROAD_SEND_TIMEOUT": "0"})


# ---------------------------------------------------------------------------- everything at once

STALLED, SLOWLORIS, READERS, CLIENTS = 64, 64, 20, 16


@pytest.fixture(scope="module")
def production(api_models, tmp_path_factory):
    """2 workers and the default upload limit (the front's buffer holds 10 MiB): as deployed,
    with short timeouts."""
    from harness.models import need

    need(api_models, "yolov5n")
    folder = tmp_path_factory.mktemp("attack-models")
    install_copy(api_models["yolov5n"], folder, "yolov5n")
    srv = ProductionServer(folder, 2, log="attack_front.log",
                           env={"DATARAILROAD_SEND_TIMEOUT": str(SEND), "DATARAILROAD_IDLE_TIMEOUT": str(IDLE)})
    yield srv
    srv.stop()


def load(server: ProductionServer, seconds: float, jpeg: bytes) -> dict:
    """CLIENTS clients, each on its keep-alive connection, alternating a detect and /healthz
    for ``seconds``: {status or error name: count}."""
    counts: dict = {}
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client(_):
        conn = server.connection(timeout=60)
        try:
            while time.monotonic() < end:
                for method, path, body, headers in (("POST", "/api/v1/detect", jpeg, {"Content-Type": "image/jpeg"}),
                                                    ("GET", "/healthz", None, None)):
                    try:
                        outcome = server.request(method, path, body, headers, conn=conn)[0]
                    except OSError as exc:
                        outcome = type(exc).__name__
                    with lock:
                        counts[outcome] = counts.get(outcome, 0) + 1
        finally:
            conn.close()

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    return counts


def answers(clients: list[socket.socket], since: float) -> list[tuple[bytes, float]]:
    """Each client's whole answer up to the server's close, and when it ended (s from ``since``)."""
    return [(read_to_end(s), time.monotonic() - since) for s in clients]


def test_stalled_uploads_slowloris_and_slow_readers_at_once_then_load(production):
    jpeg = photo_bytes("bus.jpg")
    workers = production.workers()
    stalled, slowloris, readers = [], [], []
    try:
        opened = time.monotonic()
        for _ in range(STALLED):
            s = connect(production, timeout=30)
            s.sendall(b"POST /api/v1/detect HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                      b"Content-Length: 100000\r\n\r\n" + jpeg[:16])
            stalled.append(s)
        for _ in range(SLOWLORIS):
            s = connect(production, timeout=30)
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            slowloris.append(s)
        for _ in range(READERS):
            s = connect(production, rcvbuf=4096, timeout=30)
            s.sendall(b"GET /models/yolov5n/model.tflite HTTP/1.1\r\nHost: x\r\n\r\n")
            readers.append(s)
        with ThreadPoolExecutor(3) as watch:  # when each is cut, while the load runs
            stalled_end = watch.submit(answers, stalled, opened)
            slowloris_end = watch.submit(answers, slowloris, opened)
            readers_cut = watch.submit(wait_cut, production, readers, opened, SEND + 10)
            during = load(production, 6, jpeg)
            haproxy_mb = rss_mb(production.haproxy())
            stalled_end, slowloris_end, readers_cut = stalled_end.result(), slowloris_end.result(), readers_cut.result()
    finally:
        for s in stalled + slowloris + readers:
            s.close()
    after = load(production, 4, jpeg)

    def span(times):
        return f"{min(times):.1f}-{max(times):.1f} s"

    stalled_times, slowloris_times = [t for _, t in stalled_end], [t for _, t in slowloris_end]
    print(f"\nopen at once: {STALLED} stalled uploads (cut {span(stalled_times)}), {SLOWLORIS} slowloris (cut "
          f"{span(slowloris_times)}), {READERS} slow readers (cut {span(readers_cut)}); load meanwhile {during}, "
          f"after {after}; HAProxy RSS {haproxy_mb:.0f} MB")
    # Each kind cut within its timeout: stalled uploads and slow readers once they have sent
    # or taken no byte for SEND s, slowloris once its headers have not come in IDLE s (or, as
    # here, it has sent nothing for SEND s).
    for answer, _ in stalled_end:
        status, error = json_error(answer)
        assert (status, error["code"]) == (408, "request_timeout"), error
    assert all(answer.startswith(b"HTTP/1.1 408") for answer, _ in slowloris_end)
    # (the clients were opened over a fraction of a second: the bounds allow for it and for the load)
    assert SEND - 0.5 < min(stalled_times) and max(stalled_times) < SEND + 4, stalled_times
    headers = min(IDLE, SEND)  # whichever comes first: no whole headers, or no byte at all
    assert headers - 0.5 < min(slowloris_times) and max(slowloris_times) < headers + 4, slowloris_times
    assert SEND - 0.5 < min(readers_cut) and max(readers_cut) < SEND + 6, readers_cut
    # ...and nothing else: every request of the load answered
    assert set(during) == {200} and set(after) == {200}, (during, after)
    assert during[200] >= 2 * CLIENTS, during
    assert production.workers() == workers
