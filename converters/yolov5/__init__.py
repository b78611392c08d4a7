"""yolov5n: the classic anchor-based Ultralytics YOLOv5 (v6/v7 checkpoints) -> TF.js,
with agnostic NMS inside the graph.

Route. The checkpoint pickles the yolov5 repository's own classes (models.yolo.Model,
models.common.Conv/C3/...). Rather than installing that code (the PyPI ``yolov5``
package imports a long tail of training dependencies), the small PyTorch modules below
carry those names and the reference forward; torch's weights_only unpickler rebuilds
them and nothing else, so a checkpoint cannot run code.
The TF graph is then written layer by layer from the same weights (batch norm folded into
the convolutions), with the box decoding and ``NonMaxSuppressionV4`` appended, saved as a
SavedModel and converted to TF.js and to LiteRT (the server artifact). Writing the graph
directly keeps it free of the patterns the WASM backend rejects (rank-4 fused biases,
empty tensors before GatherV2) and avoids onnx2tf's layout guessing.

Outputs, in this order: boxes [1,100,4] (x1,y1,x2,y2 divided by the input size),
scores [1,100], classes [1,100] (int32), valid_detections [1] (int32); rows past
valid_detections are zero.
"""
from __future__ import annotations

import functools
import math
import pickle
import pickletools
import tempfile
import types
import zipfile
from pathlib import Path

import numpy as np

from modelcontract import answers

from . import detections, parity, sources, stages
from .errors import ConverterError

NAME = "yolov5n"
TASK = "detect"
SUMMARY = "YOLOv5n (classic anchor-based, COCO 80 classes), agnostic NMS inside the graph"

URL = "https://github.com/ultralytics/yolov5/releases/download/v7.0/yolov5n.pt"
URL_SHA256 = "4f180cf23ba0717ada0badd6c685026d73d48f184d00fc159c2641284b2ac0a3"  # that file
LICENCE = sources.licence("AGPL-3.0", "https://github.com/ultralytics/yolov5/blob/master/LICENSE")
KIND = "yolov5 detection checkpoint"
EXPECTED = ("expected a yolov5 v6.0-v7.0 detection checkpoint (a pickled models.yolo.Model with the "
            "anchor-based Detect head), e.g. yolov5n.pt")
IMGSZ = 640  # the default input side; --imgsz builds another (IMGSZ_STEP multiples) beside it
IMGSZ_STEP = 32  # the largest stride: a side of whole grid cells at every level
NMS = {"iou": 0.45, "score": 0.25, "max_det": 100, "agnostic": True}
OUTPUT_KEYS = ("boxes", "scores", "classes", "valid_detections")
RAW_HEAD = "raw_head"  # name of the decoded head tensor (before NMS) inside the graph
RANDOM_SEED = 0



def input_spec(imgsz: int = IMGSZ) -> dict:
    return {
        "name": "images", "shape": [1, imgsz, imgsz, 3], "layout": "NHWC", "dtype": "float32",
        "color": "RGB", "range": [0.0, 1.0], "resize": "letterbox", "pad_value": 114,
        "scale": 1 / 255, "mean": [0.0, 0.0, 0.0], "std": [1.0, 1.0, 1.0],
    }


INPUT = input_spec()

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


# ---------------------------------------------------------------------------- source

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


def resolve_source(weights: str | None) -> sources.Source:
    if weights == "none":
        return sources.random_weights("yolov5n architecture, random init", RANDOM_SEED, nc=YOLOV5N_CFG["nc"])
    if weights is None:
        source = sources.download(URL, "yolov5n.pt", KIND)
        source.licence = LICENCE
        return source
    source = sources.local_weights(weights, KIND, (".pt",))
    # the released checkpoint, recognised by its digest, carries the release's licence
    source.licence = LICENCE if source.sha256 == URL_SHA256 else sources.user_licence(KIND)
    names = checkpoint_globals(source.path)
    if any(n.startswith("ultralytics.") for n in names):
        raise ConverterError(f"{source.path.name} is an Ultralytics 8.x checkpoint; {EXPECTED}",
                             f"convert it with: python -m converters yolo --weights {source.path}")
    if not names & {"models.yolo Model", "models.yolo DetectionModel"} or "models.yolo Detect" not in names:
        raise ConverterError(f"{source.path.name} is not a yolov5 detection checkpoint; {EXPECTED}",
                             "pass a yolov5 detection .pt with --weights PATH")
    unknown = sorted(n for n in names if not _known_global(n))
    if unknown:
        raise ConverterError(f"{source.path.name} pickles classes this converter does not load "
                             f"({', '.join(unknown)}); {EXPECTED}",
                             "pass a standard yolov5 (Conv/C3/SPPF layers) detection checkpoint, "
                             "stripped as yolov5 leaves it after training")
    return source


