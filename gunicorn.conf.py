"""gunicorn settings for production: `gunicorn -c gunicorn.conf.py 'server:create_app()'`.

The front is gunicorn's gevent worker (see docs/server.md "The front server"): every connection is a
greenlet, so slow or stalled clients cost a greenlet each, not a thread; the app runs its CPU
work (decode, LiteRT) on DATARAILROAD_THREADS native threads per worker (server/front.py).

Every value here comes from this process's settings (server/settings.py), read once;
the app gunicorn preloads here, ``create_app()``, takes the same object.
"""
import functools
import json

from gunicorn import util
from gunicorn.workers.ggevent import GeventWorker

from server import front
from server.settings import load

# In the master, before the app is preloaded and any thread starts; workers inherit it.
front.keep_freed_memory()
settings = load()
bind = settings.bind  # DATARAILROAD_BIND, else DATARAILROAD_HOST:DATARAILROAD_PORT
# Inference is CPU-bound: one worker per core by default (WEB_CONCURRENCY).
workers = settings.workers
# Native threads per worker that run the models (the gevent worker itself ignores `threads`).
threads = settings.threads
worker_connections = settings.connections
# A client must send its request line and headers within this time, and an idle keep-alive
# connection is closed after it; the body has the same limit between two reads (server/front.py).
keepalive = max(1, round(settings.idle_timeout))
# Answers are bounded by DATARAILROAD_SEND_TIMEOUT: no byte taken by the client for that long,
# the connection is cut; refused requests get a lingering close (Worker.handle, server/front.py).
preload_app = True
timeout = 120  # heartbeat: a worker whose event loop is stuck this long is restarted
accesslog = "-"

# `make run HTTPS=1` (docs/phones-offline.md): TLS with a certificate from the local CA of
# server/certs.py, made on first use and reused.
if settings.https:
    from server import certs

    _tls = certs.ensure(settings.certs)
    certfile, keyfile = str(_tls.cert), str(_tls.key)


def ssl_context(conf, default_ssl_context_factory):
    """TLS handshakes on a connection's first read, not on accept: gunicorn bounds that read
    by `keepalive`, so a client that connects and never says hello is cut off after the idle
    timeout like one that sends no request (on accept, gevent would wait for it forever), and
    a failed handshake is gunicorn's to log, as an SSL error, not a greenlet's traceback."""
    context = default_ssl_context_factory()
    context.wrap_socket = functools.partial(context.wrap_socket, do_handshake_on_connect=False)
    return context

_REASON_CODES = {400: "bad_request", 403: "forbidden", 431: "request_header_fields_too_large",
                 500: "internal_error", 501: "not_implemented"}


def write_json_error(sock, status_int, reason, mesg):
    """gunicorn's own error answers (a request line or headers it cannot parse: 400, 431,
    501), as the app's JSON ``{"error": {"code", "message"}}`` instead of an HTML page. The
    connection is closed after it, with a lingering close: the client may still be sending
    the rest of the request (e.g. a body after a 24 KB request line)."""
    if isinstance(sock, front.Connection):
        sock.linger_on_close()
    body = json.dumps({"error": {"code": _REASON_CODES.get(status_int, "error"),
                                 "message": f"{reason}: {mesg}" if mesg else reason}}).encode()
    head = (f"HTTP/1.1 {status_int} {reason}\r\nConnection: close\r\nContent-Type: application/json\r\n"
            f"Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    util.write_nonblock(sock, head.encode("latin1") + body)


class Worker(GeventWorker):
    """gevent worker that leaves threads native: the app's model threads use ordinary locks
    and queues, which gevent's patched ones would turn into greenlet primitives (they fail
    across native threads). Only sockets are cooperative; that is all the server needs."""

    def patch(self):
        from gevent import monkey, socket

        monkey.patch_all(thread=False, queue=False, Event=False, time=False, os=False,
                         subprocess=False, signal=False, select=False)
        self.sockets = [socket.socket(s.FAMILY, socket.SOCK_STREAM, fileno=s.sock.fileno())
                        for s in self.sockets]

    def handle(self, listener, client, addr):
        """Each client's socket as a front.Connection: its answers are cut for a slow reader
        (DATARAILROAD_SEND_TIMEOUT), its close lingers after a refused request."""
        super().handle(listener, front.Connection(client, settings.send_timeout), addr)

    def run(self):
        util.write_error = write_json_error  # used by Worker.handle_error (this process only)
        front.use_thread_pool(self.cfg.threads)
        super().run()


worker_class = Worker


def post_request(worker, req, environ, resp):
    """A request whose body the app could not read to its end (timeout, malformed chunk,
    over the limit) must not be followed by another on the same connection. When the
    connection ends after this answer, it ends with a lingering close: the client may still
    be sending a body nobody read (e.g. a 413 to a `Connection: close` upload)."""
    if environ.get(front.CLOSE_CONNECTION):
        req.must_close = True
    sock = environ.get("gunicorn.socket")
    if isinstance(sock, front.Connection) and (req.must_close or (resp is not None and resp.should_close())):
        sock.linger_on_close()
