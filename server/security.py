"""Response headers every page and file gets."""
from __future__ import annotations

import base64
import hashlib

from flask import Flask, request

from .assets import IMPORT_MAP


def _script_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


# No inline script but the import map (allowed by its hash): every script is a same-origin
# file. 'wasm-unsafe-eval' lets the TF.js and LiteRT WASM modules compile. TF.js's threads
# are blob: workers that importScripts() another blob: (only same-origin code can mint blob:
# URLs); LiteRT's threads are workers of its own same-origin script.
CONTENT_SECURITY_POLICY = "; ".join([
    "default-src 'self'",
    f"script-src 'self' 'wasm-unsafe-eval' blob: {_script_hash(IMPORT_MAP)}",
    "worker-src 'self' blob:",
    "style-src 'self'",
    "img-src 'self' blob: data:",
    "media-src 'self' blob: mediastream:",
    "connect-src 'self' blob: data:",
    "object-src 'none'",
    "base-uri 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
])

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    # frame-ancestors 'none' for browsers that predate it.
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # Cross-origin isolation: needed for SharedArrayBuffer, i.e. multi-threaded WASM.
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Embedder-Policy": "require-corp",
    "Cross-Origin-Resource-Policy": "same-origin",
    # The camera is used by our own pages only.
    "Permissions-Policy": "camera=(self), microphone=(), geolocation=()",
}

# Answers computed per request (API results, errors, health): never stored by a browser or proxy.
NO_STORE_PREFIXES = ("/api/", "/healthz", "/readyz")


def register(app: Flask) -> None:
    @app.after_request
    def add_security_headers(response):
        for name, value in HEADERS.items():
            response.headers.setdefault(name, value)
        if request.path.startswith(NO_STORE_PREFIXES):
            response.headers["Cache-Control"] = "no-store"
        return response
