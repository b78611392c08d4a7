"""POST /api/v1/track: a video in, the detect page's tracks and line counts out.

With the real yolov5n build: two people walking across a 640x360 clip and back
(harness/track_scenes.py ping_pong_clip) give two tracks that never switch and two crossings
each way of a line down the middle; the answer is exactly modelcontract.track run on the
runner's detections of the same frames (decoded from a file, not from memory); WebM, MP4 and
AVI decode; and every bad input is a 4xx JSON error after which the server still answers.
server/video.py on its own (no model) at the end."""
from __future__ import annotations

import gc
import io
import os
import tempfile

import cv2
import numpy as np
import pytest

from modelcontract import track as tracking
from server import create_app, limits, video
from server.errors import Problem
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import encode, photo_rgb
from harness.track_scenes import ping_pong_clip

LOOP = 60  # frames of one walk there and back: fast enough to be short, slow enough to track
FOURCC = {"webm": "VP80", "mp4": "mp4v", "avi": "MJPG"}
TYPES = {"webm": "video/webm", "mp4": "video/mp4", "avi": "video/x-msvideo"}
# A vertical line near the middle, from top to bottom: "in" is a crossing to its right as drawn,
# i.e. leftwards. Not at x = 320 exactly: the lower walker starts the loop with its centre there.
LINE = "300,0,300,360"


def video_bytes(frames: np.ndarray, fmt: str, fps: float = 5.0) -> bytes:
    """RGB frames -> a video file's bytes (VideoWriter writes only to files)."""
    height, width = frames.shape[1:3]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"clip.{fmt}")
        writer = cv2.VideoWriter(path, cv2.CAP_FFMPEG, cv2.VideoWriter_fourcc(*FOURCC[fmt]), fps, (width, height))
        assert writer.isOpened(), f"OpenCV cannot write {FOURCC[fmt]} .{fmt} here"
        for rgb in frames:
            writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
        writer.release()
        with open(path, "rb") as f:
            return f.read()


def frames_from_file(data: bytes, fmt: str) -> list[np.ndarray]:
    """Decoded from a file path: the reference for the in-memory decoding."""
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"clip.{fmt}")
        with open(path, "wb") as f:
            f.write(data)
        capture = cv2.VideoCapture(path, cv2.CAP_FFMPEG)
        frames = []
        while True:
            ok, bgr = capture.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        capture.release()
    return frames


@pytest.fixture(scope="module")
def clip() -> np.ndarray:
    return ping_pong_clip(photo_rgb("bus.jpg"), frames=LOOP)[0]


@pytest.fixture(scope="module")
def short(clip) -> dict[str, bytes]:
    """The first 8 frames in each container, and the first 2 as "good" (quick to answer)."""
    return {**{fmt: video_bytes(clip[:8], fmt) for fmt in FOURCC}, "good": video_bytes(clip[:2], "mp4")}


@pytest.fixture(scope="module")
def models(built_model):
    if not YOLOV5N_WEIGHTS.is_file():
        pytest.skip(f"yolov5n needs {YOLOV5N_WEIGHTS}")
    return built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)).parent


@pytest.fixture(scope="module")
def app(models):
    return create_app({"MODELS_DIR": models, "TESTING": True})


@pytest.fixture(scope="module")
def client(app):
    return app.test_client()


@pytest.fixture(scope="module")
def walk(clip, client):
    """(webm bytes, the answer for the whole loop with LINE)."""
    data = video_bytes(clip, "webm")
    response = client.post(f"/api/v1/track?model=yolov5n&line={LINE}", data=data, content_type="video/webm")
    assert response.status_code == 200, response.get_data(as_text=True)[:300]
    return data, response.get_json()


def post(client, data, content_type="video/webm", query=""):
    return client.post(f"/api/v1/track{query}", data=data, content_type=content_type)


def assert_error(response, status, code):
    assert response.status_code == status, response.get_data(as_text=True)[:300]
    body = response.get_json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"} and body["error"]["message"]
    assert body["error"]["code"] == code, body


# ---------------------------------------------------------------------------- answers

