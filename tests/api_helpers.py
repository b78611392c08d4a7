"""Shared by the API tests: the installed models (built once per session with conftest's
built_model), sample images, and a few image makers for bad-input cases."""
from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import HAND_FIXTURES, YOLOV5N_WEIGHTS


@pytest.fixture(scope="session")
def api_models(built_model, models_dir) -> dict[str, Path]:
    """{model id: folder} of what could be built here; all in one models folder."""
    built = {"efficientnet-lite0": built_model("efficientnet-lite0"), "handpose": built_model("handpose")}
    if YOLOV5N_WEIGHTS.is_file():
        built["yolov5n"] = built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS))
    return built


def need(models: dict, model_id: str) -> Path:
    if model_id not in models:
        pytest.skip(f"{model_id} is not built here (yolov5n needs {YOLOV5N_WEIGHTS})")
    return models[model_id]


def photo_bytes(name: str) -> bytes:
    """bus.jpg / zidane.jpg (the ultralytics wheel) or a shared hand fixture, as stored."""
    if name in ("bus.jpg", "zidane.jpg"):
        from converters.sources import photo_path

        return Path(photo_path(name)).read_bytes()
    path = HAND_FIXTURES / name
    if not path.is_file():
        pytest.skip(f"hand fixture absent: {path}")
    return path.read_bytes()


def decoded(data: bytes) -> np.ndarray:
    from server.images import decode

    return decode(data, 10**9).rgb


def encode(rgb: np.ndarray, fmt: str = "PNG", **kwargs) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(buf, fmt, **kwargs)
    return buf.getvalue()


def png_bomb(width: int = 20000, height: int = 20000) -> bytes:
    """A valid 1-bit greyscale PNG of width x height zeros: a few tens of KB that would
    decode to width*height pixels (400 M for the default)."""
    row = b"\x00" * (1 + (width + 7) // 8)  # filter byte + packed bits
    comp = zlib.compressobj(9)
    idat = b"".join(comp.compress(row) for _ in range(height)) + comp.flush()

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", idat) + chunk(b"IEND", b"")


def box_iou(a, b) -> float:
    ax1, ay1, ax2, ay2 = a
    bx1, by1, bx2, by2 = b
    iw = max(0.0, min(ax2, bx2) - max(ax1, bx1))
    ih = max(0.0, min(ay2, by2) - max(ay1, by1))
    inter = iw * ih
    union = (ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1) - inter
    return inter / union if union > 0 else 0.0
