"""Safe decoding of uploaded videos, in memory only (the /api/v1/track upload).

- Containers: MP4/QuickTime, WebM/Matroska and AVI, told by their first bytes, before FFmpeg
  sees them; anything else -> 415. FFmpeg probes formats by content and some of its demuxers
  open other files or URLs named in the data (HLS playlists, concat lists), so only these
  three, whose demuxers here read nothing but the stream (MP4 data references are off in
  FFmpeg by default), are handed on.
- Decoding: OpenCV's FFmpeg backend reading the bytes through a file-like object
  (``cv2.VideoCapture(io.BytesIO(data), cv2.CAP_FFMPEG, [])``, OpenCV >= 4.10): no temporary
  file. Whatever codec the bundled FFmpeg decodes (VP8, VP9, H.264, HEVC, MPEG-4, MJPEG).
  Rotation metadata is applied (OpenCV's default), as browsers do.
- Frames come one at a time (``Video.frames``), so memory is one frame, not the video.
- Limits: each frame's pixels (MAX_IMAGE_PIXELS, the images' limit) from the header before any
  frame is decoded, and every frame again (a stream may change size) -> 413 frame_too_large;
  the images' aspect-ratio rule -> 422 image_aspect_ratio; at most ``max_frames`` frames in
  the video (server.limits.DEFAULT_MAX_VIDEO_FRAMES) -> 413 too_many_frames, from the header
  where it counts frames exactly (MP4, AVI: before decoding), else once frame max_frames + 1
  decodes. The video is never cut silently.
- Not decodable (bad header, corrupt data, no frame) -> 422 unprocessable_video. FFmpeg stops
  at the first undecodable packet without saying why: a video cut short answers the frames
  before the cut (``frames`` in the answer says how many).
- Frames are HxWx3 uint8 RGB, what the images give the runners.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass

import cv2

from .errors import Problem
from .limits import MAX_ASPECT_RATIO

MIME_TYPES = {"video/mp4": "mp4", "video/quicktime": "mp4", "video/webm": "webm", "video/x-matroska": "webm",
              "video/x-msvideo": "avi", "video/avi": "avi"}
# ISO base media (MP4, MOV) files start with one of these boxes (at offset 4, after its size).
MP4_BOXES = (b"ftyp", b"moov", b"mdat", b"free", b"skip", b"wide")
EBML = b"\x1a\x45\xdf\xa3"  # WebM and Matroska
# Containers whose header gives the exact frame count (from the index), checked before decoding.
EXACT_COUNT = ("mp4", "avi")


def container(data: bytes) -> str | None:
    """"mp4", "webm" or "avi" from the first bytes; None for anything else."""
    if data[:4] == EBML:
        return "webm"
    if data[:4] == b"RIFF" and data[8:12] == b"AVI ":
        return "avi"
    if len(data) >= 8 and data[4:8] in MP4_BOXES:
        return "mp4"
    return None


@dataclass
class Video:
    """An opened upload: its first frame's size, its frame rate (None when the header has
    none) and, after ``frames()``, how many frames it had."""
    capture: cv2.VideoCapture
    stream: io.BytesIO  # read by the capture: must outlive it (OpenCV does not keep it alive)
    format: str
    width: int
    height: int
    fps: float | None
    max_pixels: int
    max_frames: int
    count: int = 0

    def frames(self, stride: int = 1):
        """(frame number from 1, RGB) of every ``stride``-th frame (1, 1 + stride, ...); the
        others are decoded but not converted. Raises Problem past the limits, or when no
        frame decodes."""
        self.count = 0
        while True:
            keep = self.count % stride == 0
            if not self.capture.grab():
                break
            self.count += 1
            if self.count > self.max_frames:
                raise too_many_frames(self.max_frames)
            if not keep:
                continue
            ok, bgr = self.capture.retrieve()
            if not ok or bgr is None or bgr.ndim != 3:
                break
            check_size(bgr.shape[1], bgr.shape[0], self.max_pixels)
            if self.count == 1:  # the size after rotation, whatever the header said
                self.height, self.width = bgr.shape[:2]
            yield self.count, cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB, dst=bgr)
        if self.count == 0:
            raise Problem(422, "unprocessable_video", f"the {self.format} video has no frame that decodes")

    def close(self) -> None:
        self.capture.release()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_video(data: bytes, max_pixels: int, max_frames: int) -> Video:
    """The upload opened and its header checked; no frame decoded yet."""
    if not data:
        raise Problem(400, "empty_video", "the video is empty (0 bytes)")
    fmt = container(data)
    if fmt is None:
        raise Problem(415, "unsupported_media_type", "not an MP4, WebM or AVI video")
    stream = io.BytesIO(data)
    # OpenCV's stream reader does not own ``stream``: a temporary one is freed while FFmpeg
    # still reads it, and release() then crashes the process. Video keeps it until close().
    capture = cv2.VideoCapture(stream, cv2.CAP_FFMPEG, [])
    try:
        if not capture.isOpened():
            raise Problem(422, "unprocessable_video", f"the {fmt} video could not be opened (corrupt, truncated "
                                                      "or a codec this server does not decode)")
        width, height = int(capture.get(cv2.CAP_PROP_FRAME_WIDTH)), int(capture.get(cv2.CAP_PROP_FRAME_HEIGHT))
        check_size(width, height, max_pixels)
        if fmt in EXACT_COUNT and capture.get(cv2.CAP_PROP_FRAME_COUNT) > max_frames:
            raise too_many_frames(max_frames, int(capture.get(cv2.CAP_PROP_FRAME_COUNT)))
        fps = capture.get(cv2.CAP_PROP_FPS)
        return Video(capture, stream, fmt, width, height, round(fps, 3) if math.isfinite(fps) and fps > 0 else None,
                     max_pixels, max_frames)
    except BaseException:
        capture.release()
        raise


def check_size(width: int, height: int, max_pixels: int) -> None:
    if width <= 0 or height <= 0:
        raise Problem(422, "unprocessable_video", f"the video's frames have no pixels ({width}x{height})")
    if width * height > max_pixels:
        raise Problem(413, "frame_too_large", f"the video's frames are {width}x{height} = {width * height} "
                                              f"pixels; the limit is {max_pixels} (DATARAILROAD_MAX_IMAGE_PIXELS)")
    if max(width, height) > MAX_ASPECT_RATIO * min(width, height):
        raise Problem(422, "image_aspect_ratio", f"the video's frames are {width}x{height}; the longer side may "
                                                 f"be at most {MAX_ASPECT_RATIO} times the shorter")


def too_many_frames(limit: int, count: int | None = None) -> Problem:
    has = f"has {count} frames" if count else f"has more than {limit} frames"
    return Problem(413, "too_many_frames", f"the video {has}; the limit is {limit} (DATARAILROAD_MAX_VIDEO_FRAMES): "
                                           "send a shorter clip")

