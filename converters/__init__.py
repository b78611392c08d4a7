"""Model converters: real source weights -> TF.js graph models + a server artifact.

Each model family lives in its own module and is registered in ``FAMILIES``. A family
module exposes ``NAME``, ``TASK``, ``SUMMARY``, ``resolve_source(weights)`` and
``build(ctx)``; ``converters.pipeline`` does everything they share (temp folder,
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


def model_folder_name(name: str, quantize: str) -> str:
    """Folder (and model id) of one build: quantised variants sit beside the fp32 one."""
    return name if quantize == "none" else f"{name}-{quantize}"