# ---------------------------------------------------------------------------- PyTorch side

@functools.lru_cache(maxsize=None)
def _torch_modules() -> types.SimpleNamespace:
    """The yolov5 layer classes (created lazily: importing torch is slow and
    `python -m converters list` imports this module)."""
    import torch
    from torch import nn

    class Conv(nn.Module):
        """conv -> batch norm -> SiLU."""

        def __init__(self, c1, c2, k=1, s=1, p=None):
            super().__init__()
            self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
            self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c1, c2, shortcut=True):
            super().__init__()
            self.cv1 = Conv(c1, c2, 1)
            self.cv2 = Conv(c2, c2, 3)
            self.add = shortcut and c1 == c2

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C3(nn.Module):
        """Two 1x1 branches, one through n bottlenecks, concatenated and mixed by a 1x1."""

        def __init__(self, c1, c2, n=1, shortcut=True):
            super().__init__()
            c_ = c2 // 2
            self.cv1, self.cv2, self.cv3 = Conv(c1, c_), Conv(c1, c_), Conv(2 * c_, c2)
            self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut) for _ in range(n)))

        def forward(self, x):
            return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))

    class SPPF(nn.Module):
        """Three chained max-pools, all four stages concatenated."""

        def __init__(self, c1, c2, k=5):
            super().__init__()
            c_ = c1 // 2
            self.cv1, self.cv2 = Conv(c1, c_), Conv(c_ * 4, c2)
            self.m = nn.MaxPool2d(k, 1, k // 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))

    class Concat(nn.Module):
        def __init__(self, d=1):
            super().__init__()
            self.d = d

        def forward(self, xs):
            return torch.cat(xs, self.d)

    class Detect(nn.Module):
        """Anchor-based head; forward returns the decoded [1, N, 5+nc] inference output:
        cx, cy, w, h in input pixels, objectness, class scores (all after sigmoid)."""

        def __init__(self, nc, anchors, ch):
            super().__init__()
            self.nc, self.no = nc, nc + 5
            self.nl, self.na = len(anchors), len(anchors[0]) // 2
            self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)
            # pixels for now; Model divides by the strides once they are known (as yolov5 stores them)
            self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32).view(self.nl, -1, 2))
            self.stride = None

        def maps(self, xs):
            return [self.m[i](xs[i]) for i in range(self.nl)]

        def forward(self, xs):
            out = []
            for i, p in enumerate(self.maps(xs)):
                bs, _, ny, nx = p.shape
                p = p.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).sigmoid()
                yv, xv = torch.meshgrid(torch.arange(ny, dtype=p.dtype), torch.arange(nx, dtype=p.dtype),
                                        indexing="ij")
                grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2) - 0.5
                anchor_px = (self.anchors[i] * self.stride[i]).view(1, self.na, 1, 1, 2)
                xy = (p[..., 0:2] * 2 + grid) * self.stride[i]
                wh = (p[..., 2:4] * 2) ** 2 * anchor_px
                out.append(torch.cat((xy, wh, p[..., 4:]), -1).view(bs, -1, self.no))
            return torch.cat(out, 1)

    class Model(nn.Module):
        """The layer list, each layer tagged with .i (index) and .f (input layer(s), -1 = previous)."""

        def __init__(self, cfg):
            super().__init__()
            self.yaml = cfg
            layers, ch = [], [3]
            gd, gw = cfg["depth_multiple"], cfg["width_multiple"]
            for i, (f, n, kind, args) in enumerate(cfg["backbone"] + cfg["head"]):
                n = max(round(n * gd), 1) if n > 1 else n
                if kind in ("Conv", "C3", "SPPF"):
                    c1, c2 = ch[f], math.ceil(args[0] * gw / 8) * 8
                    if kind == "Conv":
                        layer = Conv(c1, c2, *args[1:])
                    elif kind == "C3":
                        layer = C3(c1, c2, n, *args[1:])
                    else:
                        layer = SPPF(c1, c2, *args[1:])
                elif kind == "nn.Upsample":
                    layer, c2 = nn.Upsample(scale_factor=args[1], mode=args[2]), ch[f]
                elif kind == "Concat":
                    layer, c2 = Concat(args[0]), sum(ch[j] for j in f)
                elif kind == "Detect":
                    layer, c2 = Detect(cfg["nc"], cfg["anchors"], [ch[j] for j in f]), None
                else:
                    raise ValueError(f"unknown module {kind}")
                layer.i, layer.f = i, f
                layers.append(layer)
                ch = ch + [c2] if i else [c2]
            self.model = nn.Sequential(*layers)
            self.names = [str(i) for i in range(cfg["nc"])]
            # Strides from a dry run, then anchors in grid units and yolov5's prior biases.
            head = self.model[-1]
            with torch.no_grad():
                feats = self.features(torch.zeros(1, 3, 256, 256))
            head.stride = torch.tensor([256 / m.shape[-1] for m in head.maps(feats)])
            head.anchors /= head.stride.view(-1, 1, 1)
            with torch.no_grad():
                for conv, s in zip(head.m, head.stride):
                    b = conv.bias.view(head.na, -1)
                    b[:, 4] += math.log(8 / (640 / s) ** 2)  # ~8 objects per 640 image
                    b[:, 5:] += math.log(0.6 / (head.nc - 0.99))
            self.stride = head.stride

        def features(self, x):
            """Run every layer but the head; returns the head's input maps."""
            outs = []
            for layer in self.model[:-1]:
                x = self._inputs(layer, x, outs)
                x = layer(x)
                outs.append(x)
            return self._inputs(self.model[-1], x, outs)

        @staticmethod
        def _inputs(layer, x, outs):
            if layer.f == -1:
                return x
            return outs[layer.f] if isinstance(layer.f, int) else [x if j == -1 else outs[j] for j in layer.f]

        def forward(self, x):
            return self.model[-1](self.features(x))

    class DetectionModel(Model):
        """yolov5 v7.0's name for the same model."""

    classes = {"models.common": (Conv, Bottleneck, C3, SPPF, Concat),
               "models.yolo": (Detect, Model, DetectionModel)}
    for module, members in classes.items():
        for cls in members:
            # the names the yolov5 repository pickles them under, so torch.load finds these
            cls.__module__, cls.__qualname__ = module, cls.__name__
    return types.SimpleNamespace(**{cls.__name__: cls for members in classes.values() for cls in members})