def test_two_people_two_tracks_two_crossings_each_way(walk):
    _, got = walk
    assert got["model"] == "yolov5n" and "shapes" not in got  # boxes only: no task extras
    assert got["video"] == {"width": 640, "height": 360, "frames": LOOP, "fps": 5.0}
    assert got["counts"] == {"line": {"from": [300.0, 0.0], "to": [300.0, 360.0]},
                             "counts": {"person": {"in": 2, "out": 2}},
                             "frames": LOOP, "tracks": 2, "classes": {"person": 0}}
    rows = np.asarray(got["tracks"])
    # Each walker is one track on every frame, and keeps to its own row of the picture.
    for track_id in (1, 2):
        mine = rows[rows[:, 1] == track_id]
        assert mine[:, 0].tolist() == list(range(1, LOOP + 1))
        assert set(mine[:, 7]) == {0}
        assert np.ptp(mine[:, 3]) < 20, "an ID switched between the walkers"
    assert len(rows) == 2 * LOOP
    assert set(got["timing_ms"]) >= {"decode", "preprocess", "model", "postprocess", "track", "total"}


def test_the_answer_is_the_tracker_on_the_runners_detections(app, walk):
    """The same frames decoded from a file, through the same runner, then Tracker and
    LineCounter directly: the answer's rows and counts, exactly."""
    from server import inference

    data, got = walk
    frames = frames_from_file(data, "webm")
    assert len(frames) == LOOP
    with app.app_context():
        runner = inference.registry(app).get("detect", "yolov5n")
        opts = runner.options(None, None, None)
        tracker, counter, rows = tracking.Tracker(), tracking.LineCounter([300, 0], [300, 360]), []
        for number, rgb in enumerate(frames, 1):
            tracks = tracker.update(runner(rgb, opts)["detections"])
            rows += tracking.mot_rows(number, tracks)
            counter.update(tracks)
    assert got["tracks"] == rows
    assert got["counts"]["counts"] == counter.counts and got["counts"]["tracks"] == tracker.next_id - 1


def test_answer_matches_the_openapi_document(client, walk):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    doc = client.get("/api/v1/openapi.json").get_json()
    registry = Registry().with_resource("urn:openapi", Resource.from_contents(doc, default_specification=DRAFT202012))
    for name, body in (("TrackResult", walk[1]), ("Error", post(client, b"").get_json())):
        validator = Draft202012Validator({"$ref": f"urn:openapi#/components/schemas/{name}"}, registry=registry)
        assert not [e.message for e in validator.iter_errors(body)][:3]
    operation = doc["paths"]["/api/v1/track"]["post"]
    assert set(operation["requestBody"]["content"]) == {"video/mp4", "video/webm", "video/x-msvideo"}
    assert {"line", "stride", "model", "score", "iou", "max_det", "classes"} == {p["name"] for p in operation["parameters"]}
    assert {"200", "400", "404", "413", "415", "422"} <= set(operation["responses"])


@pytest.mark.parametrize("fmt", list(FOURCC))
def test_containers_decode_in_memory(client, short, fmt):
    """Each container, raw or as application/octet-stream: 8 frames, 2 tracks from frame 1."""
    for content_type in (TYPES[fmt], "application/octet-stream"):
        got = post(client, short[fmt], content_type).get_json()
        assert got["video"] == {"width": 640, "height": 360, "frames": 8, "fps": 5.0}, got
        assert got["counts"] == {"line": None, "counts": {}, "frames": 8, "tracks": 2, "classes": {"person": 0}}
        assert {row[0] for row in got["tracks"]} == set(range(1, 9))


def test_multipart_and_stride(client, short):
    """Form fields carry the parameters; stride 3 tracks frames 1, 4, 7 of the 8 (all decoded)."""
    response = client.post("/api/v1/track", data={"video": (io.BytesIO(short["webm"]), "clip.webm"),
                                                   "stride": "3", "line": LINE},
                           content_type="multipart/form-data")
    got = response.get_json()
    assert response.status_code == 200, got
    assert got["video"]["frames"] == 8 and got["counts"]["frames"] == 3
    assert sorted({row[0] for row in got["tracks"]}) == [1, 4, 7]
    assert got["counts"]["line"] == {"from": [300.0, 0.0], "to": [300.0, 360.0]}


