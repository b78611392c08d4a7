"""The TF graph of a yolov5 model, written layer by layer from its PyTorch weights (batch
norm folded into the convolutions), the box decoding and NMS appended, saved as a
SavedModel. Writing it directly keeps it free of the patterns the WASM backend rejects
(rank-4 fused biases, empty tensors before GatherV2) and avoids onnx2tf's layout guessing."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import ConverterError
from .nms import nms

RAW_HEAD = "raw_head"  # name of the decoded head tensor (before NMS) inside the graph


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


class TFGraph:
    """Writes the TF ops of one model, layer by layer, from the PyTorch weights."""

    def __init__(self, model):
        from . import modules  # torch, needed only once a model exists

        self.model = model
        self.mods = modules

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


def save_saved_model(model, folder: Path, spec: dict) -> Path:
    """The graph for the input ``spec`` (the family's input_spec), NMS appended, as a SavedModel."""
    import tensorflow as tf

    graph = TFGraph(model)
    imgsz = spec["shape"][1]

    class Exported(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec(spec["shape"], tf.float32, name=spec["name"])])
        def serve(self, images):
            return nms(graph.raw(images), imgsz)

    module = Exported()
    tf.saved_model.save(module, str(folder), signatures={"serving_default": module.serve.get_concrete_function()})
    return folder