def load_model(source: sources.Source):
    """The PyTorch model (float32, eval) from a checkpoint or, for random weights, the cfg."""
    import torch

    from torch import nn

    mods = _torch_modules()
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


def torch_head(model, x_nhwc: np.ndarray) -> np.ndarray:
    import torch

    with torch.no_grad():
        return model(torch.from_numpy(x_nhwc).permute(0, 3, 1, 2).contiguous()).numpy()


def nms_reference(raw: np.ndarray, imgsz: int = IMGSZ) -> dict:
    """The same agnostic NMS on the PyTorch head, with torchvision (the reference detections)."""
    import torch
    import torchvision

    p = torch.from_numpy(raw[0]).double()
    conf = p[:, 5:] * p[:, 4:5]
    score, label = conf.max(1)
    boxes = torch.cat((p[:, :2] - p[:, 2:4] / 2, p[:, :2] + p[:, 2:4] / 2), 1)
    keep = score > NMS["score"]
    boxes, score, label = boxes[keep], score[keep], label[keep]
    idx = torchvision.ops.nms(boxes, score, NMS["iou"])[:NMS["max_det"]]
    return {"boxes": (boxes[idx] / imgsz).numpy(), "scores": score[idx].numpy(), "classes": label[idx].numpy()}


# ---------------------------------------------------------------------------- TF side

def _folded(conv, bn=None) -> tuple[np.ndarray, np.ndarray]:
    """HWIO kernel and bias with batch norm folded in (in float64, then float32)."""
    w = conv.weight.detach().double().numpy()
    b = conv.bias.detach().double().numpy() if conv.bias is not None else np.zeros(w.shape[0])
    if bn is not None:
        scale = bn.weight.detach().double().numpy() / np.sqrt(bn.running_var.detach().double().numpy() + bn.eps)
        w = w * scale[:, None, None, None]
        b = (b - bn.running_mean.detach().double().numpy()) * scale + bn.bias.detach().double().numpy()
    return w.transpose(2, 3, 1, 0).astype(np.float32), b.astype(np.float32)


