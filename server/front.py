"""The app's side of the production front (gunicorn.conf.py: gevent worker).

Each connection is a greenlet: while a client is slow to send its request, it holds a
greenlet (a few KB), not one of the few threads that run models. The CPU work of a request
(decode, preprocess, LiteRT) runs on a small pool of native threads (``offload``), so it never
blocks the event loop, and LiteRT, numpy and Pillow release the GIL there as under gthread.

Reading the body (``read_body``) is bounded in time: a client that sends nothing for
DATARAILROAD_IDLE_TIMEOUT seconds, or takes longer than DATARAILROAD_BODY_TIMEOUT to send the
whole body, gets a 408 and its connection is closed. The body is kept in memory, never on disk,
and in bounded amount: the bodies a worker holds at once (read, or waiting for a model thread)
total at most DATARAILROAD_BUFFER_BYTES, past which a new body gets a 503. These three are
settings (server/settings.py): ``read_body`` takes the app's.

Writing the answer is bounded too (``Connection``, the socket gunicorn.conf.py gives the worker
for each client): a client whose socket accepts no byte of an answer for
DATARAILROAD_SEND_TIMEOUT seconds (a slow reader) is cut, however long the whole answer takes
while it keeps taking bytes. An answer after which the server closes the connection (an error
before the body was read: 400, 408, 413...) is followed by a bounded lingering close, so the
client reads that answer instead of a connection reset.

Outside that worker (Flask's test client, the dev server, another gunicorn worker class)
``offload`` simply calls the function, and ``read_body`` has no socket to time.
"""
from __future__ import annotations

import contextvars
import errno
import logging
import socket
import struct
import threading
import time

from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from . import config
from .errors import Problem
from .settings import Settings

CLOSE_CONNECTION = "datarailroad.close_connection"  # environ flag read by gunicorn.conf.py
HELD = "datarailroad.held_bytes"  # environ: this request's share of the buffer budget

_pool = None
_hub_thread: int | None = None
_held = 0  # body bytes this process holds (read_body ... release)
_held_lock = threading.Lock()


# ---------------------------------------------------------------------------- memory

# glibc mallopt() parameters (malloc.h).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8
HEAP_BLOCK_MAX = 32 << 20   # blocks below it come from the heap (glibc's upper limit for it)
HEAP_FREE_KEPT = 32 << 20   # free heap kept for the next request before it goes back to the kernel


