"""Model converters: real source weights -> TF.js graph models + a server artifact.

Each model family lives in its own module and is registered in ``FAMILIES``. A family
module exposes ``NAME``, ``TASK``, ``SUMMARY``, ``resolve_source(weights)`` and
``build(ctx)``, which runs its four stages through ``converters.stages`` (load -> export ->
verify -> describe; verify is shared); the detectors also declare ``IMGSZ`` / ``IMGSZ_STEP``
(they take --imgsz). ``converters.pipeline`` does everything else they share (temp folder,
idempotence, progress, manifest, atomic install). Nothing heavy is imported here, so
``python -m converters list`` and the Flask app stay fast.
"""

# name -> module path, in the order `all` builds them.
FAMILIES = {
    "yolov5n": "converters.yolov5",
    "yolo": "converters.ultralytics_yolo",
    "efficientnetv2-b0": "converters.efficientnetv2",
    "efficientnet-lite0": "converters.efficientnet_lite",
    "handpose": "converters.handpose",
}

QUANTIZATIONS = ("none", "float16", "uint8")


def model_folder_name(name: str, quantize: str, imgsz: int | None = None, default_imgsz: int | None = None) -> str:
    """Folder (and model id) of one build: other input sizes (yolov5n-320) and quantised
    variants (yolov5n-float16, yolov5n-320-float16) sit beside the default one."""
    if imgsz is not None and imgsz != default_imgsz:
        name = f"{name}-{imgsz}"
    return name if quantize == "none" else f"{name}-{quantize}"
