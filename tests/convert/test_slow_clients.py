"""Slow readers and refused requests against the production server: gunicorn started with
gunicorn.conf.py (the gevent front, one worker) on a loopback port, real sockets.

- A client that asks for an 18 MB model file and reads nothing is cut (reset) once it has
  taken no byte for DATARAILROAD_SEND_TIMEOUT (2 s here, 30 s by default), and the worker
  serves others meanwhile; a client that reads slowly but steadily gets its whole answer,
  however long that takes.
- A request refused before its body was read (a 24 KB request line with a body, an upload
  over the limit with ``Connection: close``) ends with a lingering close: the client reads the
  4xx JSON and then the end of the connection, not a reset, and the lingering is bounded.
"""
from __future__ import annotations

import http.client
import json
import socket
import threading
import time

import pytest

from server import front
from harness.models import install_copy
from harness.servers import Gunicorn

SEND = 2.0
UPLOAD_LIMIT = 1024 * 1024
BIG = "/models/efficientnet-lite0/model.tflite"
TCP_ESTABLISHED = 1

pytestmark = pytest.mark.skipif(not hasattr(socket, "TCP_INFO"), reason="reads the TCP state (Linux)")


@pytest.fixture(scope="module")
def served(api_models, tmp_path_factory):
    folder = tmp_path_factory.mktemp("slow-clients-models")
    install_copy(api_models["efficientnet-lite0"], folder, "efficientnet-lite0")
    srv = Gunicorn(folder, 1, log="slow_clients_gunicorn.log",
                   env={"DATARAILROAD_SEND_TIMEOUT": str(SEND), "DATARAILROAD_IDLE_TIMEOUT": "3",
                        "DATARAILROAD_MAX_UPLOAD_BYTES": str(UPLOAD_LIMIT)})
    srv.big_file = folder / "efficientnet-lite0" / "model.tflite"
    yield srv
    srv.stop()


def tcp_state(s: socket.socket) -> int:
    """The connection's state in this side's kernel (tcp_info.tcpi_state): 1 established,
    7 closed (a reset came), 8 close-wait (the peer's end came)."""
    return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def connect(server: Gunicorn, rcvbuf: int | None = None, timeout: float = 10) -> socket.socket:
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


def test_a_client_that_reads_nothing_is_cut_and_others_are_served(served):
    workers = served.workers()
    readers = []
    for _ in range(4):
        s = connect(served, rcvbuf=4096)
        s.sendall(f"GET {BIG} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        readers.append(s)
    sent = time.monotonic()
    try:
        # The worker's sends to them wait; it serves others meanwhile.
        t0 = time.perf_counter()
        assert served.request("GET", "/healthz", timeout=10)[0] == 200
        status, _, spec = served.request("GET", "/api/v1/openapi.json", timeout=10)
        assert status == 200 and json.loads(spec)["paths"]
        assert time.perf_counter() - t0 < 1.5
        cut = {}
        while len(cut) < len(readers) and time.monotonic() - sent < SEND + 8:
            for i, s in enumerate(readers):
                if i not in cut and tcp_state(s) != TCP_ESTABLISHED:
                    cut[i] = (time.monotonic() - sent, tcp_state(s))
            time.sleep(0.05)
        assert len(cut) == len(readers), f"still connected after {SEND + 8} s: {cut}"
        for elapsed, state in cut.values():
            assert SEND - 0.3 < elapsed < SEND + 6 and state == 7, cut  # 7: closed by a reset
        for s in readers:  # what came before the reset, then the reset: never the whole file
            with pytest.raises(ConnectionResetError):
                got = read_to_end(s)
                pytest.fail(f"the answer ended without a reset after {len(got)} bytes")
    finally:
        for s in readers:
            s.close()
    assert served.workers() == workers
    assert served.request("GET", "/healthz")[0] == 200


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
                 f"Content-Length: {256 * 1024}\r\n\r\n", 256 * 1024, 400, "bad_request",
                 id="24 KB request line and a body"),
    pytest.param("POST /api/v1/classify HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\nConnection: close\r\n"
                 f"Content-Length: {UPLOAD_LIMIT + 2 ** 20}\r\n\r\n", UPLOAD_LIMIT + 2 ** 20, 413, "payload_too_large",
                 id="upload over the limit, Connection: close"),
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


def test_lingering_is_bounded_and_keep_alive_is_not_slowed(served):
    """A client that is refused, reads the answer and then neither sends nor closes is let go
    within LINGER_SECONDS; requests on a keep-alive connection still answer at once."""
    s = connect(served)
    try:
        s.sendall(b"GARBAGE\r\n\r\n")
        t0 = time.monotonic()
        assert json_error(read_to_end(s))[0] == 400  # the answer, then its end (the server's FIN)
        time.sleep(max(0.0, t0 + front.LINGER_SECONDS + 0.5 - time.monotonic()))
        # The server has closed the socket by now: what this client sends is refused (a reset).
        with pytest.raises(OSError):
            for _ in range(50):
                s.sendall(b"x" * 1024)
                time.sleep(0.05)
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