def _decode_constants(head, sizes: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row constants of the decode, rows ordered like yolov5 (level, anchor, y, x):
    xy = p * (2 * stride) + (grid - 0.5) * stride and wh = p^2 * (4 * anchor_px)."""
    mul_xy, add_xy, mul_wh = [], [], []
    for i, (ny, nx) in enumerate(sizes):
        s = float(head.stride[i])
        yv, xv = np.meshgrid(np.arange(ny), np.arange(nx), indexing="ij")
        grid = np.stack((xv, yv), -1).reshape(1, ny * nx, 2).astype(np.float64)
        anchors = (head.anchors[i].detach().double().numpy() * s).reshape(head.na, 1, 2)
        add_xy.append(np.broadcast_to((grid - 0.5) * s, (head.na, ny * nx, 2)).reshape(-1, 2))
        mul_xy.append(np.full((head.na * ny * nx, 1), 2 * s))
        mul_wh.append(np.broadcast_to(4 * anchors, (head.na, ny * nx, 2)).reshape(-1, 2))
    return tuple(np.concatenate(a)[None].astype(np.float32) for a in (mul_xy, add_xy, mul_wh))


class _TFGraph:
    """Writes the TF ops of one model, layer by layer, from the PyTorch weights."""

    def __init__(self, model):
        self.model = model
        self.mods = _torch_modules()

    def conv(self, m, x, name):
        import tensorflow as tf

        if type(m.act).__name__ != "SiLU" or m.conv.groups != 1 or m.conv.dilation != (1, 1):
            raise ConverterError(f"{name}: only SiLU, ungrouped, undilated convolutions are supported "
                                 f"(got {m.act}, groups={m.conv.groups}, dilation={m.conv.dilation})",
                                 "pass a standard yolov5 v6.0-v7.0 detection checkpoint")
        kernel, bias = _folded(m.conv, m.bn)
        k, s, p = m.conv.kernel_size[0], m.conv.stride[0], m.conv.padding[0]
        if s == 1 and k % 2 == 1 and p == k // 2:
            padding = "SAME"  # identical to torch's symmetric padding here
        else:
            # torch pads symmetrically; TF's SAME would pad bottom/right only for stride 2
            x = tf.pad(x, [[0, 0], [p, p], [p, p], [0, 0]])
            padding = "VALID"
        y = tf.nn.conv2d(x, tf.constant(kernel, name=f"{name}/kernel"), s, padding)
        y = tf.nn.bias_add(y, tf.constant(bias, name=f"{name}/bias"))
        return y * tf.sigmoid(y)  # SiLU, spelled out so every runtime sees two plain ops

    def layer(self, m, x, name):
        import tensorflow as tf

        mods = self.mods
        if isinstance(m, mods.Conv):
            return self.conv(m, x, f"{name}/conv")
        if isinstance(m, mods.Bottleneck):
            y = self.conv(m.cv2, self.conv(m.cv1, x, f"{name}/cv1"), f"{name}/cv2")
            return x + y if m.add else y
        if isinstance(m, mods.C3):
            y = self.conv(m.cv1, x, f"{name}/cv1")
            for j, b in enumerate(m.m):
                y = self.layer(b, y, f"{name}/m{j}")
            return self.conv(m.cv3, tf.concat([y, self.conv(m.cv2, x, f"{name}/cv2")], -1), f"{name}/cv3")
        if isinstance(m, mods.SPPF):
            x = self.conv(m.cv1, x, f"{name}/cv1")
            k = m.m.kernel_size
            y1 = tf.nn.max_pool2d(x, k, 1, "SAME")  # SAME max-pool ignores padding, like torch's -inf pad
            y2 = tf.nn.max_pool2d(y1, k, 1, "SAME")
            y3 = tf.nn.max_pool2d(y2, k, 1, "SAME")
            return self.conv(m.cv2, tf.concat([x, y1, y2, y3], -1), f"{name}/cv2")
        if isinstance(m, mods.Concat):
            if m.d != 1:
                raise ConverterError(f"Concat over dim {m.d} is not supported", None)
            return tf.concat(x, -1)
        if type(m).__name__ == "Upsample":
            if m.mode != "nearest" or m.size is not None:
                raise ConverterError(f"Upsample {m.mode} size={m.size} is not supported", None)
            f = int(m.scale_factor)
            _, h, w, _ = x.shape
            # floor(dst / f) source pixels = torch's "nearest"
            return tf.raw_ops.ResizeNearestNeighbor(images=x, size=[h * f, w * f], align_corners=False,
                                                    half_pixel_centers=False)
        raise ConverterError(f"layer {type(m).__name__} is not supported by this converter", None)

    def head(self, head, xs):
        """Decoded head [1, N, 5+nc] in yolov5's row order, named RAW_HEAD."""
        import tensorflow as tf

        levels, sizes = [], []
        for i, x in enumerate(xs):
            kernel, bias = _folded(head.m[i])
            p = tf.nn.conv2d(x, tf.constant(kernel, name=f"detect/m{i}/kernel"), 1, "VALID")
            p = tf.sigmoid(tf.nn.bias_add(p, tf.constant(bias, name=f"detect/m{i}/bias")))
            _, ny, nx, _ = p.shape
            # [1,ny,nx,na*no] -> [1,na*ny*nx,no] through rank-4 ops only (rank-5 transposes are
            # a liability across TF.js backends)
            p = tf.reshape(p, [1, ny * nx, head.na, head.no])
            p = tf.reshape(tf.transpose(p, [0, 2, 1, 3]), [1, head.na * ny * nx, head.no])
            levels.append(p)
            sizes.append((ny, nx))
        p = tf.concat(levels, 1)
        mul_xy, add_xy, mul_wh = _decode_constants(head, sizes)
        xy = p[..., 0:2] * tf.constant(mul_xy, name="decode/mul_xy") + tf.constant(add_xy, name="decode/add_xy")
        wh = tf.square(p[..., 2:4]) * tf.constant(mul_wh, name="decode/mul_wh")
        return tf.concat([xy, wh, p[..., 4:]], -1, name=RAW_HEAD)

    def raw(self, images):
        outs, x = [], images
        layers = list(self.model.model)
        for m in layers[:-1]:
            x = self.model._inputs(m, x, outs)
            x = self.layer(m, x, f"l{m.i}")
            outs.append(x)
        return self.head(layers[-1], self.model._inputs(layers[-1], x, outs))


def nms(raw, imgsz: int = IMGSZ):
    """Agnostic NMS on the decoded head, padded to max_det rows (no empty tensors: the
    WASM backend fails on them before GatherV2); boxes divided by the input side."""
    import tensorflow as tf

    p = raw[0]
    conf = p[:, 5:] * p[:, 4:5]
    score = tf.reduce_max(conf, 1)
    label = tf.argmax(conf, 1, output_type=tf.int32)
    boxes = tf.concat([p[:, 0:2] - p[:, 2:4] / 2, p[:, 0:2] + p[:, 2:4] / 2], 1)
    idx, valid = tf.raw_ops.NonMaxSuppressionV4(
        boxes=boxes, scores=score, max_output_size=NMS["max_det"], iou_threshold=NMS["iou"],
        score_threshold=NMS["score"], pad_to_max_output_size=True)
    keep = tf.range(NMS["max_det"]) < valid
    keep_f = tf.cast(keep, tf.float32)
    return {
        "boxes": (tf.gather(boxes, idx) * (keep_f[:, None] / imgsz))[None],
        "scores": (tf.gather(score, idx) * keep_f)[None],
        "classes": (tf.gather(label, idx) * tf.cast(keep, tf.int32))[None],
        "valid_detections": tf.reshape(valid, [1]),
    }


def save_saved_model(model, folder: Path, imgsz: int = IMGSZ) -> Path:
    import tensorflow as tf

    graph = _TFGraph(model)
    spec = input_spec(imgsz)

    class Exported(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(spec["shape"], tf.float32, name=spec["name"])])
        def serve(self, images):
            return nms(graph.raw(images), imgsz)

    module = Exported()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve.get_concrete_function()})
    return folder


