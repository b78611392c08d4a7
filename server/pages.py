"""The four HTML pages. Each page gets the installed models of its task, or an install hint."""
from __future__ import annotations

from flask import Blueprint, current_app, render_template

from modelcontract import limits

from . import manifests

bp = Blueprint("pages", __name__)

DEMOS = [
    {"endpoint": "pages.detect", "task": "detect", "title": "Live detection",
     "what": "YOLOv5n finds the 80 COCO object classes in your webcam, a video or an image."},
    {"endpoint": "pages.classify", "task": "classify", "title": "Image classification",
     "what": "EfficientNet names what is in your photos: top-5 of the 1000 ImageNet classes."},
    {"endpoint": "pages.hands", "task": "handpose", "title": "Hand pose",
     "what": "21 keypoints per hand on the live webcam, and an emoticon for seven gestures."},
]


# The pages that take a visitor's own model (static/js/ui/model-drop.js): they open with none
# installed too, and wait for one.
TAKES_YOUR_MODEL = ("detect", "classify")


def _page(template: str, task: str, title: str):
    models = [manifests.summary(m) for m in manifests.by_task(task)]
    # max_upload_bytes: this server's request body limit (the setting DATARAILROAD_MAX_UPLOAD_BYTES;
    # null: none), so the Server backend sends a file as it is only when the API takes it.
    return render_template(template, title=title, task=task, models=models, limits=limits,
                           install_hint=manifests.INSTALL_HINTS[task], takes_your_model=task in TAKES_YOUR_MODEL,
                           page_data={"task": task, "models": models,
                                      "max_upload_bytes": current_app.config.get("MAX_CONTENT_LENGTH")})


@bp.get("/")
def index():
    installed = manifests.load_all()
    demos = []
    for demo in DEMOS:
        models = [manifests.summary(m) for m in installed if m.get("task") == demo["task"]]
        demos.append({**demo, "models": models, "install_hint": manifests.INSTALL_HINTS[demo["task"]]})
    return render_template("index.html", title="DataRailroad", demos=demos,
                           page_data={"task": None, "models": [manifests.summary(m) for m in installed]})


@bp.get("/detect")
def detect():
    return _page("detect.html", "detect", "Live detection")


@bp.get("/classify")
def classify():
    return _page("classify.html", "classify", "Image classification")


@bp.get("/hands")
def hands():
    return _page("hands.html", "handpose", "Hand pose")
