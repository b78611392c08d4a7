"""Every setting of DataRailroad in one place: its environment variable, type, default, bound
and one line of documentation (docs/configuration.md lists the same; tests/convert/test_settings.py
checks that it does).

    settings = load()                                    # this process's, read once
    Settings.from_env({"DATARAILROAD_PORT": "9000"})     # from any mapping, validated
    dataclasses.replace(settings, batch=1)               # a modified copy (tests, the cluster)

``create_app(settings=...)`` takes one (default: ``load()``) and hands it to the code that
needs it (the front's timeouts, the runners, the /ca.crt route); gunicorn.conf.py reads
``load()``. The converters, which don't import the server, read the folders they share with
it (models, cache, shared) through modelcontract/paths.py: the same variables, defaults and
reading. Nothing else reads these variables: another process (a gunicorn started by a test,
a Ray node) gets its settings from its own environment.

A variable unset or empty takes the default. A value that does not parse, or breaks its
bound, raises ValueError naming the variable; where the bound says so the value is clamped
instead (e.g. DATARAILROAD_IDLE_TIMEOUT above 30 s is 30 s).

``python -m server.settings`` prints this process's settings; ``--markdown`` prints
the table of docs/configuration.md.

The standard library only (the server, gunicorn.conf.py, tests and benches import it).
"""
from __future__ import annotations

import dataclasses
import functools
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from modelcontract.paths import FOLDERS, ROOT, read_path

from .limits import DEFAULT_MAX_IMAGE_PIXELS, DEFAULT_MAX_UPLOAD_BYTES, DEFAULT_MAX_VIDEO_FRAMES

MiB = 1024 * 1024


@dataclass(frozen=True)
class Bound:
    """Where a number must lie: at least ``low`` (more than it when ``above``), at most ``high``.
    A value past a side is refused (ValueError), or moved onto it when that side clamps."""
    low: float | None = None
    high: float | None = None
    above: bool = False
    clamp_low: bool = False
    clamp_high: bool = False

    def apply(self, env: str, value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{env} must be a finite number ({self}), got {value}")
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            if not self.clamp_low:
                raise ValueError(f"{env} must be {'>' if self.above else '≥'} {self.low:g}, got {value}")
            value = type(value)(self.low)
        if self.high is not None and value > self.high:
            if not self.clamp_high:
                raise ValueError(f"{env} must be ≤ {self.high:g}, got {value}")
            value = type(value)(self.high)
        return value

    def __str__(self) -> str:
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.above else '≥'} {self.low:g}" + (" (less: raised to it)" if self.clamp_low else ""))
        if self.high is not None:
            parts.append(f"≤ {self.high:g}" + (" (more: lowered to it)" if self.clamp_high else ""))
        return ", ".join(parts)


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(text)
    return text == "1"


# How a variable's text reads, and what the error says it must be.
READ = {int: (int, "an integer"), float: (float, "a number"), bool: (_flag, "1 (on) or 0 (off)"),
        Path: (read_path, "a path"), str: (str, "text")}


@dataclass(frozen=True)
class Setting:
    """One row of the table (the metadata of a Settings field)."""
    env: str
    kind: type                 # int, float, bool, Path or str
    doc: str
    shown: str                 # the default, as the docs say it
    bound: Bound | None = None

    @property
    def limits(self) -> str:
        """The bound, as the docs say it."""
        return "0 or 1" if self.kind is bool else str(self.bound or "")

    def read(self, text: str):
        parse, what = READ[self.kind]
        try:
            return parse(text)
        except ValueError:
            raise ValueError(f"{self.env} must be {what}, got {text!r}") from None


def setting(env: str, kind: type, doc: str, default=None, *, shown: str | None = None, factory=None,
            bound: Bound | None = None):
    """A Settings field: its default (or ``factory`` making it; None: derived from other
    settings when built) and its row of the table."""
    row = Setting(env, kind, doc, shown if shown is not None else str(default), bound)
    if factory is not None:
        return field(default_factory=factory, metadata={"setting": row})
    return field(default=default, metadata={"setting": row})