def test_detect_parameters_apply(client, short):
    """classes=2 (cars): no person is a candidate, so nothing is tracked."""
    got = post(client, short["webm"], query="?classes=2").get_json()
    assert got["tracks"] == [] and got["counts"]["tracks"] == 0 and got["video"]["frames"] == 8


# ---------------------------------------------------------------------------- bad input

def good_request_works(client, short):
    response = post(client, short["good"], "video/mp4")
    assert response.status_code == 200 and response.get_json()["counts"]["tracks"] == 2


def bad_bodies(short) -> dict:
    webm, mp4 = short["webm"], short["mp4"]
    return {
        "empty": (b"", "video/webm", 400, "missing_video"),
        "empty octet-stream": (b"", "application/octet-stream", 400, "missing_video"),
        "text": (b"hello, world", "text/plain", 415, "unsupported_media_type"),
        "json": (b'{"video": "x"}', "application/json", 415, "unsupported_media_type"),
        "an image": (encode(photo_rgb("bus.jpg"), "JPEG"), "video/mp4", 415, "unsupported_media_type"),
        "an image's type": (webm, "image/jpeg", 415, "unsupported_media_type"),
        "an HLS playlist": (b"#EXTM3U\n#EXTINF:1,\nfile:///etc/passwd\n", "video/mp4", 415, "unsupported_media_type"),
        "webm header, then zeros": (webm[:64] + bytes(len(webm)), "video/webm", 422, "unprocessable_video"),
        "mp4 cut before its index": (mp4[:len(mp4) // 2], "video/mp4", 422, "unprocessable_video"),
        "webm magic only": (video.EBML, "video/webm", 422, "unprocessable_video"),
        "avi header only": (short["avi"][:200], "video/x-msvideo", 422, "unprocessable_video"),
    }


@pytest.mark.parametrize("case", ["empty", "empty octet-stream", "text", "json", "an image", "an image's type",
                                  "an HLS playlist", "webm header, then zeros", "mp4 cut before its index",
                                  "webm magic only", "avi header only"])
def test_bad_bodies(client, short, case):
    data, content_type, status, code = bad_bodies(short)[case]
    assert_error(post(client, data, content_type), status, code)
    good_request_works(client, short)


BAD_PARAMS = [
    ("?line=1,2,3", 400, "bad_parameter"),
    ("?line=a,b,c,d", 400, "bad_parameter"),
    ("?line=1e3,0,0,0", 400, "bad_parameter"),
    ("?line=nan,0,0,0", 400, "bad_parameter"),
    ("?line=9999999,0,0,0", 400, "bad_parameter"),
    ("?line=5,5,5,5", 400, "bad_parameter"),
    ("?line=", 400, "bad_parameter"),
    ("?stride=0", 400, "bad_parameter"),
    (f"?stride={limits.MAX_VIDEO_STRIDE + 1}", 400, "bad_parameter"),
    ("?stride=1.5", 400, "bad_parameter"),
    ("?score=2", 400, "bad_parameter"),
    ("?iou=0.6", 400, "bad_parameter"),  # yolov5n's NMS is in its graph
    ("?max_det=0", 400, "bad_parameter"),
    ("?classes=person", 400, "bad_parameter"),
    ("?model=nope", 404, "unknown_model"),
    ("?model=../../etc/passwd", 400, "bad_parameter"),
]


@pytest.mark.parametrize("query,status,code", BAD_PARAMS)
def test_bad_parameters(client, short, query, status, code):
    assert_error(post(client, short["webm"], query=query), status, code)
    good_request_works(client, short)


def test_bad_multipart_forms(client, short):
    webm = short["webm"]
    cases = [({"movie": (io.BytesIO(webm), "clip.webm")}, "missing_video"),
             ({"video": "not a file"}, "missing_video"),
             ({"video": [(io.BytesIO(webm), "a.webm"), (io.BytesIO(webm), "b.webm")]}, "duplicate_video"),
             ({"video": (io.BytesIO(webm), "clip.webm"), "line": "0,0"}, "bad_parameter")]
    for form, code in cases:
        assert_error(client.post("/api/v1/track", data=form, content_type="multipart/form-data"), 400, code)
    assert_error(client.get("/api/v1/track"), 405, "method_not_allowed")
    good_request_works(client, short)


def test_limits(models, clip, short):
    """Past the frame limit (from the MP4 header before decoding; while decoding a WebM,
    whose header does not count frames), past the pixel limit, past the upload limit: 413."""
    few = create_app({"MODELS_DIR": models, "TESTING": True, "MAX_VIDEO_FRAMES": 5}).test_client()
    for fmt in ("mp4", "webm", "avi"):
        response = post(few, short[fmt], TYPES[fmt])
        assert_error(response, 413, "too_many_frames")
        assert "limit is 5" in response.get_json()["error"]["message"]
    assert post(few, video_bytes(clip[:5], "webm")).status_code == 200  # exactly at the limit
    small = create_app({"MODELS_DIR": models, "TESTING": True, "MAX_IMAGE_PIXELS": 320 * 240}).test_client()
    assert_error(post(small, short["webm"]), 413, "frame_too_large")
    assert post(small, video_bytes(clip[:3, :240, :320].copy(), "webm")).status_code == 200
    tight = create_app({"MODELS_DIR": models, "TESTING": True, "MAX_CONTENT_LENGTH": len(short["webm"]) - 1})
    assert_error(post(tight.test_client(), short["webm"]), 413, "payload_too_large")


def test_no_detector_installed(tmp_path, short):
    assert_error(post(create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client(), short["webm"]),
                 503, "no_model")


# ---------------------------------------------------------------------------- server/video.py alone

@pytest.fixture(scope="module")
def tiny() -> np.ndarray:
    """6 frames of 64x48 whose mean grey level steps up, to tell frames apart after decoding."""
    return np.stack([np.full((48, 64, 3), 40 * i + 20, np.uint8) for i in range(6)])


def test_container_sniffing(tiny):
    for fmt in FOURCC:
        assert video.container(video_bytes(tiny, fmt)) == fmt
    for data in (b"", b"RIFF", b"RIFF\0\0\0\0WEBPVP8 ", b"\x89PNG\r\n\x1a\n", b"#EXTM3U\n", b"ffconcat version 1.0"):
        assert video.container(data) is None


def test_frames_and_stride(tiny):
    data = video_bytes(tiny, "avi")  # MJPEG: no frame depends on another
    with video.open_video(data, 10_000, 100) as clip:
        got = list(clip.frames(stride=2))
        assert (clip.width, clip.height, clip.count, clip.fps) == (64, 48, 6, 5.0)
    assert [number for number, _ in got] == [1, 3, 5]
    assert [round(float(rgb.mean()) / 40) for _, rgb in got] == [0, 2, 4]
    assert all(rgb.shape == (48, 64, 3) and rgb.dtype == np.uint8 for _, rgb in got)


def test_video_errors(tiny):
    webm = video_bytes(tiny, "webm")
    cases = [(b"", 400, "empty_video"), (b"GIF89a" + bytes(100), 415, "unsupported_media_type"),
             (webm[:40], 422, "unprocessable_video")]
    for data, status, code in cases:
        with pytest.raises(Problem) as caught:
            video.open_video(data, 10_000, 100)
        assert (caught.value.status, caught.value.code) == (status, code)
    with pytest.raises(Problem) as caught:
        video.open_video(webm, 64 * 48 - 1, 100)
    assert caught.value.code == "frame_too_large"
    with video.open_video(webm, 10_000, 5) as clip, pytest.raises(Problem) as caught:
        list(clip.frames())
    assert (caught.value.status, caught.value.code) == (413, "too_many_frames")
    with pytest.raises(Problem) as caught:
        video.open_video(video_bytes(tiny, "mp4"), 10_000, 5)  # from the header, before any frame
    assert "has 6 frames" in caught.value.message


def test_the_bytes_outlive_the_capture(tiny):
    """OpenCV's stream reader does not own the stream: once the caller's bytes are gone the
    Video must still hold it, and close() must not crash (it did, with a temporary BytesIO)."""
    clip = video.open_video(video_bytes(tiny, "webm"), 10_000, 100)
    gc.collect()
    assert len(list(clip.frames())) == 6
    clip.close()
    del clip
    gc.collect()
