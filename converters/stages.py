"""A build in four stages, and the one verification every family runs.

``run(ctx, load, export, verify, describe)``: each family module writes the four stages
(only what is its own) and ``build(ctx)`` hands them here; each stage is one timed step
in the manifest's ``steps``:
  load      source weights -> the source framework's model and its reference outputs
  export    -> tfjs/ (TF.js graph) and the .tflite the server runs, in ``ctx.workdir``
  verify    ``check``: the produced files against the reference, gated on the target
  describe  -> the family's manifest fields (the pipeline adds the shared ones)

``check`` runs the TF.js files in the real TF.js runtime (Node, WASM) and the .tflite in
LiteRT on the same inputs, compares both with the source framework's outputs, refuses the
build when a target is missed, and times the .tflite (the manifest's ``speed``).
"""
from __future__ import annotations

import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import parity, tflite
from .errors import ConverterError

IMGSZ_RANGE = (32, 1280)  # --imgsz bounds, in pixels
SPEED_THREADS = 2  # what the server gives one model by default, and what the benches compare at
SPEED_RUNS = 15


def run(ctx, load: Callable, export: Callable, verify: Callable, describe: Callable) -> dict:
    """load -> export -> verify -> describe (each hands the next a Loaded / Exported / Verified
    record, defined below); returns describe's manifest fields."""
    with ctx.step("load"):
        loaded = load(ctx)
    with ctx.step("export"):
        exported = export(ctx, loaded)
    with ctx.step("verify"):
        verified = verify(ctx, loaded, exported)
    with ctx.step("describe"):
        return describe(ctx, loaded, exported, verified)


def input_side(family, imgsz) -> int | None:
    """The build's input side: ``--imgsz`` (an int or its text) checked against the family.
    A family that takes it declares IMGSZ (default side) and IMGSZ_STEP (sides are multiples
    of it); others have a fixed input and get None. Raises ConverterError on a bad value."""
    default, step = getattr(family, "IMGSZ", None), getattr(family, "IMGSZ_STEP", None)
    if imgsz is None:
        return default if step else None
    name = getattr(family, "NAME", "this model")
    if not step:
        raise ConverterError(f"{name} has a fixed input size; --imgsz applies to yolov5n and yolo",
                             f"drop --imgsz, or convert a detector: python -m converters yolov5n --imgsz {imgsz}")
    low, high = IMGSZ_RANGE
    try:
        side = int(str(imgsz).strip())
    except ValueError:
        side = None
    if side is None or side % step or not low <= side <= high:
        raise ConverterError(f"--imgsz {imgsz!s} is not a multiple of {step} between {low} and {high}",
                             f"pass e.g. --imgsz 320 (or {default}, the default)")
    return side


@dataclass
class Comparison:
    """What a family's compare function says about one TF.js run and one LiteRT run.

    ``tfjs`` / ``server``: the figures recorded under parity.tfjs / parity.server; ``tfjs``
    must hold "relative" (max|a-b| / max|a| against the source), gated on the target unless
    ``gated`` names another figure (e.g. the worse of two outputs).
    ``tfjs_ok`` / ``server_ok``: the family's further criteria (e.g. same detections)."""
    tfjs: dict
    server: dict
    tfjs_ok: bool = True
    server_ok: bool = True
    gated: float | None = None

    @property
    def relative(self) -> float:
        return self.tfjs["relative"] if self.gated is None else self.gated


@dataclass
class Checked:
    tfjs: dict            # backend, version, ms + the comparison's TF.js figures
    server: dict          # runtime + the comparison's LiteRT figures
    target: float | None  # parity.TARGETS[quantize]
    passed: bool
    speed: dict           # the manifest's "speed"
    outputs: dict         # {"tfjs": {name: array}, "litert": {key: array}} for further use


# What one stage hands the next. Each family subclasses these with its own fields, so a
# stage's result is a typed record (its fields named and documented) and never a loose dict.

@dataclass
class Loaded:
    """load's result: the source model (or what stands for it) and its reference outputs."""


@dataclass
class Exported:
    """export's result: what verify and describe need to know of the files in the work folder."""


@dataclass
class Verified:
    """verify's result: the parity figures describe writes into the manifest."""


@dataclass
class DetectorVerified(Verified):
    """A detector's verify: the parity check and, for a size other than the default, the
    agreement of its detections with the default size's (the manifest's ``agreement``)."""
    checked: Checked
    agreement: dict | None  # None at the default size


