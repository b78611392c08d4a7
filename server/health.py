"""Liveness and readiness."""
from __future__ import annotations

from flask import Blueprint, jsonify

from . import manifests

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    models = [manifests.summary(m) for m in manifests.load_all()]
    tasks = sorted({m["task"] for m in models})
    return jsonify(status="ready", models=models, tasks=tasks)
