"""The four HTML pages. Each page gets the installed models of its task, or an install hint."""
from __future__ import annotations

from flask import Blueprint, current_app, render_template, url_for

from modelcontract import limits

from . import manifests

bp = Blueprint("pages", __name__)

# One tile per task on the index; the YOLO tasks all open /detect, on their group's first model.
DEMOS = [
    {"endpoint": "pages.detect", "task": "detect", "group": "detect", "title": "Live detection",
     "what": "YOLO finds the 80 COCO object classes in your webcam, a video or an image, and tracks and counts them."},
    {"endpoint": "pages.detect", "task": "detect", "group": "segment", "title": "Instance segmentation",
     "what": "The outline of each object, its mask drawn over the live camera (YOLO11n-seg, COCO)."},
    {"endpoint": "pages.detect", "task": "detect", "group": "pose", "title": "Human pose",
     "what": "17 body keypoints and a skeleton per person, each point with its confidence (YOLO11n-pose)."},
    {"endpoint": "pages.detect", "task": "detect", "group": "obb", "title": "Oriented boxes",
     "what": "Rotated boxes around planes, ships and vehicles in aerial photos (YOLO26n-obb, DOTA)."},
    {"endpoint": "pages.classify", "task": "classify", "title": "Image classification",
     "what": "EfficientNet names what is in your photos: top-5 of the 1000 ImageNet classes."},
    {"endpoint": "pages.hands", "task": "handpose", "title": "Hand pose",
     "what": "21 keypoints per hand on the live webcam, and an emoticon for seven gestures."},
]


# The pages that take a visitor's own model (static/js/ui/model-drop.js): they open with none
# installed too, and wait for one.
TAKES_YOUR_MODEL = ("detect", "classify")


def picker_groups(models: list[dict]) -> list[tuple[str, list[dict]]]:
    """The picker's option groups: (label, models) by what they find, in preference order."""
    groups: dict[str, list[dict]] = {}
    for m in models:
        groups.setdefault(m["group"], []).append(m)
    return [(manifests.GROUP_LABELS.get(g, g), ms) for g, ms in groups.items()]


def _page(template: str, task: str, title: str):
    models = [manifests.summary(m) for m in manifests.by_task(task)]
    # max_upload_bytes: this server's request body limit (the setting DATARAILROAD_MAX_UPLOAD_BYTES;
    # null: none), so the Server backend sends a file as it is only when the API takes it.
    return render_template(template, title=title, task=task, models=models, groups=picker_groups(models),
                           building=manifests.registry().building(), limits=limits,
                           install_hint=manifests.INSTALL_HINTS[task], takes_your_model=task in TAKES_YOUR_MODEL,
                           page_data={"task": task, "models": models,
                                      "max_upload_bytes": current_app.config.get("MAX_CONTENT_LENGTH")})


@bp.get("/")
def index():
    installed = manifests.load_all()
    demos = []
    for demo in DEMOS:
        models = [manifests.summary(m) for m in installed if m.get("task") == demo["task"]
                  and manifests.group(m) == demo.get("group", manifests.group(m))]
        # a YOLO task's tile opens /detect on its own first model
        url = url_for(demo["endpoint"], **({"model": models[0]["id"]} if models and "group" in demo else {}))
        demos.append({**demo, "models": models, "url": url,
                      "install_hint": manifests.INSTALL_HINTS[demo.get("group", demo["task"])]})
    return render_template("index.html", title="DataRailroad", demos=demos, building=manifests.registry().building(),
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