# ---------------------------------------------------------------------------- stages

def build(ctx) -> dict:
    return stages.run(ctx, load, export, verify, describe)


def load(ctx) -> types.SimpleNamespace:
    """The PyTorch model, its labels, and its detections on bus.jpg at the build's input size."""
    from modelcontract.geometry import prepare

    model = load_model(ctx.source)
    head = model.model[-1]
    labels = class_names(model)
    if head.nc != len(labels):
        raise ConverterError(f"checkpoint has {head.nc} classes but {len(labels)} names", None)
    ctx.log(f"{sum(p.numel() for p in model.parameters()):,} parameters, {head.nc} classes, "
            f"strides {[int(s) for s in head.stride]}, input {ctx.imgsz} px")
    spec = input_spec(ctx.imgsz)
    x, _ = prepare(sources.load_photo("bus.jpg"), spec)
    raw = torch_head(model, x)
    return types.SimpleNamespace(model=model, labels=labels, spec=spec, x=x, raw=raw,
                                 detections=nms_reference(raw, ctx.imgsz),
                                 answer=padded_outputs(nms_reference(torch_head(model, answers.model_input(spec)),
                                                                     ctx.imgsz)))


def padded_outputs(found: dict) -> dict:
    """torchvision's detections in the graph's four outputs (max_det rows, zeros past the valid ones)."""
    n, rows = len(found["scores"]), NMS["max_det"]
    boxes, scores, classes = np.zeros((1, rows, 4)), np.zeros((1, rows)), np.zeros((1, rows))
    boxes[0, :n], scores[0, :n], classes[0, :n] = found["boxes"], found["scores"], found["classes"]
    return {"boxes": boxes, "scores": scores, "classes": classes, "valid_detections": np.array([n])}


