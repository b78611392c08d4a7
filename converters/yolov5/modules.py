"""The yolov5 repository's layer classes (models.common / models.yolo), with the reference
forward: what a yolov5 checkpoint unpickles into. Importing this module imports torch, so
the package imports it only where a model is built or run (``python -m converters list``
imports the package)."""
from __future__ import annotations

import math

import numpy as np
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


# The names the yolov5 repository pickles these classes under, so torch.load finds them here.
PICKLED = {"models.common": (Conv, Bottleneck, C3, SPPF, Concat),
           "models.yolo": (Detect, Model, DetectionModel)}
for _module, _members in PICKLED.items():
    for _cls in _members:
        _cls.__module__, _cls.__qualname__ = _module, _cls.__name__
CLASSES = {cls.__name__: cls for members in PICKLED.values() for cls in members}


def torch_head(model, x_nhwc: np.ndarray) -> np.ndarray:
    """The decoded head [1, N, 5+nc] of ``model`` on an NHWC input."""
    with torch.no_grad():
        return model(torch.from_numpy(x_nhwc).permute(0, 3, 1, 2).contiguous()).numpy()
