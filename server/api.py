"""JSON API under /api/v1 (the server-side inference routes arrive with the fallback API)."""
from __future__ import annotations

from flask import Blueprint, jsonify

from . import manifests

bp = Blueprint("api", __name__, url_prefix="/api/v1")


@bp.get("/models")
def list_models():
    return jsonify(models=[manifests.summary(m) for m in manifests.load_all()])
