"""The answer check: a build records what its source framework answers on one synthetic
input (geometry.check_pattern), and a page compares a backend's answer with it before it
trusts that backend (static/js/contract/answers.js is the twin of this module).

A record (the manifest's ``answer_check``) holds, per model part ("model" for one graph;
"detector_full", "landmark_full", ... for hand pose), per output role, the output's size
and up to MAX_SAMPLES of its values at evenly spaced indices. The error of an answer is,
over the roles, the largest |answer - reference| divided by the reference's largest |value|
(at least SCALE_FLOOR, so an all-zero reference, such as a detector's empty rows, still
measures what a backend invents). A backend passes when that error is within the record's
tolerance.
"""
from __future__ import annotations

import math

import numpy as np

from .geometry import CHECK_PATTERN, check_pattern, prepare
from .twins import TWINS

# twins.json's "answers" (answers.js reads the same).
MAX_SAMPLES: int = TWINS["answers"]["max_samples"]
SCALE_FLOOR: float = TWINS["answers"]["scale_floor"]
# The least tolerance per quantisation of the TF.js weights. Honest backends differ from the
# source by float rounding (1e-6 on WASM; half-float GPUs ~1e-3); the faults this catches
# (boxes shifted, nothing found, garbage) are errors of 0.2 and more.
TOLERANCE: dict[str, float] = TWINS["answers"]["tolerance"]
# A quantised build's own TF.js graph (on Node's WASM) may differ more: its tolerance is at
# least this many times what the build measured.
MEASURED_MARGIN: int = TWINS["answers"]["measured_margin"]


def sample_indices(size: int, samples: int = MAX_SAMPLES) -> list[int]:
    """Indices recorded for an output of ``size`` values: all of them, or ``samples`` evenly
    spaced (floor(i * size / samples)), the same integers as answers.js sampleIndices."""
    if size <= samples:
        return list(range(size))
    return [(i * size) // samples for i in range(samples)]


def reference(outputs: dict[str, np.ndarray]) -> dict:
    """{role: array} -> {role: {"size", "values"}} as recorded (7 significant digits)."""
    recorded = {}
    for role, array in outputs.items():
        flat = np.asarray(array, dtype=np.float64).reshape(-1)
        recorded[role] = {"size": int(flat.size),
                          "values": [float(f"{v:.7g}") for v in flat[sample_indices(flat.size)]]}
    return recorded


def error(recorded: dict, outputs: dict[str, np.ndarray]) -> float:
    """The largest relative difference of ``outputs`` ({role: array}) from one part's record;
    inf when a role is missing or has another size."""
    worst = 0.0
    for role, ref in recorded.items():
        if role not in outputs:
            return math.inf
        flat = np.asarray(outputs[role], dtype=np.float64).reshape(-1)
        if flat.size != ref["size"]:
            return math.inf
        expected = np.asarray(ref["values"], dtype=np.float64)
        got = flat[sample_indices(flat.size)]
        if not np.all(np.isfinite(got)):
            return math.inf
        scale = max(float(np.abs(expected).max(initial=0.0)), SCALE_FLOOR)
        worst = max(worst, float(np.abs(got - expected).max(initial=0.0)) / scale)
    return worst


def model_input(spec: dict) -> np.ndarray:
    """The pattern at a one-graph model's input size through its input contract (the page
    does the same with geometry.js prepareInput)."""
    _, height, width, _ = spec["shape"]
    x, _ = prepare(check_pattern(height, width), spec)
    return x


def part_input(spec: dict) -> np.ndarray:
    """The pattern at a part's input size, only scaled (hand pose's crops come from the
    pipeline, not from the manifest's resize): pixel * scale, float32 [1,H,W,3]."""
    _, height, width, _ = spec["shape"]
    return (check_pattern(height, width).astype(np.float32) * np.float32(spec.get("scale", 1.0)))[None]


def record(parts: dict[str, dict[str, np.ndarray]], source: str, quantization: str,
           measured: float | None = None) -> dict:
    """The manifest's answer_check from the source framework's outputs per part and role.
    ``measured``: the error of this build's own TF.js graph (Node, WASM) on the pattern."""
    tolerance = TOLERANCE[quantization]
    if measured is not None and math.isfinite(measured):
        tolerance = max(tolerance, MEASURED_MARGIN * measured)
    return {
        "pattern": CHECK_PATTERN,
        "source": source,
        "metric": "max |answer - reference| / max(max |reference|, %g) per output, over the sampled values"
                  % SCALE_FLOOR,
        "tolerance": float(f"{tolerance:.3g}"),
        "tfjs_wasm_error": None if measured is None else float(f"{measured:.3g}"),
        "parts": {part: reference(outputs) for part, outputs in parts.items()},
    }