AT_LEAST_1 = Bound(low=1)
RAISED_TO_1 = Bound(low=1, clamp_low=True)
POSITIVE = Bound(low=0, above=True)


@dataclass(frozen=True)
class Settings:
    """The settings of one process, typed and validated. Derived defaults (None below) are
    filled in when it is built: a ``dataclasses.replace`` copy keeps them unless it replaces
    them too (e.g. ``infer_threads`` is not recomputed from a replaced ``workers``)."""

    # Where things are (models, cache, shared: the converters read them through modelcontract/paths.py)
    models: Path = setting(FOLDERS["models"][0], Path, "installed models: the converters write them, the server "
                           "serves them", FOLDERS["models"][1], shown="./models")
    node_modules: Path = setting("DATARAILROAD_NODE_MODULES", Path, "the npm packages the pages load (/vendor/...; "
                                 "`npm ci` installs them)", ROOT / "node_modules", shown="./node_modules")
    cache: Path = setting(FOLDERS["cache"][0], Path, "the converters' downloads (source weights, photos)",
                          FOLDERS["cache"][1], shown="~/.cache/datarailroad")
    shared: Path = setting(FOLDERS["shared"][0], Path, "shared fixtures (hand photos) the handpose converter's parity "
                           "check uses when present", FOLDERS["shared"][1], shown="../shared")
    # Request limits
    max_upload_bytes: int = setting("DATARAILROAD_MAX_UPLOAD_BYTES", int, "request body size (413 past it)",
                                    DEFAULT_MAX_UPLOAD_BYTES, shown="10 MiB", bound=AT_LEAST_1)
    max_image_pixels: int = setting("DATARAILROAD_MAX_IMAGE_PIXELS", int, "decoded image size, per image or video "
                                    "frame (413 past it)", DEFAULT_MAX_IMAGE_PIXELS, shown="40 M pixels", bound=AT_LEAST_1)
    max_video_frames: int = setting("DATARAILROAD_MAX_VIDEO_FRAMES", int, "frames in one `POST /api/v1/track` "
                                    "video (413 past it, never cut silently)", DEFAULT_MAX_VIDEO_FRAMES,
                                    bound=AT_LEAST_1)
    # The front (HAProxy, server/front.py) and gunicorn behind it (gunicorn.conf.py)
    host: str = setting("DATARAILROAD_HOST", str, "address the server listens on", "127.0.0.1")
    port: int = setting("DATARAILROAD_PORT", int, "port the server listens on", 8000, bound=Bound(low=0, high=65535))
    bind: str | None = setting("DATARAILROAD_BIND", str, "the front's address, whole (e.g. `0.0.0.0:8000`, or "
                               "`unix:/run/drr.sock`); overrides HOST and PORT", shown="HOST:PORT")
    workers: int = setting("WEB_CONCURRENCY", int, "gunicorn worker processes (gunicorn's own variable name)",
                           factory=lambda: os.cpu_count() or 1, shown="one per CPU", bound=AT_LEAST_1)
    threads: int = setting("DATARAILROAD_THREADS", int, "requests per worker that decode and run models at once "
                           "(the others wait for one of them)", 2, bound=AT_LEAST_1)
    http_threads: int = setting("DATARAILROAD_HTTP_THREADS", int, "threads per gunicorn worker, each serving one "
                                "request at a time: files, pages, health, and the requests waiting for a model",
                                16, bound=AT_LEAST_1)
    connections: int = setting("DATARAILROAD_CONNECTIONS", int, "client connections the front holds at once "
                               "(more wait in the listen backlog)", 1000, bound=AT_LEAST_1)
    idle_timeout: float = setting("DATARAILROAD_IDLE_TIMEOUT", float, "seconds for a request line and headers "
                                  "(408 past it), and for an idle keep-alive connection", 15.0,
                                  shown="15 s", bound=Bound(low=0, above=True, high=30, clamp_high=True))
    body_timeout: float = setting("DATARAILROAD_BODY_TIMEOUT", float, "seconds for a whole request body (408 past "
                                  "it)", 120.0, shown="120 s", bound=POSITIVE)
    send_timeout: float = setting("DATARAILROAD_SEND_TIMEOUT", float, "seconds a client may send no byte of its "
                                  "request or take no byte of an answer: then the connection is cut",
                                  30.0, shown="30 s", bound=POSITIVE)
    buffer_bytes: int = setting("DATARAILROAD_BUFFER_BYTES", int, "request bodies a cluster ingress holds in "
                                "memory at once (a new body past it: 503)", 64 * MiB, shown="64 MiB",
                                bound=AT_LEAST_1)
    # LiteRT (server/inference/litert.py)
    infer_threads: int | None = setting("DATARAILROAD_INFER_THREADS", int, "threads of each LiteRT interpreter",
                                        shown="CPUs / workers, at least 1", bound=RAISED_TO_1)
    interpreters: int = setting("DATARAILROAD_INTERPRETERS", int, "interpreters per model and worker (each one "
                                "more costs its memory)", 1, bound=RAISED_TO_1)
    batch: int = setting("DATARAILROAD_BATCH", int, "concurrent runs of the classifier stacked into one invoke "
                         "(1: off; yolov5n's graph can't batch)", 4, bound=RAISED_TO_1)
    batch_wait_ms: float = setting("DATARAILROAD_BATCH_WAIT_MS", float, "how long a batch waits for more runs (0: "
                                   "only those already queued, no latency added)", 0.0, shown="0 ms",
                                   bound=Bound(low=0, clamp_low=True))
    # HTTPS for phones on the LAN (server/certs.py)
    https: bool = setting("DATARAILROAD_HTTPS", bool, "1: the front serves https with the local CA's certificate "
                          "and /ca.crt (`make run HTTPS=1`)", False, shown="0 (off)")
    certs: Path = setting("DATARAILROAD_CERTS", Path, "the local CA and server certificate (made on first use)",
                          ROOT / "certs", shown="./certs")

    def __post_init__(self):
        for name, row in SETTINGS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if row.kind is Path and not isinstance(value, Path):
                value = Path(value)  # e.g. create_app({"MODELS_DIR": "models"})
            if row.bound is not None:
                value = row.bound.apply(row.env, value)
            object.__setattr__(self, name, value)
        if self.infer_threads is None:  # the cores left per gunicorn worker
            object.__setattr__(self, "infer_threads", max(1, (os.cpu_count() or 1) // self.workers))
        if self.bind is None:
            object.__setattr__(self, "bind", f"{self.host}:{self.port}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """The settings the variables of ``environ`` (default: os.environ) give."""
        environ = os.environ if environ is None else environ
        values = {}
        for name, row in SETTINGS.items():
            text = environ.get(row.env, "").strip()
            if text:
                values[name] = row.read(text)
        return cls(**values)


# Field name -> its row: the table, in the order of the fields.
SETTINGS: dict[str, Setting] = {f.name: f.metadata["setting"] for f in dataclasses.fields(Settings)}


@functools.cache
def load() -> Settings:
    """This process's settings: its environment, read once (``load.cache_clear()`` reads it again)."""
    return Settings.from_env()


def markdown() -> str:
    """The table of docs/configuration.md."""
    rows = ["| variable | default | bound | what |", "|---|---|---|---|"]
    for row in SETTINGS.values():
        rows.append(f"| `{row.env}` | {row.shown} | {row.limits} | {row.doc} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--markdown"]:
        print(markdown())
        return 0
    if args:
        print("usage: python -m server.settings [--markdown]", file=sys.stderr)
        return 2
    settings = load()
    width = max(len(row.env) for row in SETTINGS.values())
    for name, row in SETTINGS.items():
        print(f"{row.env:<{width}}  {getattr(settings, name)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
