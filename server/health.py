"""Liveness and readiness.

/healthz: the process answers (nothing else is checked; it never touches a model).
/readyz: 200 ``ready`` when at least one model is installed and none is broken; else 503
``not_ready`` with the reason. Each model reports ``status``: ``ready`` (files match the
manifest, each .tflite ran once in a trial child process), ``broken`` (with ``error``: the
API answers 503 for that model only; a model whose manifest.json is invalid is listed as
broken with its id, error and task null) or ``browser_only`` (no server artifact), and
``verified``: ``sha256``, or ``size`` for a manifest written before files_sha256.
"""
from __future__ import annotations

from flask import Blueprint, current_app, jsonify

from . import manifests

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    return jsonify(status="ok")


@bp.get("/readyz")
def readyz():
    from . import inference

    models = inference.registry(current_app).status()  # hashing and trial runs, cached once done
    tasks = sorted({m["task"] for m in models if m["status"] != "broken" and m["task"]})
    broken = [m["id"] for m in models if m["status"] == "broken"]
    if not models:
        reason = f"no model is installed in {manifests.models_dir()}; install them with: make models"
    elif broken:
        reason = f"broken model(s): {', '.join(broken)} (see each model's error)"
    else:
        return jsonify(status="ready", models=models, tasks=tasks)
    return jsonify(status="not_ready", reason=reason, models=models, tasks=tasks), 503
