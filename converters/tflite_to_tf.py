"""Rebuild a float .tflite flatbuffer as a TensorFlow function (-> SavedModel -> TF.js).

There is no stock TFLite -> SavedModel converter, and the MediaPipe Hands models exist
only as .tflite. Those graphs are small convnets made of a dozen builtin ops, so this
reads the flatbuffer (TF's own generated schema, through ``flatbuffer_utils``) and
replays each operator with the equivalent TF op. Weights stored as float16 behind
DEQUANTIZE ops are widened to float32 once, when the graph is read (exactly what the
LiteRT interpreter does at load time). Any other operator fails with a clear error
rather than producing a silently wrong model.

Layout notes (TFLite -> TF):
  CONV_2D filter            [out, kh, kw, in]      -> [kh, kw, in, out]
  DEPTHWISE_CONV_2D filter  [1, kh, kw, in*mult]   -> [kh, kw, in, mult]
  FULLY_CONNECTED weights   [out, in]              -> [in, out] (see _fully_connected)
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import ConverterError

# TFLite TensorType enum -> numpy dtype (only the types these float graphs use).
_DTYPES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.uint8, 4: np.int64, 9: np.int8}
_PADDING = {0: "SAME", 1: "VALID"}


@dataclass
class Tensor:
    name: str
    shape: list
    dtype: type
    const: np.ndarray | None  # weights / shape constants; None for activations


class TFLiteGraph:
    """The single subgraph of a float .tflite model, ready to be replayed with TF ops."""

    def __init__(self, path: Path):
        from tensorflow.lite.tools import flatbuffer_utils

        self.path = Path(path)
        model = flatbuffer_utils.read_model(str(self.path))
        if len(model.subgraphs) != 1:
            raise ConverterError(f"{self.path.name}: {len(model.subgraphs)} subgraphs; only single-graph "
                                 "models are supported", "use a plain float TFLite model")
        graph = model.subgraphs[0]
        self.tensors = [self._tensor(model, t) for t in graph.tensors]
        self.inputs = list(graph.inputs)
        self.outputs = list(graph.outputs)
        self.operators = []
        for op in graph.operators:
            opname = flatbuffer_utils.opcode_to_name(model, op.opcodeIndex)
            self.operators.append((opname, list(op.inputs), list(op.outputs), op.builtinOptions))
        self._fold_dequantize()
        unknown = sorted({name for name, *_ in self.operators if name not in _OPS})
        if unknown:
            raise ConverterError(f"{self.path.name}: unsupported TFLite operator(s) {', '.join(unknown)}",
                                 f"add them to converters/tflite_to_tf.py (supported: {', '.join(sorted(_OPS))})")

    @staticmethod
    def _tensor(model, t) -> Tensor:
        name = t.name.decode() if isinstance(t.name, bytes) else str(t.name)
        if t.type not in _DTYPES:
            raise ConverterError(f"tensor {name!r} has TFLite type {t.type}, not a float/int type",
                                 "only float (fp32/fp16-weight) models are supported")
        dtype = _DTYPES[t.type]
        data = model.buffers[t.buffer].data
        const = None
        if data is not None and len(data):
            const = np.frombuffer(np.asarray(data, dtype=np.uint8).tobytes(), dtype=dtype)
            const = const.reshape([int(d) for d in t.shape]) if t.shape is not None else const
        shape = [int(d) for d in t.shape] if t.shape is not None else []
        return Tensor(name, shape, dtype, const)

    def _fold_dequantize(self) -> None:
        """DEQUANTIZE of a float16 constant -> float32 constant; the op disappears."""
        kept = []
        for opname, ins, outs, options in self.operators:
            if opname == "DEQUANTIZE":
                src = self.tensors[ins[0]]
                if src.const is None or src.dtype != np.float16:
                    raise ConverterError(f"{self.path.name}: DEQUANTIZE of {src.name!r} is not a float16 "
                                         "constant (integer-quantised models are not supported)",
                                         "use the float model")
                self.tensors[outs[0]].const = src.const.astype(np.float32)
                continue
            kept.append((opname, ins, outs, options))
        self.operators = kept

    def input_specs(self) -> list[Tensor]:
        return [self.tensors[i] for i in self.inputs]

    def output_names(self) -> list[str]:
        return [self.tensors[i].name for i in self.outputs]

    def run(self, *inputs):
        """Replay the graph on TF tensors; returns {tflite output name: tensor}."""
        import tensorflow as tf

        values = {}
        for index, x in zip(self.inputs, inputs):
            values[index] = x

        def get(i):
            if i in values:
                return values[i]
            t = self.tensors[i]
            if t.const is None:
                raise ConverterError(f"{self.path.name}: tensor {t.name!r} used before it is computed",
                                     "the graph is not in topological order; unsupported")
            return t.const

        for opname, ins, outs, options in self.operators:
            args = [None if i < 0 else get(i) for i in ins]
            result = _OPS[opname](tf, args, options, self.tensors[outs[0]])
            values[outs[0]] = result
        return {self.tensors[i].name: values[i] for i in self.outputs}


def _activation(tf, x, code: int):
    # TFLite ActivationFunctionType: NONE, RELU, RELU_N1_TO_1, RELU6, TANH.
    if code == 0:
        return x
    if code == 1:
        return tf.nn.relu(x)
    if code == 2:
        return tf.clip_by_value(x, -1.0, 1.0)
    if code == 3:
        return tf.nn.relu6(x)
    if code == 4:
        return tf.tanh(x)
    raise ConverterError(f"unsupported fused activation {code}", "extend converters/tflite_to_tf.py")


def _conv_2d(tf, args, o, out):
    x, w, b = (args + [None])[:3]
    if w.shape[3] != x.shape[-1]:
        raise ConverterError("grouped CONV_2D is not supported", "extend converters/tflite_to_tf.py")
    y = tf.nn.conv2d(x, np.transpose(w, (1, 2, 3, 0)), strides=[1, o.strideH, o.strideW, 1],
                     padding=_PADDING[o.padding], dilations=[1, o.dilationHFactor, o.dilationWFactor, 1])
    if b is not None:
        y = tf.nn.bias_add(y, b)  # rank-1 bias: what TF.js' fused kernels (WASM) accept
    return _activation(tf, y, o.fusedActivationFunction)


def _depthwise_conv_2d(tf, args, o, out):
    x, w, b = (args + [None])[:3]
    _, kh, kw, channels = w.shape
    in_channels = x.shape[-1]
    filt = w.reshape(kh, kw, in_channels, channels // in_channels)
    y = tf.nn.depthwise_conv2d(x, filt, strides=[1, o.strideH, o.strideW, 1], padding=_PADDING[o.padding],
                               dilations=[o.dilationHFactor, o.dilationWFactor])
    if b is not None:
        y = tf.nn.bias_add(y, b)
    return _activation(tf, y, o.fusedActivationFunction)


def _add(tf, args, o, out):
    return _activation(tf, tf.add(args[0], args[1]), o.fusedActivationFunction if o else 0)


def _prelu(tf, args, o, out):
    x, alpha = args
    # relu(x) + (-alpha) * relu(-x): the Keras PReLU shape that tensorflowjs fuses into
    # one Prelu op (fuse_prelu.py); exactly x for x >= 0 and alpha * x below.
    return tf.nn.relu(x) + (-np.asarray(alpha, np.float32)) * tf.nn.relu(-x)


def _max_pool_2d(tf, args, o, out):
    y = tf.nn.max_pool2d(args[0], ksize=[o.filterHeight, o.filterWidth],
                         strides=[o.strideH, o.strideW], padding=_PADDING[o.padding])
    return _activation(tf, y, o.fusedActivationFunction)


def _pad(tf, args, o, out):
    return tf.pad(args[0], np.asarray(args[1], np.int32))


def _resize_bilinear(tf, args, o, out):
    return tf.compat.v1.image.resize_bilinear(args[0], np.asarray(args[1], np.int32),
                                              align_corners=bool(o.alignCorners),
                                              half_pixel_centers=bool(o.halfPixelCenters))


def _reshape(tf, args, o, out):
    if len(args) > 1 and args[1] is not None:
        shape = np.asarray(args[1], np.int32)
    elif o is not None and o.newShape is not None:
        shape = np.asarray(o.newShape, np.int32)
    else:
        shape = np.asarray(out.shape, np.int32)
    return tf.reshape(args[0], shape)


def _concatenation(tf, args, o, out):
    return _activation(tf, tf.concat(args, axis=o.axis), o.fusedActivationFunction)


def _mean(tf, args, o, out):
    return tf.reduce_mean(args[0], axis=[int(a) for a in np.ravel(args[1])], keepdims=bool(o.keepDims))


def _fully_connected(tf, args, o, out):
    x, w, b = (args + [None])[:3]
    if o.weightsFormat != 0:
        raise ConverterError("shuffled FULLY_CONNECTED weights are not supported", "use a float model")
    flat = tf.reshape(x, [-1, w.shape[1]]) if len(x.shape) != 2 else x
    # Weights pre-transposed to [in, out]: tfjs-backend-wasm 4.22's _FusedMatMul gives
    # wrong results for transpose_b=True (measured: 39% off); the CPU backend is fine.
    y = tf.matmul(flat, np.ascontiguousarray(w.T))
    if b is not None:
        y = tf.nn.bias_add(y, b)
    if o.keepNumDims:
        y = tf.reshape(y, list(x.shape[:-1]) + [w.shape[0]])
    return _activation(tf, y, o.fusedActivationFunction)


def _logistic(tf, args, o, out):
    return tf.sigmoid(args[0])


# The operators the four MediaPipe Hands models use (DEQUANTIZE is folded at load time).
_OPS = {
    "ADD": _add,
    "CONCATENATION": _concatenation,
    "CONV_2D": _conv_2d,
    "DEPTHWISE_CONV_2D": _depthwise_conv_2d,
    "FULLY_CONNECTED": _fully_connected,
    "LOGISTIC": _logistic,
    "MAX_POOL_2D": _max_pool_2d,
    "MEAN": _mean,
    "PAD": _pad,
    "PRELU": _prelu,
    "RESHAPE": _reshape,
    "RESIZE_BILINEAR": _resize_bilinear,
}


def to_saved_model(graph: TFLiteGraph, saved_model_dir: Path, outputs) -> Path:
    """Save ``graph`` as a SavedModel whose serving_default returns ``outputs(tflite_outputs)``.

    ``outputs`` maps the tflite outputs {name: tensor} to the dict the signature returns;
    its keys, sorted, become Identity, Identity_1, ... in the TF.js graph.
    """
    import tensorflow as tf

    specs = [tf.TensorSpec(t.shape, tf.float32, name=t.name) for t in graph.input_specs()]

    @tf.function(input_signature=specs)
    def serve(*inputs):
        return outputs(graph.run(*inputs))

    module = tf.Module()
    module.serve = serve
    tf.saved_model.save(module, str(saved_model_dir), signatures={"serving_default": serve})
    return saved_model_dir
