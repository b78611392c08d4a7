"""gunicorn settings for production: `gunicorn -c gunicorn.conf.py 'server:create_app()'`."""
import multiprocessing
import os

bind = os.environ.get("DATARAILROAD_BIND",
                      f"{os.environ.get('DATARAILROAD_HOST', '127.0.0.1')}:{os.environ.get('DATARAILROAD_PORT', '8000')}")
# Inference is CPU-bound: one worker per core (override with WEB_CONCURRENCY).
workers = int(os.environ.get("WEB_CONCURRENCY", multiprocessing.cpu_count()))
threads = int(os.environ.get("DATARAILROAD_THREADS", 2))
preload_app = True
timeout = 120
accesslog = "-"
