"""SavedModel -> TF.js graph model (+ quantisation), through tensorflowjs' Python API.

tensorflowjs 4.22 imports two packages at import time that conversion never uses:
``tensorflow_decision_forests`` (its 1.12 wheel crashes on import beside TF 2.19) and
jax (via ``converters.jax_conversion``). Installing them would replace tensorflow-cpu
and move numpy, so empty placeholder modules stand in for them, only inside this wrapper.
"""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path

# tensorflowjs' quantisation switches, per CLI --quantize value.
QUANTIZATION_MAPS = {
    "none": None,
    "float16": {"float16": "*"},
    "uint8": {"uint8": "*"},
}

SHARD_BYTES = 4 * 1024 * 1024


def _placeholder(name: str, **attrs) -> None:
    if name not in sys.modules:
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module


def _tf_saved_model_conversion():
    _placeholder("tensorflow_decision_forests")
    _placeholder("tensorflowjs.converters.jax_conversion", convert_jax=None)
    from tensorflowjs.converters import tf_saved_model_conversion_v2

    return tf_saved_model_conversion_v2


def convert_saved_model(saved_model_dir: Path, out_dir: Path, quantize: str = "none",
                        metadata: dict | None = None) -> dict:
    """Convert ``saved_model_dir`` (signature ``serving_default``) into ``out_dir``.

    Returns the parsed ``model.json`` so callers can read the graph's input/output names.
    """
    if quantize not in QUANTIZATION_MAPS:
        raise ValueError(f"unknown quantisation {quantize!r}")
    conversion = _tf_saved_model_conversion()
    out_dir.mkdir(parents=True, exist_ok=True)
    conversion.convert_tf_saved_model(
        str(saved_model_dir), str(out_dir),
        signature_def="serving_default", saved_model_tags="serve",
        quantization_dtype_map=QUANTIZATION_MAPS[quantize],
        strip_debug_ops=True,
        weight_shard_size_bytes=SHARD_BYTES,
        metadata=metadata,
    )
    return json.loads((out_dir / "model.json").read_text())


def convert_frozen_model(pb_file: Path, out_dir: Path, quantize: str = "none") -> dict:
    """Convert a frozen GraphDef (``pb_file``) into ``out_dir``; its outputs are the nodes no
    other node reads. Returns the parsed ``model.json``.

    The last step of Ultralytics' own TF.js export until 8.4.83 (SavedModel -> frozen .pb ->
    TF.js), which the yolo converter keeps."""
    if quantize not in QUANTIZATION_MAPS:
        raise ValueError(f"unknown quantisation {quantize!r}")
    conversion = _tf_saved_model_conversion()
    import tensorflow as tf

    graph = tf.compat.v1.GraphDef()
    graph.ParseFromString(Path(pb_file).read_bytes())
    read = {name.lstrip("^").split(":")[0] for node in graph.node for name in node.input}
    outputs = sorted(n.name for n in graph.node if n.name not in read and not n.name.startswith("NoOp"))
    out_dir.mkdir(parents=True, exist_ok=True)
    conversion.convert_tf_frozen_model(
        str(pb_file), ",".join(outputs), str(out_dir),
        quantization_dtype_map=QUANTIZATION_MAPS[quantize],
        strip_debug_ops=True,
        weight_shard_size_bytes=SHARD_BYTES,
    )
    return json.loads((out_dir / "model.json").read_text())


def graph_signature(model_json: dict) -> dict:
    """Input/output tensor names and shapes as the TF.js runtime will see them."""
    sig = model_json.get("signature") or model_json.get("userDefinedMetadata", {}).get("signature", {})

    def describe(entries: dict) -> list[dict]:
        out = []
        for key, spec in entries.items():
            dims = spec.get("tensorShape", {}).get("dim", [])
            out.append({
                "key": key,
                "name": spec.get("name", key).split(":")[0],
                "dtype": spec.get("dtype"),
                "shape": [int(d.get("size", -1)) for d in dims],
            })
        return out

    return {"inputs": describe(sig.get("inputs", {})), "outputs": describe(sig.get("outputs", {}))}