def keep_freed_memory() -> bool:
    """Lets a request reuse the pages the previous one freed. By default glibc gives large
    freed blocks back to the kernel and each thread's arena drops whole heaps, so every
    request's arrays (a decoded photo, its float32 copy, the model input: ~18 MB for bus.jpg)
    page-fault in again: ~3400 faults, ~10 ms of a 70 ms detect. One arena, blocks under
    32 MB from the heap, 32 MB of free heap kept: no faults. Larger blocks (huge images) are
    still mapped and returned at once. Call before any thread starts (gunicorn.conf.py).
    False where the C library is not glibc (nothing changed)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    # Each one set even if another is refused (mallopt answers 1 when it takes a value).
    taken = [mallopt(param, value) == 1 for param, value in
             ((M_ARENA_MAX, 1), (M_MMAP_THRESHOLD, HEAP_BLOCK_MAX), (M_TRIM_THRESHOLD, HEAP_FREE_KEPT))]
    return all(taken)


# ---------------------------------------------------------------------------- offload

def use_thread_pool(size: int) -> None:
    """Called once per gevent worker, from its event-loop thread."""
    global _pool, _hub_thread
    from gevent.threadpool import ThreadPool

    _pool = ThreadPool(max(1, size))
    _hub_thread = threading.get_ident()


def offload(fn, *args):
    """``fn(*args)`` on a native thread, the calling greenlet waiting without blocking the
    event loop. The thread sees this request's context (Flask's ``request``, ``current_app``)."""
    if _pool is None or threading.get_ident() != _hub_thread:
        return fn(*args)
    ok, value = _pool.spawn(_outcome, contextvars.copy_context(), fn, args).get()
    if ok:
        return value
    raise value


def _outcome(context, fn, args) -> tuple[bool, object]:
    """The result or the exception, raised again by the waiting greenlet (gevent's pool would
    also print a traceback for every exception, 4xx answers included)."""
    try:
        return True, context.run(fn, *args)
    except Exception as exc:
        return False, exc


# ---------------------------------------------------------------------------- body

def hold(environ: dict, size: int, budget: int) -> None:
    """Count ``size`` more body bytes against the ``budget`` of this process (the setting
    DATARAILROAD_BUFFER_BYTES), or 503 when it is spent."""
    global _held
    with _held_lock:
        if _held + size > budget:
            raise Problem(503, "server_busy", f"the server holds {budget} bytes of uploads already "
                                              "(DATARAILROAD_BUFFER_BYTES); retry in a moment")
        _held += size
    environ[HELD] = environ.get(HELD, 0) + size


def release(environ: dict) -> None:
    """The request is answered: its body no longer counts against the budget."""
    global _held
    size = environ.pop(HELD, 0)
    with _held_lock:
        _held -= size


def read_body(environ: dict, length: int | None, limit: int, settings: Settings | None = None) -> bytes:
    """The whole request body, in memory: ``length`` bytes (Content-Length), or up to the end
    of a chunked body. Raises Problem: 408 for a client too slow, 400 for a body cut short
    or malformed (e.g. a bad chunk size), 503 when the buffer budget is spent; after these the
    connection is marked to be closed after the answer (its rest can't be read). The bytes
    count against the budget until ``release(environ)``. Past ``limit``: werkzeug's
    RequestEntityTooLarge, as for a Content-Length over it. The timeouts and the budget are
    ``settings``' (default: the current app's)."""
    settings = settings or config.settings()
    stream, sock = environ["wsgi.input"], environ.get("gunicorn.socket")
    want = limit + 1 if length is None else length
    idle, deadline = settings.idle_timeout, time.monotonic() + settings.body_timeout
    chunks, size = [], 0
    try:
        while size < want:
            if sock is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("deadline")
                sock.settimeout(min(idle, left))
            chunk = stream.read(min(65536, want - size))
            if not chunk:
                break
            hold(environ, len(chunk), settings.buffer_bytes)
            chunks.append(chunk)
            size += len(chunk)
    except Problem:
        release(environ)
        environ[CLOSE_CONNECTION] = True
        raise
    except TimeoutError:
        release(environ)
        environ[CLOSE_CONNECTION] = True
        raise Problem(408, "request_timeout",
                      f"the request body was not received in time: the server waits at most {idle:g} s "
                      f"between two pieces of a body (DATARAILROAD_IDLE_TIMEOUT) and "
                      f"{settings.body_timeout:g} s for a whole body (DATARAILROAD_BODY_TIMEOUT)") from None
    except (OSError, ClientDisconnected) as exc:
        # gunicorn: InvalidChunkSize / ChunkMissingTerminator / NoMoreData (OSError subclasses);
        # werkzeug's dev server: ClientDisconnected.
        release(environ)
        environ[CLOSE_CONNECTION] = True
        detail = str(exc) or type(exc).__name__
        raise Problem(400, "bad_request_body",
                      f"the request body could not be read ({type(exc).__name__}: {detail[:120]}): "
                      "a malformed chunked encoding or a connection cut before the end") from None
    finally:
        if sock is not None:
            sock.settimeout(None)
    if size > limit:  # the rest is discarded by gunicorn before a next request
        release(environ)
        raise RequestEntityTooLarge()
    if length is not None and size < length:
        release(environ)
        environ[CLOSE_CONNECTION] = True
        raise Problem(400, "bad_request_body",
                      f"the request body ended after {size} of the {length} bytes its Content-Length announced")
    return b"".join(chunks)


# ---------------------------------------------------------------------------- connections

try:  # Linux: the kernel's queues of a socket (SIOCOUTQ is TIOCOUTQ's number, SIOCINQ FIONREAD's)
    import fcntl
    import termios
except ImportError:  # not a POSIX system: progress is judged from send() alone, no peek at close
    fcntl = termios = None

SEND_POLL = 1.0          # seconds: how often a blocked send looks at the client's progress
SEND_CHUNK = 1 << 20     # bytes offered to one send()
FILE_BLOCK = 256 << 10   # bytes of a file (gunicorn's sendfile path) read per sendall
NOTSENT_LOWAT = 128 << 10  # bytes of an answer the kernel holds unsent (on top of those in flight)
LINGER_SECONDS = 2.0     # lingering close: how long the rest of a refused request is read ...
LINGER_BYTES = 16 << 20  # ... and how much of it at most, before the connection is closed

log = logging.getLogger("gunicorn.error")


class SlowReader(ConnectionResetError):
    """The client accepted no byte of the answer for DATARAILROAD_SEND_TIMEOUT seconds: the
    connection is reset (an ECONNRESET, which gunicorn's worker closes quietly)."""


def _queue_bytes(sock, request) -> int | None:
    """A kernel queue's length for ``sock`` (``request``: TIOCOUTQ or FIONREAD), None where
    the system can't say."""
    try:
        return struct.unpack("i", fcntl.ioctl(sock.fileno(), request, b"\0\0\0\0"))[0]
    except (AttributeError, OSError, ValueError):  # fcntl None, no such ioctl, socket closed
        return None


def unacknowledged(sock) -> int | None:
    """Bytes written to ``sock`` that its peer has not acknowledged yet (sent or still queued)."""
    return _queue_bytes(sock, getattr(termios, "TIOCOUTQ", None))


def unread(sock) -> int | None:
    """Bytes the peer sent that are waiting in ``sock``'s receive queue."""
    return _queue_bytes(sock, getattr(termios, "FIONREAD", None))


class Connection:
    """A client's socket as gunicorn's gevent worker uses it (gunicorn.conf.py's Worker wraps
    each accepted one); everything but what follows goes to the socket itself.

    Slow readers. gevent bounds a blocked ``send`` by the socket's timeout per wait, but a
    ``sendall`` (and so gunicorn's writes) by that timeout for the whole call: a plain timeout
    would cut a healthy client on a slow link downloading a large answer. The rule here is
    progress: the answer goes on as long as the client takes bytes, and the connection is cut
    (reset, the bytes still queued for it dropped) once it has taken none for ``send_timeout``
    seconds. A byte counts as taken when the kernel accepts it into the send queue or, while
    that queue is full, when the client acknowledges part of it (its length, SIOCOUTQ, goes
    down; looked at every SEND_POLL s). A slow but steady reader is never cut; one whose
    receive window stays shut (it reads nothing, or a byte at a time) is cut after
    ``send_timeout`` s.

    The kernel must not hide such a reader: on loopback it took 3-4 MB of an answer before a
    send waited (its send buffer grows to 4 MB), so a slow reader of a smaller answer never
    made a send wait, and after the close the kernel kept probing its shut window with the
    rest for 335 s. So at most NOTSENT_LOWAT bytes wait unsent in the kernel
    (TCP_NOTSENT_LOWAT: bytes in flight are not limited, nor is the speed), and a socket
    closed with bytes still queued gets TCP_USER_TIMEOUT = ``send_timeout``: the kernel drops
    them once the client has acknowledged none for that long.

    Lingering close. After an answer that ends the connection (gunicorn's own parser errors,
    a request the app refused before reading its body, any ``Connection: close``) or whenever
    unread bytes wait at close, closing at once would make the kernel reset the connection,
    and a client still sending its request would see that reset instead of the answer. So
    the write side is shut first (the client reads the answer and its end), then what the
    client still sends is read and dropped until it closes, for at most LINGER_SECONDS and
    LINGER_BYTES, and only then is the socket closed. A keep-alive connection is not
    affected: nothing lingers until it is closed."""

    __slots__ = ("_sock", "send_timeout", "_linger", "_abort", "_closed")

    def __init__(self, sock, send_timeout: float):
        self._sock, self.send_timeout = sock, send_timeout
        self._linger = self._abort = self._closed = False
        if hasattr(socket, "TCP_NOTSENT_LOWAT"):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NOTSENT_LOWAT, NOTSENT_LOWAT)
            except OSError:
                pass

    def __getattr__(self, name):
        return getattr(self._sock, name)

    def linger_on_close(self) -> None:
        """The answer just written ends the connection: close it with a lingering close."""
        self._linger = True

    def sendall(self, data, flags=0):
        sock = self._sock
        timeout = sock.gettimeout()
        if timeout == 0.0:  # non-blocking on purpose (gunicorn's util.write_nonblock)
            return sock.sendall(data, flags)
        view = memoryview(data).cast("B")
        last = time.monotonic()  # the last time the client took a byte
        queued = None            # its unacknowledged bytes when last looked at, while blocked
        try:
            while view:
                left = last + self.send_timeout - time.monotonic()
                if left <= 0:
                    raise self._cut()
                sock.settimeout(min(left, SEND_POLL))
                try:
                    sent = sock.send(view[:SEND_CHUNK], flags)
                except TimeoutError:  # gevent's socket.timeout and its TLS write timeout
                    sent = 0
                if sent:
                    view, last, queued = view[sent:], time.monotonic(), None
                    continue
                now_queued = unacknowledged(sock)
                if queued is not None and now_queued is not None and now_queued < queued:
                    last = time.monotonic()
                queued = now_queued
        finally:
            sock.settimeout(timeout)

    def sendfile(self, file, offset=0, count=None):
        """gunicorn's path for files (Flask's send_file): blocks of the file through
        ``sendall``, so under the same rule (gevent's own sendfile sends 8 KB blocks with the
        socket's timeout, which is None here: no bound at all)."""
        file.seek(offset)
        total = 0
        try:
            while count is None or total < count:
                block = file.read(FILE_BLOCK if count is None else min(FILE_BLOCK, count - total))
                if not block:
                    break
                self.sendall(block)
                total += len(block)
        finally:
            if total:
                file.seek(offset + total)
        return total

    def _cut(self) -> SlowReader:
        """Reset the connection on close (SO_LINGER 0: the queued answer is dropped, not
        trickled out by the kernel after the worker let go)."""
        self._abort = True
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            peer = self._sock.getpeername()
        except OSError:
            peer = "?"
        log.info("Cut a slow reader %s: it took no byte of the answer for %g s (DATARAILROAD_SEND_TIMEOUT)",
                 peer, self.send_timeout)
        return SlowReader(errno.ECONNRESET, f"the client took no byte of the answer for {self.send_timeout:g} s")

    def close(self):
        if self._closed:
            return
        self._closed = True
        sock = self._sock
        if not self._abort:
            if self._linger or unread(sock):
                linger(sock)
            if unacknowledged(sock) and hasattr(socket, "TCP_USER_TIMEOUT"):
                # The end of an answer still in the kernel: dropped once the client has taken
                # none of it for send_timeout, not probed for minutes after the close.
                try:
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, max(1, round(self.send_timeout * 1000)))
                except OSError:
                    pass
        sock.close()


def linger(sock, seconds: float = LINGER_SECONDS, most: int = LINGER_BYTES) -> int:
    """Shut ``sock``'s write side, then read and drop what the peer still sends until it
    closes, ``seconds`` pass or ``most`` bytes came; the bytes dropped."""
    dropped, deadline = 0, time.monotonic() + seconds
    buf = bytearray(65536)
    try:
        sock.shutdown(socket.SHUT_WR)
        while dropped < most:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            got = sock.recv_into(buf, min(len(buf), most - dropped))
            if not got:
                break
            dropped += got
    except OSError:  # timed out, reset, already shut
        pass
    return dropped
