"""The installable, offline app: the web app manifest and the service worker (templates/sw.js).

The worker is rendered with this deploy's build id and the list of files it precaches, so a
new deploy (other static files, templates or pinned npm runtimes) is a new worker script: the
browser installs it, it fills a new cache and deletes the old build's. Model files are not
part of the build: the worker keys them by the sha256 their manifest records.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

from flask import Blueprint, current_app, jsonify, render_template, url_for

from .assets import VENDOR_FILES

bp = Blueprint("offline", __name__)

ROOT = Path(__file__).resolve().parent.parent
# The pages precached at install, so each opens offline even before its first visit.
PAGES = ["pages.index", "pages.detect", "pages.classify", "pages.hands"]


def _precached_vendor(name: str) -> bool:
    """The runtimes every page may load. Left to the first use: the LiteRT .wasm builds
    (~9 MB each, a browser runs one of three), ONNX Runtime Web (30 MB, only for an .onnx a
    visitor gives) and MediaPipe's runtime (a benchmark peer)."""
    if name.startswith(("mediapipe-hands/", "ort/")):
        return False
    return not (name.startswith("litertjs/wasm/") and name.endswith(".wasm"))


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def compute_build_id() -> str:
    """sha256 (16 hex) of what a deploy serves besides models: static files, templates and
    the pinned npm runtimes (package-lock.json plus the served table)."""
    digest = hashlib.sha256()
    for folder in (ROOT / "static", ROOT / "templates"):
        for path in _files(folder):
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    lock = ROOT / "package-lock.json"
    if lock.is_file():
        digest.update(lock.read_bytes())
    digest.update(repr(sorted(VENDOR_FILES.items())).encode())
    return digest.hexdigest()[:16]


def build_id() -> str:
    """This app's build id: computed once per app; ``APP_BUILD`` in the config pins it."""
    app = current_app
    if not app.config.get("APP_BUILD"):
        app.config["APP_BUILD"] = compute_build_id()
    return app.config["APP_BUILD"]


def precache_urls() -> list[str]:
    static = [url_for("static", filename=str(p.relative_to(ROOT / "static")))
              for p in _files(ROOT / "static")]
    vendor = [url_for("vendor.vendor_file", name=name) for name in sorted(VENDOR_FILES) if _precached_vendor(name)]
    return [url_for(endpoint) for endpoint in PAGES] + static + vendor


@bp.get("/sw.js")
def service_worker():
    body = render_template("sw.js", build=build_id(), precache=precache_urls(),
                           pages=[url_for(endpoint) for endpoint in PAGES])
    response = current_app.response_class(body, mimetype="text/javascript")
    # Browsers check the worker for updates on navigations; never answer from a cache.
    response.headers["Cache-Control"] = "no-cache"
    return response


@bp.get("/app.webmanifest")
def web_app_manifest():
    response = jsonify({
        "id": "/",
        "name": "DataRailroad — machine learning in your browser",
        "short_name": "DataRailroad",
        "description": "Object detection, image classification and hand pose, run on your own device; "
                       "works offline after one visit.",
        "start_url": url_for("pages.index"),
        "scope": "/",
        "display": "standalone",
        "background_color": "#f6f7f9",
        "theme_color": "#1f6feb",
        "icons": [{"src": url_for("static", filename="favicon.svg"), "sizes": "any",
                   "type": "image/svg+xml", "purpose": "any"}],
    })
    response.mimetype = "application/manifest+json"
    response.headers["Cache-Control"] = "no-cache"
    return response
