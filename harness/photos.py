"""Photos (the ultralytics wheel's, the repo's gesture photos, the shared hand fixtures) as
bytes and RGB, MediaPipe's own hands on them, and image makers (encode, PNG bomb, letterbox, a
drawn aerial scene)."""
from __future__ import annotations

import functools
import io
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from harness.paths import GESTURE_FIXTURES, HAND_FIXTURES


def photo_file(name: str) -> Path:
    """bus.jpg / zidane.jpg (shipped in the ultralytics wheel), a gesture photo (in the repo)
    or a shared hand fixture; skips the test when a shared hand fixture is absent."""
    if name in ("bus.jpg", "zidane.jpg"):
        from converters.sources import photo_path

        return Path(photo_path(name))
    if (GESTURE_FIXTURES / name).is_file():
        return GESTURE_FIXTURES / name
    path = HAND_FIXTURES / name
    if not path.is_file():
        pytest.skip(f"hand fixture absent: {path}")
    return path


def photo_bytes(name: str) -> bytes:
    """A photo as stored (what an upload sends)."""
    return photo_file(name).read_bytes()


def photo_rgb(name: str) -> np.ndarray:
    """RGB uint8 as the browser decodes a photo (EXIF orientation applied)."""
    return rgb_like_browser(photo_file(name))


def rgb_like_browser(path: Path) -> np.ndarray:
    from PIL import Image, ImageOps

    with Image.open(path) as im:
        return np.asarray(ImageOps.exif_transpose(im).convert("RGB"))


# The hand photos and the gesture each shows: the shared fixtures, then the repo's.
HAND_GESTURES = {"up_1.jpg": "thumbs_up", "up_3.jpg": "thumbs_up", "down_1.jpg": "thumbs_down",
                 "down_3.jpg": "thumbs_down", "none_2.jpg": "open_palm",
                 **{p.name: p.stem.rsplit("_", 1)[0] for p in sorted(GESTURE_FIXTURES.glob("*.jpg"))}}


@functools.lru_cache(maxsize=None)
def mediapipe_hands(name: str, variant: str = "full", min_detection_confidence: float = 0.3) -> tuple:
    """MediaPipe's own Python solution (solutions.hands, static image mode) on a photo: per
    hand the model's handedness label, score, 21 image landmarks [x px, y px, z (x scale)]
    and 21 world landmarks."""
    return mediapipe_on(photo_rgb(name), variant, min_detection_confidence)


def mediapipe_on(image: np.ndarray, variant: str = "full", min_detection_confidence: float = 0.3) -> tuple:
    # The reference runtime: mediapipe 0.10.21 has no wheel for Python 3.13 (requirements.txt).
    mp = pytest.importorskip("mediapipe", reason="MediaPipe's own runtime (the reference) is not installed: "
                             "mediapipe 0.10.21 has wheels for CPython 3.9-3.12 only")

    image = np.ascontiguousarray(image)
    h, w = image.shape[:2]
    with mp.solutions.hands.Hands(static_image_mode=True, max_num_hands=2,
                                  model_complexity=1 if variant == "full" else 0,
                                  min_detection_confidence=min_detection_confidence) as hands:
        result = hands.process(image)
    out = []
    for lm, world, handedness in zip(result.multi_hand_landmarks or [], result.multi_hand_world_landmarks or [],
                                     result.multi_handedness or []):
        out.append({"handedness": handedness.classification[0].label, "score": handedness.classification[0].score,
                    "image": np.array([[p.x * w, p.y * h, p.z * w] for p in lm.landmark]),
                    "world": np.array([[p.x, p.y, p.z] for p in world.landmark])})
    return tuple(out)


def decoded(data: bytes) -> np.ndarray:
    """RGB as the server decodes an upload."""
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


def letterbox_rgb(image, width: int = 640, height: int = 480, fill: int = 0):
    """Fit an RGB uint8 photo into width x height (centred, aspect kept), like a camera frame."""
    from PIL import Image

    h, w = image.shape[:2]
    scale = min(width / w, height / h)
    new_w, new_h = round(w * scale), round(h * scale)
    resized = np.asarray(Image.fromarray(image).resize((new_w, new_h), Image.BILINEAR))
    canvas = np.full((height, width, 3), fill, np.uint8)
    top, left = (height - new_h) // 2, (width - new_w) // 2
    canvas[top:top + new_h, left:left + new_w] = resized
    return canvas


def storage_tanks(size: int = 1640) -> np.ndarray:
    """An aerial-looking RGB scene: rows of round storage tanks on grey ground, which
    yolo26n-obb finds (DOTA's 'storage tank') at 640 and at 1024 px."""
    import cv2

    rng = np.random.default_rng(0)
    image = np.clip(95 + rng.integers(-12, 12, (size, size, 3)), 0, 255).astype(np.uint8)
    for i in range(4):
        for j in range(3):
            for k in range(3):
                centre = (250 + i * 380 + k * 80, 300 + j * 500)
                cv2.circle(image, centre, 34, (225, 225, 220), -1)
                cv2.circle(image, centre, 34, (150, 150, 150), 2)
                cv2.circle(image, centre, 8, (180, 180, 180), -1)
    return image
