"""Servers: the app by werkzeug in a thread, HAProxy + gunicorn as in production
(ProductionServer), their processes (/proc), and multipart bodies to send them."""
from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

from harness.paths import ARTIFACTS, ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_server(app):
    """Serve ``app`` on an ephemeral 127.0.0.1 port in a thread; yields the base URL."""
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@contextmanager
def serving(models: Path):
    """The app on the models folder ``models`` (TESTING), served by live_server; yields the base URL."""
    from server import create_app

    with live_server(create_app({"MODELS_DIR": models, "TESTING": True})) as url:
        yield url


def proc_stat(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name: [0] state, [1] ppid, [7] minflt,
    [11] utime, [12] stime (proc(5) numbers them from 3). OSError when the process is gone."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2:].split()


def rss_mb(pid: int) -> float:
    """The resident memory of process ``pid``, MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_pids(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(proc_stat(int(entry.name))[1])
            except OSError:
                continue
            if ppid == pid:
                found.append(int(entry.name))
    return sorted(found)


# /proc/net/tcp states of a server socket that still costs something: open in a process
# (ESTABLISHED, CLOSE_WAIT) or closed with an answer still queued (FIN_WAIT1). After those, a
# FIN_WAIT2 or TIME_WAIT socket holds no data and no process.
HELD_STATES = {"01", "08", "04"}


def holds_connection(port: int, client: socket.socket) -> bool:
    """Whether the server on ``port`` still holds anything of ``client``'s connection
    (/proc/net/tcp: the socket on that port whose peer is this client's port, in HELD_STATES)."""
    local, peer = f"{port:04X}", f"{client.getsockname()[1]:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[1].endswith(":" + local) and fields[2].endswith(":" + peer):
            return fields[3] in HELD_STATES
    return False


class ProductionServer:
    """The production server, as `make serve` starts it: ``python -m server.front`` (HAProxy on
    127.0.0.1, a free port unless given, in front of gunicorn with gunicorn.conf.py), the models
    from ``models``, ``workers`` gunicorn workers; returns once /healthz answers 200 through
    HAProxy with every worker up (each has loaded the installed models by then). ``env`` is
    added to this process's environment, or is the whole environment with ``clean_env`` (a
    slim venv's Python given as ``python``); ``log`` names a file under test-artifacts/ for
    their output; ``ca``: it serves HTTPS (``env`` turns that on) with a certificate this CA
    file vouches for."""

    def __init__(self, models: Path, workers: int = 1, env: dict | None = None, port: int | None = None,
                 python: Path | None = None, clean_env: bool = False, log: str | None = None,
                 ca: Path | None = None, start_timeout: float = 120):
        self.port, self.ca, self.expected_workers = port or free_port(), ca, workers
        # the servers' output: to the named log, else to an unnamed temporary file (a pipe
        # nobody reads would fill and block the server), read back when it fails to start.
        self.log_path = ARTIFACTS / log if log else None
        if self.log_path:
            ARTIFACTS.mkdir(exist_ok=True)
        self.log = open(self.log_path, "w+") if self.log_path else tempfile.TemporaryFile("w+")
        base = {"PATH": os.environ["PATH"]} if clean_env else dict(os.environ)
        self.proc = subprocess.Popen(
            [str(python or sys.executable), "-m", "server.front", "--access-logfile", "/dev/null"],
            cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
            env={**base, "DATARAILROAD_MODELS": str(models), "DATARAILROAD_HOST": "127.0.0.1",
                 "DATARAILROAD_PORT": str(self.port), "WEB_CONCURRENCY": str(workers), **(env or {})},
            start_new_session=True)
        deadline = time.monotonic() + start_timeout
        while time.monotonic() < deadline:
            try:
                if self.request("GET", "/healthz", timeout=5)[0] == 200 and len(self.workers()) == workers:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited at start: {self.stop()}")
            time.sleep(0.3)
        raise RuntimeError(f"the server did not start: {self.stop()}")

    def _child(self, program: bytes) -> int | None:
        """The pid of the front's child whose command line names ``program``."""
        for pid in child_pids(self.proc.pid):
            try:
                if program in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
            except OSError:
                continue
        return None

    def gunicorn(self) -> int | None:
        """The gunicorn master's pid."""
        return self._child(b"gunicorn")

    def haproxy(self) -> int | None:
        return self._child(b"haproxy")

    @property
    def url(self) -> str:
        return f"{'https' if self.ca else 'http'}://127.0.0.1:{self.port}"

    def client_context(self):
        import ssl

        return ssl.create_default_context(cafile=str(self.ca))

    def connection(self, host: str = "127.0.0.1", timeout: float = 60) -> http.client.HTTPConnection:
        if self.ca:
            return http.client.HTTPSConnection(host, self.port, context=self.client_context(), timeout=timeout)
        return http.client.HTTPConnection(host, self.port, timeout=timeout)

    def workers(self) -> list[int]:
        """gunicorn's worker pids."""
        master = self.gunicorn()
        return child_pids(master) if master else []

    def request(self, method: str, path: str, body=None, headers=None, timeout: float = 60,
                conn: http.client.HTTPConnection | None = None, host: str = "127.0.0.1"):
        """(status, content type, body), to ``host`` (a name for 127.0.0.1 the certificate may
        or may not cover). On a given keep-alive ``conn``, a request the server closed while
        idle (DATARAILROAD_IDLE_TIMEOUT) is sent once more."""
        own = conn is None
        conn = conn or self.connection(host, timeout)
        try:
            for attempt in (0, 1):
                try:
                    conn.request(method, path, body=body, headers=headers or {})
                    response = conn.getresponse()
                    return response.status, response.getheader("Content-Type"), response.read()
                except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                    conn.close()
                    if own or attempt:
                        raise
        finally:
            if own:
                conn.close()

    def output_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-2000:]

    def stop(self) -> str:
        """Stop it; returns the end of its output."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)  # its own session: HAProxy and gunicorn too
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        if self.log.closed:
            return ""
        tail = self.output_tail()
        self.log.close()
        return tail


def multipart(payload: bytes, fields: dict | None = None) -> tuple[bytes, str]:
    """A multipart/form-data body with ``payload`` as the image part; (body, content type)."""
    boundary = uuid.uuid4().hex
    parts = [f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n".encode()
             for k, v in (fields or {}).items()]
    parts.append(f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"x.jpg\"\r\n"
                 f"Content-Type: image/jpeg\r\n\r\n".encode() + payload + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"
