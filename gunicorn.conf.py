"""gunicorn settings: `python -m server.front` (`make serve`) runs gunicorn with them behind HAProxy.

Stock gunicorn: gthread workers, one per core by default (inference is CPU-bound), each
serving DATARAILROAD_HTTP_THREADS requests at once, of which DATARAILROAD_THREADS run models
(server/api.py). HAProxy (server/front.py) stands in front: it holds slow clients, whole
bodies and the timeouts, so a thread never waits on a client that is slow to send.

Every value here comes from this process's settings (server/settings.py), read once; the app
gunicorn preloads here, ``create_app()``, takes the same object. The bind is the front's
private socket, given on the command line.
"""
from server import memory
from server.settings import load

# In the master, before the app is preloaded and any thread starts; workers inherit it.
memory.keep_freed_memory()
settings = load()
workers = settings.workers
worker_class = "gthread"
threads = settings.http_threads
# HAProxy keeps its connections to gunicorn open between requests.
keepalive = max(1, round(settings.idle_timeout))
# HAProxy has checked the request line and headers (414, 431); these only must not be tighter.
limit_request_line = 8190
limit_request_field_size = 0
# Only HAProxy reaches the socket (its folder is private): trust its X-Forwarded-* headers.
forwarded_allow_ips = "*"
preload_app = True
timeout = 120  # heartbeat: a worker stuck this long is restarted
accesslog = "-"


def post_worker_init(worker):
    """Each worker loads every installed model (checks, interpreters, a first run) and answers
    one request per model itself before it takes a request: the first request is as fast as
    the next, and a worker answering at all has its models ready. Models installed later load
    on their first request."""
    from server import api, inference

    loaded = inference.registry(worker.wsgi).preload()
    api.warm_up(worker.wsgi, loaded)
    worker.log.info("Worker %s loaded %d model(s): %s", worker.pid, len(loaded), ", ".join(loaded) or "none")
