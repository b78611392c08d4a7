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
settings (modelcontract/settings.py): ``read_body`` takes the app's.

Outside that worker (Flask's test client, the dev server, another gunicorn worker class)
``offload`` simply calls the function, and ``read_body`` has no socket to time.
"""
from __future__ import annotations

import contextvars
import threading
import time

from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from modelcontract.settings import Settings

from . import config

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

class BodyError(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def hold(environ: dict, size: int, budget: int) -> None:
    """Count ``size`` more body bytes against the ``budget`` of this process (the setting
    DATARAILROAD_BUFFER_BYTES), or 503 when it is spent."""
    global _held
    with _held_lock:
        if _held + size > budget:
            raise BodyError(503, "server_busy", f"the server holds {budget} bytes of uploads already "
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
    of a chunked body. Raises BodyError: 408 for a client too slow, 400 for a body cut short
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
    except BodyError:
        release(environ)
        environ[CLOSE_CONNECTION] = True
        raise
    except TimeoutError:
        release(environ)
        environ[CLOSE_CONNECTION] = True
        raise BodyError(408, "request_timeout",
                        f"the request body was not received in time: the server waits at most {idle:g} s "
                        f"between two pieces of a body (DATARAILROAD_IDLE_TIMEOUT) and "
                        f"{settings.body_timeout:g} s for a whole body (DATARAILROAD_BODY_TIMEOUT)") from None
    except (OSError, ClientDisconnected) as exc:
        # gunicorn: InvalidChunkSize / ChunkMissingTerminator / NoMoreData (OSError subclasses);
        # werkzeug's dev server: ClientDisconnected.
        release(environ)
        environ[CLOSE_CONNECTION] = True
        detail = str(exc) or type(exc).__name__
        raise BodyError(400, "bad_request_body",
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
        raise BodyError(400, "bad_request_body",
                        f"the request body ended after {size} of the {length} bytes its Content-Length announced")
    return b"".join(chunks)