def export(ctx, loaded) -> dict:
    """The TF graph (SavedModel) -> tfjs/ and model.tflite; returns the graph's tensor names."""
    from . import tfjs, tflite

    with tempfile.TemporaryDirectory(prefix="yolov5-") as tmp:
        saved = save_saved_model(loaded.model, Path(tmp) / "saved_model", ctx.imgsz)
        model_json = tfjs.convert_saved_model(saved, ctx.workdir / "tfjs", ctx.quantize)
        tflite.saved_model_to_tflite(saved, ctx.workdir / "model.tflite")
    sig = tfjs.graph_signature(model_json)
    out_names = {o["key"]: o["name"] for o in sig["outputs"]}
    if sorted(out_names) != sorted(OUTPUT_KEYS) or [i["name"] for i in sig["inputs"]] != [INPUT["name"]]:
        raise ConverterError(f"unexpected graph signature {sig}", None)
    return {"outputs": out_names, "raw_node": _node_named(model_json, RAW_HEAD)}


def detections_of(outputs: dict, names: dict) -> dict:
    """Valid rows of the four NMS outputs (names: output key -> graph tensor name), boxes as
    fractions of the input (modelcontract.decode.nms_rows)."""
    from modelcontract.decode import nms_rows

    return nms_rows({key: outputs[names[key]] for key in OUTPUT_KEYS}, (1, 1))


match_detections = detections.match_detections  # (benches use it under this module's name)
SAME_DETECTIONS = {"same_count": True, "min_iou_same_class": 0.99}  # the fp32 target beside the raw head's


def _same(found: dict) -> bool:
    return found["count"] == found["reference_count"] and \
        found["min_iou_same_class"] >= SAME_DETECTIONS["min_iou_same_class"]


def verify(ctx, loaded, exported) -> types.SimpleNamespace:
    """Raw head (TF.js) and detections (TF.js, LiteRT) against PyTorch + torchvision NMS on
    bus.jpg; for a size other than 640, the agreement with the 640-px reference."""
    names = exported["outputs"]

    def compare(tfjs_out: dict, litert_out: dict) -> stages.Comparison:
        tfjs_det = match_detections(loaded.detections, detections_of(tfjs_out, names))
        server_det = match_detections(loaded.detections, detections_of(litert_out, {k: k for k in OUTPUT_KEYS}))
        return stages.Comparison(
            tfjs={**parity.compare(loaded.raw, tfjs_out[exported["raw_node"]]), "detections": tfjs_det},
            server={"detections": server_det},
            # quantised graphs are held to their raw-head target only; their detections are recorded
            tfjs_ok=_same(tfjs_det) or ctx.quantize != "none", server_ok=_same(server_det))

    checked = stages.check(ctx, tfjs_model="tfjs/model.json", tflite_model="model.tflite",
                           inputs={INPUT["name"]: loaded.x}, compare=compare,
                           tfjs_outputs=[exported["raw_node"]] + [names[k] for k in OUTPUT_KEYS])
    agreement = None
    if ctx.imgsz != IMGSZ:
        agreement = agreement_with_default_size(ctx, loaded.model)
        ctx.log(f"keeps {agreement['kept']}/{agreement['reference_detections']} of the {IMGSZ}-px detections "
                f"({agreement['rule']}) on {', '.join(agreement['photos'])}")
    return types.SimpleNamespace(checked=checked, agreement=agreement)


