"""Camera clips: YUV4MPEG2 files Chromium's fake camera plays, VP8 WebM videos, and back."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def write_y4m(path: Path, rgb, frames: int = 2, fps: int = 30) -> Path:
    """A YUV4MPEG2 (4:2:0, BT.601 studio range) file Chromium's fake camera plays in a loop:
    one RGB image ``frames`` times, or a clip [N, H, W, 3] frame by frame."""
    clip = np.asarray(rgb)
    clip = clip[None].repeat(frames, 0) if clip.ndim == 3 else clip
    h, w = clip.shape[1:3]
    assert h % 2 == 0 and w % 2 == 0, "4:2:0 needs even sizes"
    with open(path, "wb") as f:
        f.write(f"YUV4MPEG2 W{w} H{h} F{fps}:1 Ip A1:1 C420jpeg\n".encode())
        for image in clip:
            f.write(b"FRAME\n")
            for p in yuv420(image):
                f.write(p.tobytes())
    return Path(path)


def write_webm(path: Path, clip, fps: int) -> Path:
    """A clip [N, H, W, 3] (RGB uint8) as a VP8 WebM, which Chromium plays as a video file."""
    import cv2

    h, w = clip.shape[1:3]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"VP80"), fps, (w, h))
    assert writer.isOpened(), "this OpenCV cannot write VP8 WebM"
    for image in clip:
        writer.write(np.ascontiguousarray(image[..., ::-1]))
    writer.release()
    return Path(path)


def yuv420(rgb) -> list[np.ndarray]:
    """RGB uint8 -> the Y, U, V planes of 4:2:0 (chroma averaged over 2x2)."""
    rgb = np.asarray(rgb, dtype=np.float32)
    h, w = rgb.shape[:2]
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    y = 16 + (65.481 * r + 128.553 * g + 24.966 * b) / 255
    u = 128 + (-37.797 * r - 74.203 * g + 112.0 * b) / 255
    v = 128 + (112.0 * r - 93.786 * g - 18.214 * b) / 255

    def sub(plane):
        return plane.reshape(h // 2, 2, w // 2, 2).mean(axis=(1, 3))

    return [np.clip(np.round(p), 0, 255).astype(np.uint8) for p in (y, sub(u), sub(v))]


def read_y4m_rgb(path: Path):
    """First frame of a y4m written by write_y4m, back to RGB (what the camera shows)."""
    data = Path(path).read_bytes()
    header, rest = data.split(b"\n", 1)
    fields = {f[0:1]: f[1:] for f in header.split()[1:]}
    w, h = int(fields[b"W"]), int(fields[b"H"])
    frame = rest[len(b"FRAME\n"):]
    y = np.frombuffer(frame, np.uint8, w * h).reshape(h, w).astype(np.float32)
    u = np.frombuffer(frame, np.uint8, w * h // 4, w * h).reshape(h // 2, w // 2).astype(np.float32)
    v = np.frombuffer(frame, np.uint8, w * h // 4, w * h + w * h // 4).reshape(h // 2, w // 2).astype(np.float32)
    u = u.repeat(2, 0).repeat(2, 1) - 128
    v = v.repeat(2, 0).repeat(2, 1) - 128
    c = (y - 16) * 255 / 219
    r = c + 1.402 * 255 / 224 * v
    g = c - 0.344136 * 255 / 224 * u - 0.714136 * 255 / 224 * v
    b = c + 1.772 * 255 / 224 * u
    return np.clip(np.round(np.stack([r, g, b], -1)), 0, 255).astype(np.uint8)