def check(ctx, *, tfjs_model: str, tflite_model: str, inputs: dict[str, np.ndarray],
          compare: Callable[[dict, dict], Comparison], tfjs_outputs: list[str] | None = None,
          litert_inputs: dict | list | None = None, label: str = "") -> Checked:
    """Run ``ctx.workdir/tfjs_model`` in Node and ``ctx.workdir/tflite_model`` in LiteRT,
    compare both with the source (``compare(tfjs outputs, litert outputs)``), gate on the
    quantisation's target and time the .tflite. Raises ConverterError when a target is missed:
    nothing is installed then. ``litert_inputs`` defaults to ``inputs``."""
    litert_inputs = inputs if litert_inputs is None else litert_inputs
    run_ = parity.run_tfjs(ctx.workdir / tfjs_model, inputs, outputs=tfjs_outputs)
    litert = tflite.run_tflite(ctx.workdir / tflite_model, litert_inputs)
    cmp = compare(run_["outputs"], litert)
    target = parity.TARGETS[ctx.quantize]
    relative = cmp.relative
    passed = cmp.server_ok and cmp.tfjs_ok and (target is None or relative <= target)
    speed = litert_speed(ctx.workdir / tflite_model, litert_inputs)
    name = f"{label}: " if label else ""
    ctx.log(f"{name}TF.js {run_['backend']} vs source: relative {relative:.3g} (target {target}), "
            f"criteria {'met' if cmp.tfjs_ok else 'MISSED'}; LiteRT {_short(cmp.server)} "
            f"{'ok' if cmp.server_ok else 'MISSED'}; TF.js {run_['ms']:.0f} ms, "
            f"LiteRT {speed['ms']:.1f} ms ({SPEED_THREADS} threads)")
    if target is not None and not passed:
        raise ConverterError(f"{name}parity check failed (TF.js {cmp.tfjs}, LiteRT {cmp.server}, "
                             f"target {target}); nothing was installed", "report this with the log above")
    return Checked(tfjs={"backend": run_["backend"], "version": run_["version"], "ms": round(run_["ms"], 1),
                         **cmp.tfjs},
                   server={"runtime": "litert", **cmp.server}, target=target, passed=bool(passed),
                   speed=speed, outputs={"tfjs": run_["outputs"], "litert": litert})


def _short(figures: dict) -> str:
    rel = figures.get("relative")
    return f"relative {rel:.3g}" if isinstance(rel, float) else "checked"


def litert_speed(model_path: Path, inputs, runs: int = SPEED_RUNS) -> dict:
    """The manifest's ``speed``: native LiteRT ms per inference at SPEED_THREADS, the fastest of
    ``runs`` calls, with their median and the machine's 1-minute load average beside it. Other
    work on a shared build machine only ever adds time, so the fastest run is the figure
    closest to the model's own cost (timeit's advice); a median taken under load once put the
    320-px detector behind the 640-px one."""
    times = tflite.call_ms(model_path, inputs, threads=SPEED_THREADS, runs=runs)
    return {"runtime": "litert", "threads": SPEED_THREADS, "ms": round(min(times), 2),
            "median_ms": round(statistics.median(times), 2), "runs": runs,
            "load_average": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


@dataclass
class AnswerPart:
    """One model part for the manifest's answer_check: the source framework's outputs on the
    pattern ({role: array}), and how to run this build's TF.js graph on the same input."""
    reference: dict
    tfjs_model: str                    # relative to the work folder
    inputs: dict                       # {TF.js input name: array}
    tfjs_outputs: list                 # TF.js output names to fetch
    roles: Callable[[dict], dict]      # TF.js outputs by name -> {role: array}


def answer_check(ctx, parts: dict[str, AnswerPart], source: str) -> dict:
    """The manifest's answer_check (modelcontract.answers): the source's answers on the pattern
    per part, with the error this build's TF.js graphs show on Node's WASM backend, from which
    a quantised build's tolerance follows."""
    from modelcontract import answers

    measured = 0.0
    for part in parts.values():
        run_ = parity.run_tfjs(ctx.workdir / part.tfjs_model, part.inputs, outputs=part.tfjs_outputs)
        got = part.roles(run_["outputs"])
        measured = max(measured, answers.error(answers.reference(part.reference), got))
    record = answers.record({name: part.reference for name, part in parts.items()}, source, ctx.quantize, measured)
    ctx.log(f"answer check on {record['pattern']}: TF.js WASM error {measured:.3g}, tolerance {record['tolerance']}")
    return record
