"""A yolov5 checkpoint: what it may pickle, checked without unpickling it, and the model
read through torch's weights_only unpickler, which rebuilds tensors and the layer classes
of ``modules`` and nothing else, so a checkpoint cannot run code. Also the yolov5n
architecture that random weights are built from."""
from __future__ import annotations

import pickle
import pickletools
import zipfile
from pathlib import Path

from .. import sources
from ..errors import ConverterError

EXPECTED = ("expected a yolov5 v6.0-v7.0 detection checkpoint (a pickled models.yolo.Model with the "
            "anchor-based Detect head), e.g. yolov5n.pt")
RANDOM_SEED = 0

# The yolov5n architecture (yolov5 v6.0+ yolov5n.yaml) for --weights none.
# Rows: [from, repeats, module, args]; channels are scaled by width_multiple.
YOLOV5N_CFG = {
    "nc": 80, "depth_multiple": 0.33, "width_multiple": 0.25,
    "anchors": [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]],
    "backbone": [
        [-1, 1, "Conv", [64, 6, 2, 2]], [-1, 1, "Conv", [128, 3, 2]], [-1, 3, "C3", [128]],
        [-1, 1, "Conv", [256, 3, 2]], [-1, 6, "C3", [256]], [-1, 1, "Conv", [512, 3, 2]],
        [-1, 9, "C3", [512]], [-1, 1, "Conv", [1024, 3, 2]], [-1, 3, "C3", [1024]],
        [-1, 1, "SPPF", [1024, 5]],
    ],
    "head": [
        [-1, 1, "Conv", [512, 1, 1]], [-1, 1, "nn.Upsample", [None, 2, "nearest"]],
        [[-1, 6], 1, "Concat", [1]], [-1, 3, "C3", [512, False]],
        [-1, 1, "Conv", [256, 1, 1]], [-1, 1, "nn.Upsample", [None, 2, "nearest"]],
        [[-1, 4], 1, "Concat", [1]], [-1, 3, "C3", [256, False]],
        [-1, 1, "Conv", [256, 3, 2]], [[-1, 14], 1, "Concat", [1]], [-1, 3, "C3", [512, False]],
        [-1, 1, "Conv", [512, 3, 2]], [[-1, 10], 1, "Concat", [1]], [-1, 3, "C3", [1024, False]],
        [[17, 20, 23], 1, "Detect", ["nc", "anchors"]],
    ],
}

# Classes a checkpoint may reference; anything else is refused before loading.
# (v7.0 renamed Model to DetectionModel and kept Model as an alias.)
_YOLOV5_CLASSES = {"Model", "DetectionModel", "Detect", "Conv", "C3", "Bottleneck", "SPPF", "Concat"}
_OTHER_ALLOWED = ("torch", "collections")
_BUILTINS_ALLOWED = {"set", "frozenset"}


def checkpoint_globals(path: Path, expected: str = EXPECTED) -> set[str]:
    """'module name' of every class a PyTorch zip checkpoint pickles, read without
    executing it (pickletools only lists the opcodes)."""
    try:
        with zipfile.ZipFile(path) as zf:
            pkl = next((n for n in zf.namelist() if n.endswith("data.pkl")), None)
            if pkl is None:
                raise ValueError("no data.pkl inside")
            data = zf.read(pkl)
        found, strings = set(), []
        for op, arg, _ in pickletools.genops(data):
            if op.name == "GLOBAL":
                found.add(arg)
            elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
                strings.append(arg)
            elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
                found.add(f"{strings[-2]} {strings[-1]}")
        return found
    except (zipfile.BadZipFile, ValueError, pickle.UnpicklingError, OSError) as exc:
        raise ConverterError(f"{path.name} is not a PyTorch checkpoint ({exc}); {expected}",
                             "pass such a .pt file with --weights PATH") from None


def _known_global(name: str) -> bool:
    module, _, cls = name.partition(" ")
    if module in ("models.common", "models.yolo"):
        return cls in _YOLOV5_CLASSES
    if module in ("builtins", "__builtin__"):
        return cls in _BUILTINS_ALLOWED
    return module.split(".")[0] in _OTHER_ALLOWED


def check_globals(path: Path) -> None:
    """Refuse, before anything is unpickled, a checkpoint that is not a yolov5 detection model
    (an Ultralytics 8.x one is sent to the yolo converter) or that pickles other classes."""
    names = checkpoint_globals(path)
    if any(n.startswith("ultralytics.") for n in names):
        raise ConverterError(f"{path.name} is an Ultralytics 8.x checkpoint; {EXPECTED}",
                             f"convert it with: python -m converters yolo --weights {path}")
    if not names & {"models.yolo Model", "models.yolo DetectionModel"} or "models.yolo Detect" not in names:
        raise ConverterError(f"{path.name} is not a yolov5 detection checkpoint; {EXPECTED}",
                             "pass a yolov5 detection .pt with --weights PATH")
    unknown = sorted(n for n in names if not _known_global(n))
    if unknown:
        raise ConverterError(f"{path.name} pickles classes this converter does not load "
                             f"({', '.join(unknown)}); {EXPECTED}",
                             "pass a standard yolov5 (Conv/C3/SPPF layers) detection checkpoint, "
                             "stripped as yolov5 leaves it after training")


def load_model(source: sources.Source):
    """The PyTorch model (float32, eval) from a checkpoint or, for random weights, the cfg."""
    import torch
    from torch import nn

    from . import modules as mods

    if source.path is None:
        torch.manual_seed(RANDOM_SEED)
        return mods.Model(YOLOV5N_CFG).float().eval()

    allowed = [getattr(mods, name) for name in sorted(_YOLOV5_CLASSES)] + [
        nn.Sequential, nn.ModuleList, nn.Conv2d, nn.BatchNorm2d, nn.SiLU, nn.MaxPool2d, nn.Upsample, set]
    try:
        # weights_only: the file can rebuild tensors and the classes above, never run code
        with torch.serialization.safe_globals(allowed):
            ckpt = torch.load(source.path, map_location="cpu", weights_only=True)
    except Exception as exc:  # any unpickling failure means the file is not what we expect
        reason = str(exc).strip().splitlines()[0][:300]  # torch's weights_only errors run long
        raise ConverterError(f"could not load {source.path.name}: {reason}; {EXPECTED}",
                             "pass such a checkpoint with --weights PATH") from None
    model = (ckpt.get("ema") or ckpt.get("model")) if isinstance(ckpt, dict) else None
    if not isinstance(model, mods.Model):
        raise ConverterError(f"{source.path.name} holds no yolov5 Model; {EXPECTED}",
                             "pass such a checkpoint with --weights PATH")
    return model.float().eval()


def class_names(model) -> list[str]:
    names = model.names
    names = [names[i] for i in sorted(names)] if isinstance(names, dict) else list(names)
    if names == [str(i) for i in range(len(names))] and len(names) == 80:
        names = sources.coco_names()  # random weights: the COCO layout the cfg describes
    return names
