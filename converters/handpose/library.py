"""The end-to-end check: @tensorflow-models/hand-pose-detection run in Node on the converted
files (library_check.mjs) against MediaPipe's own Python solution, on real hand photos,
and the photos themselves. Where mediapipe does not import (no wheel for CPython 3.13) the
comparison is recorded as skipped, with the reason."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path

import numpy as np

from modelcontract.paths import shared_dir

from ..errors import ConverterError
from ..sources import load_photo

ROOT = Path(__file__).resolve().parents[2]
CHECK_SCRIPT = Path(__file__).resolve().parent / "library_check.mjs"
KEYPOINT_TOLERANCE_PX = 12.0


def hand_photo() -> tuple[str, np.ndarray]:
    """The real hand photo parity runs on: the shared fixture up_1.jpg when present (a
    test-only image, never shipped), else zidane.jpg from the ultralytics wheel."""
    from PIL import Image

    path = shared_dir() / "fixtures" / "hands" / "up_1.jpg"
    if path.is_file():
        with Image.open(path) as im:
            return "up_1.jpg", np.asarray(im.convert("RGB"))
    return "zidane.jpg", load_photo("zidane.jpg")


def version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def npm_version() -> str | None:
    package = ROOT / "node_modules" / "@tensorflow-models" / "hand-pose-detection" / "package.json"
    try:
        return json.loads(package.read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def run_library(model_dir: Path, variant: str, images: dict[str, np.ndarray], timeout: float = 300) -> dict:
    """Run @tensorflow-models/hand-pose-detection (runtime 'tfjs', WASM) in Node on the
    converted files of ``model_dir``; returns {photo: {"hands": [...], "ms"}, "constants": {...}}."""
    node = shutil.which("node")
    if node is None or not (ROOT / "node_modules" / "@tensorflow-models" / "hand-pose-detection").is_dir():
        raise ConverterError("node or the hand-pose-detection package is missing", "run `npm ci` in the project root")
    out = {}
    with tempfile.TemporaryDirectory(prefix="handpose-e2e-") as tmp:
        for name, image in images.items():
            raw = Path(tmp) / f"{name}.rgb"
            raw.write_bytes(np.ascontiguousarray(image, dtype=np.uint8).tobytes())
            request = {"model_dir": str(Path(model_dir).resolve()), "model_type": variant, "backend": "wasm",
                       "detector": f"tfjs/detector_{variant}/model.json",
                       "landmark": f"tfjs/landmark_{variant}/model.json",
                       "image": {"file": str(raw), "width": int(image.shape[1]), "height": int(image.shape[0])},
                       "out": str(Path(tmp) / f"{name}.json")}
            (Path(tmp) / "request.json").write_text(json.dumps(request))
            proc = subprocess.run([node, str(CHECK_SCRIPT), str(Path(tmp) / "request.json")], cwd=ROOT,
                                  capture_output=True, text=True, timeout=timeout)
            if proc.returncode != 0:
                raise RuntimeError(f"hand-pose-detection failed on {name}:\n{proc.stderr[-4000:]}")
            result = json.loads(Path(request["out"]).read_text())
            out["constants"] = result.pop("constants")
            out[name] = result
    return out


def mediapipe_hands(image: np.ndarray, variant: str) -> list[dict]:
    """MediaPipe's own Python solution (static image mode) on ``image``: the reference the
    library run is compared with. model_complexity 1 = full models, 0 = lite."""
    import mediapipe as mp

    h, w = image.shape[:2]
    with mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=2,
                                  model_complexity=1 if variant == "full" else 0) as hands:
        result = hands.process(np.ascontiguousarray(image))
    out = []
    for landmarks, handedness in zip(result.multi_hand_landmarks or [], result.multi_handedness or []):
        out.append({"handedness": handedness.classification[0].label,
                    "score": float(handedness.classification[0].score),
                    "keypoints": [[p.x * w, p.y * h] for p in landmarks.landmark]})
    return out


def compare_hands(reference: list[dict], candidate: list[dict]) -> dict:
    """Pair each reference hand with the closest candidate hand; mean/max keypoint distance in px."""
    pairs = []
    for ref in reference:
        best = None
        for cand in candidate:
            d = np.linalg.norm(np.asarray(ref["keypoints"]) - np.asarray(cand["keypoints"]), axis=1)
            if best is None or d.mean() < best[0].mean():
                best = (d, cand)
        if best is not None:
            pairs.append({"mean_px": float(best[0].mean()), "max_px": float(best[0].max()),
                          "handedness": best[1]["handedness"], "reference_handedness": ref["handedness"]})
    return {"reference_hands": len(reference), "hands": len(candidate), "pairs": pairs}


def end_to_end_photos() -> dict[str, np.ndarray]:
    """Photos for the library check: the shared hand fixtures when present, else zidane.jpg."""
    from PIL import Image

    shared = shared_dir() / "fixtures" / "hands"  # DATARAILROAD_SHARED
    photos = {}
    for name in ("up_1.jpg", "up_3.jpg"):
        if (shared / name).is_file():
            with Image.open(shared / name) as im:
                photos[name] = np.asarray(im.convert("RGB"))
    return photos or {"zidane.jpg": load_photo("zidane.jpg")}


def mediapipe_missing() -> str | None:
    """Why MediaPipe's own Python solution cannot run here; None when it can."""
    try:
        import mediapipe  # noqa: F401
    except ImportError as exc:
        return (f"mediapipe does not import on Python {sys.version_info.major}.{sys.version_info.minor} ({exc}); "
                "mediapipe 0.10.21 has wheels for CPython 3.9-3.12 only")
    return None


def library_vs_mediapipe(model_dir: Path, variant: str) -> dict:
    """The library on the photos, each hand compared with MediaPipe's; where mediapipe does
    not import, the library's hands alone and ``skipped`` with the reason."""
    photos = end_to_end_photos()
    started = time.perf_counter()
    library = run_library(model_dir, variant, photos)
    missing = mediapipe_missing()
    report = {"backend": "/".join(sorted({library[name]["backend"] for name in photos})),  # as the runs report it
              "reference": None if missing else f"mediapipe {version('mediapipe')} solutions.hands "
              f"(static_image_mode, model_complexity={1 if variant == 'full' else 0})",
              "tolerance_mean_px": KEYPOINT_TOLERANCE_PX, "photos": {}}
    if missing:
        report["skipped"] = f"no comparison with MediaPipe's own solution: {missing}"
    for name, image in photos.items():
        found = library[name]["hands"]
        compared = {"hands": len(found)} if missing else compare_hands(mediapipe_hands(image, variant), found)
        report["photos"][name] = {**compared, "ms": round(library[name]["ms"], 1)}
    report["seconds"] = round(time.perf_counter() - started, 1)
    return report