def agreement_with_default_size(ctx, model) -> dict:
    """How many of the same weights' detections at 640 px (PyTorch) this build keeps (LiteRT),
    on the real photos, boxes compared in photo pixels."""
    from modelcontract.geometry import prepare

    from . import tflite

    keys = {k: k for k in OUTPUT_KEYS}

    def in_photo_pixels(found: dict, transform, side: int) -> dict:
        return {**found, "boxes": transform.to_source(found["boxes"] * side)}

    reference, candidate = {}, {}
    for photo in detections.AGREEMENT_PHOTOS:
        image = sources.load_photo(photo)
        x, transform = prepare(image, input_spec(IMGSZ))
        reference[photo] = in_photo_pixels(nms_reference(torch_head(model, x), IMGSZ), transform, IMGSZ)
        x, transform = prepare(image, input_spec(ctx.imgsz))
        out = tflite.run_tflite(ctx.workdir / "model.tflite", {INPUT["name"]: x})
        candidate[photo] = in_photo_pixels(detections_of(out, keys), transform, ctx.imgsz)
    return detections.agreement(reference, candidate, f"{NAME} at {IMGSZ} px (PyTorch, same weights)",
                                IMGSZ, runtime="litert")


def _node_named(model_json: dict, suffix: str) -> str:
    for node in model_json["modelTopology"]["node"]:
        if node["name"] == suffix or node["name"].endswith("/" + suffix):
            return node["name"]
    raise ConverterError(f"the converted graph lost its {suffix} node", None)


def describe(ctx, loaded, exported, verified) -> dict:
    import torch
    import torchvision

    names, head, checked = exported["outputs"], loaded.model.model[-1], verified.checked
    fields = {
        "title": "YOLOv5n (anchor-based, NMS in graph)" + ("" if ctx.imgsz == IMGSZ else f", {ctx.imgsz} px"),
        "input": loaded.spec,
        "outputs": {
            "format": "nms",
            "tensors": [
                {"name": names["boxes"], "key": "boxes", "shape": [1, NMS["max_det"], 4], "dtype": "float32",
                 "meaning": "x1, y1, x2, y2 in model-input pixels divided by the input size (0..1); "
                            "rows past valid_detections are zero"},
                {"name": names["scores"], "key": "scores", "shape": [1, NMS["max_det"]], "dtype": "float32",
                 "meaning": "objectness x best class probability"},
                {"name": names["classes"], "key": "classes", "shape": [1, NMS["max_det"]], "dtype": "int32",
                 "meaning": "class index into labels"},
                {"name": names["valid_detections"], "key": "valid_detections", "shape": [1], "dtype": "int32",
                 "meaning": "number of valid rows"},
            ],
            "execute": "executeAsync",
        },
        "nms": dict(NMS),
        "labels": loaded.labels,
        "tfjs": {"model": "tfjs/model.json"},
        "server": {"runtime": "litert", "model": "model.tflite", "quantization": "none",
                   "outputs": list(OUTPUT_KEYS)},
        "anchors": {"strides": [int(s) for s in head.stride],
                    "anchors_px": (head.anchors * head.stride.view(-1, 1, 1)).tolist()},
        "parity": {
            "photo": "bus.jpg",
            "reference": {"runtime": "pytorch", "version": torch.__version__,
                          "nms": f"torchvision.ops.nms {torchvision.__version__}"},
            "measured_on": f"decoded head before NMS ({RAW_HEAD}, [1,{loaded.raw.shape[1]},{loaded.raw.shape[2]}])",
            "tfjs": checked.tfjs,
            "server": checked.server,
            "target_relative": checked.target,
            "detections_target": SAME_DETECTIONS,
            "passed": checked.passed,
        },
        "speed": checked.speed,
        "answer_check": stages.answer_check(ctx, {"model": stages.AnswerPart(
            reference=loaded.answer, tfjs_model="tfjs/model.json",
            inputs={INPUT["name"]: answers.model_input(loaded.spec)},
            tfjs_outputs=[names[k] for k in OUTPUT_KEYS],
            roles=lambda out: {k: out[names[k]] for k in OUTPUT_KEYS})}, f"PyTorch {torch.__version__} + torchvision NMS"),
    }
    if verified.agreement is not None:
        fields["agreement"] = verified.agreement
    return fields
