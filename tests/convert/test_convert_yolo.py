"""YOLO converters: classic YOLOv5n (anchor head, NMS inside the graph) with the real COCO
weights, and the Ultralytics 8.x export (raw head) with random weights from an
architecture yaml. Real detections on the real photos through the produced TF.js files
(WASM backend, in Node), the LiteRT artifact, recorded parity, quantised variants, and
the CLI's error paths."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from modelcontract.decode import NMS_KEYS
from harness.converter_cli import assert_clean_error, converter_cli
from harness.models import assert_speed_measured
from harness.paths import YOLOV5N_WEIGHTS
from harness.models import read_manifest as manifest

PERSON, BUS = 0, 5

needs_weights = pytest.mark.skipif(not YOLOV5N_WEIGHTS.is_file(),
                                   reason=f"shared yolov5n weights absent: {YOLOV5N_WEIGHTS}")


def detect(folder: Path, photo: str, runtime: str = "tfjs") -> dict:
    """Run an installed 'nms'-format model on a real photo the way a page or the server
    would: manifest input contract, the four outputs, boxes mapped back to source pixels."""
    from converters import parity, sources, tflite
    from modelcontract.decode import nms_rows
    from modelcontract.geometry import prepare

    m = manifest(folder)
    image = sources.load_photo(photo)
    x, transform = prepare(image, m["input"])
    if runtime == "tfjs":
        names = {t["key"]: t["name"] for t in m["outputs"]["tensors"]}
        run = parity.run_tfjs(folder / m["tfjs"]["model"], {m["input"]["name"]: x},
                              outputs=[names[k] for k in NMS_KEYS], backend="wasm")
        out = {k: run["outputs"][names[k]] for k in NMS_KEYS}
    else:
        out = tflite.run_tflite(folder / m["server"]["model"], {m["input"]["name"]: x})
    _, h, w, _ = m["input"]["shape"]
    rows = nms_rows(out, (w, h))  # unclipped: the overhang is checked below
    return {"classes": rows["classes"], "scores": rows["scores"], "boxes": transform.to_source(rows["boxes"]),
            "image": image.shape, "padding": np.asarray(out["scores"]).reshape(-1)[len(rows["scores"]):]}


def assert_boxes_inside(found: dict) -> None:
    """Boxes mapped back through the letterbox inverse land on the photo (a box may overhang an
    edge the object is cut by, as yolov5's own output does before clipping; by at most 3%)
    and stay well-formed once clipped to it."""
    h, w = found["image"][:2]
    b = found["boxes"]
    assert len(b), "no detections"
    assert (b[:, [0, 2]] >= -0.03 * w).all() and (b[:, [0, 2]] <= 1.03 * w).all(), b
    assert (b[:, [1, 3]] >= -0.03 * h).all() and (b[:, [1, 3]] <= 1.03 * h).all(), b
    clipped = np.clip(b, 0, [w, h, w, h])
    assert ((clipped[:, 2] - clipped[:, 0]) > 10).all() and ((clipped[:, 3] - clipped[:, 1]) > 10).all(), b


# ---------------------------------------------------------------------------- yolov5n

@pytest.fixture(scope="module")
def v5(built_model):
    return built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS))


@needs_weights
def test_yolov5n_manifest_contract(v5):
    m = manifest(v5)
    assert m["task"] == "detect" and m["outputs"]["format"] == "nms"
    assert m["input"]["name"] == "images" and m["input"]["shape"] == [1, 640, 640, 3]
    assert (m["input"]["resize"], m["input"]["pad_value"], m["input"]["range"]) == ("letterbox", 114, [0.0, 1.0])
    assert [t["key"] for t in m["outputs"]["tensors"]] == list(NMS_KEYS)
    assert m["nms"] == {"iou": 0.45, "score": 0.25, "max_det": 100, "agnostic": True}
    assert len(m["labels"]) == 80 and m["labels"][PERSON] == "person" and m["labels"][BUS] == "bus"
    assert (v5 / m["tfjs"]["model"]).is_file() and (v5 / m["server"]["model"]).is_file()
    # the graph's own signature agrees with what the manifest tells the page to fetch
    sig = json.loads((v5 / m["tfjs"]["model"]).read_text())["signature"]["outputs"]
    assert {k: v["name"].split(":")[0] for k, v in sig.items()} == \
        {t["key"]: t["name"] for t in m["outputs"]["tensors"]}
    assert m["source"]["sha256"] == "4f180cf23ba0717ada0badd6c685026d73d48f184d00fc159c2641284b2ac0a3"


@needs_weights
def test_yolov5n_parity_meets_targets(v5):
    p = manifest(v5)["parity"]
    assert p["passed"] is True and p["tfjs"]["backend"] == "wasm"
    assert p["target_relative"] == 1e-4
    assert p["tfjs"]["relative"] <= 1e-4, p["tfjs"]
    for runtime in ("tfjs", "server"):
        det = p[runtime]["detections"]
        assert det["reference_count"] >= 4  # 3+ persons and the bus
        assert det["count"] == det["reference_count"], det
        assert det["min_iou_same_class"] >= 0.99, det
        assert det["max_score_abs"] < 1e-3, det


@needs_weights
def test_yolov5n_tfjs_finds_bus_and_people(v5):
    found = detect(v5, "bus.jpg")
    classes = list(found["classes"])
    assert BUS in classes and classes.count(PERSON) >= 3, classes
    assert (found["scores"] >= 0.25).all() and (found["padding"] == 0).all()
    assert_boxes_inside(found)
    bus = found["boxes"][classes.index(BUS)]
    h, w = found["image"][:2]
    assert (min(bus[2], w) - max(bus[0], 0)) > 0.7 * w, bus  # the bus spans the photo's width
    assert bus[1] < 0.4 * h and bus[3] > 0.6 * h, bus


@needs_weights
def test_yolov5n_tfjs_finds_two_people_on_zidane(v5):
    found = detect(v5, "zidane.jpg")
    assert list(found["classes"]).count(PERSON) == 2, found["classes"]
    assert_boxes_inside(found)


@needs_weights
def test_yolov5n_litert_artifact_matches(v5):
    server, browser = detect(v5, "bus.jpg", runtime="litert"), detect(v5, "bus.jpg")
    assert sorted(server["classes"]) == sorted(browser["classes"])
    assert np.abs(np.sort(server["scores"]) - np.sort(browser["scores"])).max() < 1e-3


@needs_weights
@pytest.mark.parametrize("quantize", ["float16", "uint8"])
def test_yolov5n_quantized_variants(built_model, v5, quantize):
    folder = built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS), quantize=quantize)
    m = manifest(folder)
    assert m["quantization"] == quantize and folder.name == f"yolov5n-{quantize}"
    p = m["parity"]
    if quantize == "float16":
        assert p["target_relative"] == 1e-2 and p["tfjs"]["relative"] <= 1e-2, p["tfjs"]
    else:
        # No target, figures recorded: a measurement, not a placeholder. Quantised weights move the
        # raw head beyond fp32 rounding (the fp32 target) yet by less than its own scale, and the
        # recorded detections are as many as the reference's.
        assert p["target_relative"] is None and 1e-4 < p["tfjs"]["relative"] < 1, p["tfjs"]
        assert p["tfjs"]["detections"]["count"] == p["tfjs"]["detections"]["reference_count"] >= 4, p["tfjs"]
    weights = sum(size for name, size in m["files"].items() if name.endswith(".bin"))
    fp32 = sum(size for name, size in manifest(v5)["files"].items() if name.endswith(".bin"))
    assert weights < fp32 * (0.55 if quantize == "float16" else 0.3), (weights, fp32)
    found = detect(folder, "bus.jpg")
    classes = list(found["classes"])
    assert BUS in classes and classes.count(PERSON) >= 3, classes
    assert_boxes_inside(found)


@pytest.fixture(scope="module")
def v5_320(built_model):
    """The 320-px build of the same weights (models_dir/yolov5n-320: the pages' tests serve it too)."""
    return built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS), imgsz=320)


@needs_weights
def test_yolov5n_320_is_its_own_model(v5, v5_320):
    m, m640 = manifest(v5_320), manifest(v5)
    assert v5_320.name == m["id"] == "yolov5n-320" and m["name"] == "yolov5n"
    assert m["input"]["shape"] == [1, 320, 320, 3] and m["options"]["imgsz"] == 320
    assert m640["input"]["shape"] == [1, 640, 640, 3] and m640["options"]["imgsz"] == 640
    graph_input = json.loads((v5_320 / m["tfjs"]["model"]).read_text())["signature"]["inputs"]
    assert [d["size"] for d in next(iter(graph_input.values()))["tensorShape"]["dim"]] == ["1", "320", "320", "3"]
    assert m["labels"] == m640["labels"] and m["source"]["sha256"] == m640["source"]["sha256"]
    assert m["parity"]["passed"] and m["parity"]["tfjs"]["relative"] <= 1e-4
    for runtime in ("tfjs", "server"):
        det = m["parity"][runtime]["detections"]
        assert det["count"] == det["reference_count"] and det["min_iou_same_class"] >= 0.99, det
    assert (v5_320 / "model.tflite").read_bytes() != (v5 / "model.tflite").read_bytes()


@needs_weights
def test_yolov5n_320_agreement_with_640(v5_320):
    """Of the 640 reference's detections (PyTorch at 640, same weights) on the real photos, the
    320 build keeps most: all on bus.jpg's large objects; the figure is recorded, not assumed."""
    a = manifest(v5_320)["agreement"]
    assert a["photos"] == ["bus.jpg", "zidane.jpg"] and a["rule"] == "IoU >= 0.5, same class"
    assert a["reference_size"] == 640 and "640" in a["reference"]
    assert 0 <= a["kept"] <= a["reference_detections"] and a["reference_detections"] >= 6
    assert a["fraction"] == round(a["kept"] / a["reference_detections"], 4)
    bus = a["per_photo"]["bus.jpg"]
    assert bus["reference_detections"] >= 4 and bus["kept"] / bus["reference_detections"] >= 0.5, bus
    assert sum(p["kept"] for p in a["per_photo"].values()) == a["kept"]


@needs_weights
def test_yolov5n_320_finds_bus_and_people(v5_320):
    found = detect(v5_320, "bus.jpg")
    classes = list(found["classes"])
    assert BUS in classes and classes.count(PERSON) >= 3, classes
    assert_boxes_inside(found)


@needs_weights
def test_speed_and_licence_recorded(v5, v5_320):
    """The released checkpoint (known by its sha256) is AGPL-3.0; speed is the file's native
    LiteRT time at 2 threads (its ratios belong to the benches, not to a test)."""
    for folder in (v5, v5_320):
        assert_speed_measured(folder)
        m = manifest(folder)
        assert m["source"]["licence"] == {"name": "AGPL-3.0",
                                          "url": "https://github.com/ultralytics/yolov5/blob/master/LICENSE"}


def test_yolov5n_random_weights_build(built_model):
    """--weights none: the same architecture, no checkpoint needed, still verified."""
    folder = built_model("yolov5n", weights="none")
    m = manifest(folder)
    assert m["source"]["sha256"].startswith("random") and m["source"]["path"] is None
    assert m["source"]["licence"]["name"] == "none (random weights)"
    assert m["parity"]["passed"] and m["parity"]["tfjs"]["relative"] <= 1e-4
    assert len(m["labels"]) == 80


def test_yolov5n_rejects_a_text_file(tmp_path):
    bad = tmp_path / "weights.pt"
    bad.write_text("not a checkpoint\n")
    proc = converter_cli("yolov5n", "--weights", str(bad), "--out", str(tmp_path / "models"))
    assert_clean_error(proc.returncode, proc.stderr, "weights.pt", "expected a yolov5", "--weights")
    assert not (tmp_path / "models" / "yolov5n").exists()


def test_yolov5n_offline_default_download_fails_cleanly(tmp_path, monkeypatch, capsys):
    from converters import __main__ as cli_main, sources, yolov5

    monkeypatch.setattr(sources, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(yolov5, "URL", "http://127.0.0.1:9/yolov5n.pt")  # nothing listens: offline
    code = cli_main.main(["yolov5n", "--out", str(tmp_path / "models")])
    assert_clean_error(code, capsys.readouterr().err, "could not download yolov5n.pt", "--weights")


@needs_weights
def test_yolov5n_loads_v7_checkpoints_without_running_code(tmp_path, monkeypatch):
    """yolov5 v7.0 pickles models.yolo.DetectionModel and keeps an 'ema' copy; the loader takes
    both, through torch's weights_only unpickler, and refuses other pickled classes."""
    import copy
    import types

    import torch

    from converters import sources, yolov5
    from converters.errors import ConverterError
    from converters.yolov5 import modules as mods

    model = yolov5.load_model(yolov5.resolve_source(str(YOLOV5N_WEIGHTS)))
    v7 = mods.DetectionModel.__new__(mods.DetectionModel)
    v7.__dict__.update(copy.deepcopy(model.__dict__))
    for name in ("models", "models.yolo", "models.common"):  # importable only while saving
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    for name, cls in mods.CLASSES.items():
        setattr(sys.modules[cls.__module__], name, cls)
    torch.save({"epoch": -1, "model": None, "ema": v7.half()}, tmp_path / "v7.pt")
    torch.save({"model": model, "hook": print}, tmp_path / "sneaky.pt")
    for name in ("models", "models.yolo", "models.common"):
        monkeypatch.delitem(sys.modules, name)

    loaded = yolov5.load_model(yolov5.resolve_source(str(tmp_path / "v7.pt")))
    assert isinstance(loaded, mods.Model) and type(loaded).__name__ == "DetectionModel"
    x = np.random.default_rng(0).random((1, 640, 640, 3), dtype=np.float32)
    assert np.abs(mods.torch_head(loaded, x) - mods.torch_head(model, x)).max() < 1e-3  # fp16 round trip
    with pytest.raises(ConverterError, match="builtin__ print"):
        yolov5.resolve_source(str(tmp_path / "sneaky.pt"))
    with pytest.raises(ConverterError, match="could not load sneaky.pt"):  # the loader refuses it too
        yolov5.load_model(sources.Source(kind="test", path=tmp_path / "sneaky.pt"))


def test_yolov5n_points_ultralytics_checkpoints_elsewhere(tmp_path):
    """An Ultralytics 8.x .pt is recognised without unpickling it and sent to the yolo converter."""
    import zipfile

    fake = tmp_path / "yolov8n.pt"
    with zipfile.ZipFile(fake, "w") as zf:  # the pickle opcodes of a class reference only
        zf.writestr("yolov8n/data.pkl", b"\x80\x02cultralytics.nn.tasks\nDetectionModel\nq\x00.")
    proc = converter_cli("yolov5n", "--weights", str(fake), "--out", str(tmp_path / "models"))
    assert_clean_error(proc.returncode, proc.stderr, "Ultralytics 8.x", "python -m converters yolo")


# ---------------------------------------------------------------------------- yolo (ultralytics 8.x)

@pytest.fixture(scope="module")
def v8(built_model):
    return built_model("yolo", weights="yolov8n.yaml")


def test_yolo_raw_head_contract(v8):
    m = manifest(v8)
    assert m["task"] == "detect" and m["outputs"]["format"] == "yolo-raw"
    assert m["outputs"]["tensors"][0]["shape"] == [1, 84, 8400]
    assert m["input"]["shape"] == [1, 640, 640, 3] and m["input"]["resize"] == "letterbox"
    assert m["source"]["architecture"] == "yolov8n.yaml" and m["architecture"]["head"] == "Detect"
    assert len(m["labels"]) == 80 and m["labels"][BUS] == "bus"
    assert (v8 / "model.tflite").stat().st_size > 1_000_000


def test_yolo_parity_meets_target(v8):
    p = manifest(v8)["parity"]
    assert p["passed"] is True and p["tfjs"]["backend"] == "wasm"
    assert p["tfjs"]["relative"] <= 1e-4 and p["server"]["relative"] <= 1e-4, p
    # the random weights still produce outputs worth comparing (not a constant)
    assert p["pytorch_fp32_vs_fp64"]["relative"] < 1e-5


def pytorch_random_yolo(architecture: str):
    """The PyTorch network the yolo build converts, rebuilt here as the converter's child makes
    it from an architecture yaml: seeded weights, class prior zeroed, batch norm calibrated on
    zidane.jpg at 640 (converters/ultralytics_yolo/)."""
    import torch
    from PIL import Image

    pillow_open = Image.open
    from ultralytics import YOLO

    # Importing ultralytics replaces PIL.Image.open, for the whole process, with a wrapper that
    # tries to pip-install a HEIF plugin whenever a file fails to open: later tests in this
    # process would see its ModuleNotFoundError instead of Pillow's own errors (the server's 413/415).
    Image.open = pillow_open

    from converters import sources, ultralytics_yolo
    from converters.ultralytics_yolo import child
    from modelcontract.geometry import prepare

    torch.manual_seed(child.RANDOM_SEED)
    model = YOLO(architecture, task="detect").model
    for branch in model.model[-1].cv3:
        torch.nn.init.zeros_(branch[-1].bias)
    child.calibrate_batchnorm(model, prepare(sources.load_photo("zidane.jpg"), ultralytics_yolo.INPUT)[0])
    return model.eval()


def test_yolo_tfjs_output_tracks_pytorch_on_bus(v8):
    """Independent of the manifest: the installed TF.js files (WASM, in Node) against the same
    network in PyTorch, rebuilt here, on bus.jpg: the raw head's layout, and its values within
    the fp32 target."""
    import torch

    from converters import parity, sources
    from modelcontract.geometry import prepare

    m = manifest(v8)
    x, _ = prepare(sources.load_photo("bus.jpg"), m["input"])
    name = m["outputs"]["tensors"][0]["name"]
    y = parity.run_tfjs(v8 / m["tfjs"]["model"], {m["input"]["name"]: x}, outputs=[name])["outputs"][name]
    with torch.no_grad():
        out = pytorch_random_yolo(m["source"]["architecture"])(torch.from_numpy(x).permute(0, 3, 1, 2).contiguous())
    reference = (out[0] if isinstance(out, (list, tuple)) else out).numpy()
    assert y.shape == reference.shape == (1, 84, 8400)
    scores = y[0, 4:]
    assert 0 <= scores.min() and scores.max() <= 1 and scores.std() > 1e-3  # sigmoid outputs that vary
    cx = y[0, 0]
    assert cx.min() < 40 and cx.max() > 600  # anchor centres cover the 640 px input
    assert parity.compare(reference, y)["relative"] <= parity.TARGETS["none"]
    assert parity.compare(reference[:, 4:], y[:, 4:])["max_abs"] <= parity.TARGETS["none"]  # class scores


# An export each (a minute or more under the suite's load): make test-all. make test keeps
# yolov5n's 320-px and quantised builds, and a yolo classifier built at 64 px (test_yolo_tasks).
@pytest.mark.slow
def test_yolo_320_is_its_own_model(built_model, v8):
    """--imgsz for the Ultralytics family: yolo-320 beside yolo, the same (seeded, calibrated at
    640) random weights, its agreement with them at 640 recorded."""
    folder = built_model("yolo", weights="yolov8n.yaml", imgsz=320)
    m, m640 = manifest(folder), manifest(v8)
    assert folder.name == m["id"] == "yolo-320" and m["options"]["imgsz"] == 320
    assert m["input"]["shape"] == [1, 320, 320, 3]
    assert m["outputs"]["tensors"][0]["shape"] == [1, 84, 40 * 40 + 20 * 20 + 10 * 10]  # strides 8, 16, 32
    assert m["parity"]["passed"] and m["parity"]["tfjs"]["relative"] <= 1e-4
    assert m["source"]["sha256"] == m640["source"]["sha256"] and m["labels"] == m640["labels"]
    assert m["source"]["licence"]["name"] == "none (random weights)"
    a = m["agreement"]
    assert a["photos"] == ["bus.jpg", "zidane.jpg"] and a["reference_size"] == 640
    assert 0 <= a["kept"] <= a["reference_detections"] and a["reference_detections"] > 0
    assert a["fraction"] == round(a["kept"] / a["reference_detections"], 4)
    assert_speed_measured(folder)


@pytest.mark.slow
def test_yolo_float16_variant(built_model):
    folder = built_model("yolo", weights="yolov8n.yaml", quantize="float16")
    p = manifest(folder)["parity"]
    assert p["target_relative"] == 1e-2 and p["tfjs"]["relative"] <= 1e-2 and p["passed"], p


@pytest.mark.parametrize("weights, needles", [
    ("yolov8s-worldv2.yaml", ("WorldDetect head", "Detect, Segment, Pose, OBB, Classify")),
    ("rtdetr-l.yaml", ("RTDETRDecoder head", "Detect, Segment, Pose, OBB, Classify")),
    ("nosuchmodel.yaml", ("neither a file nor an architecture",)),
])
def test_yolo_rejects_other_architectures(tmp_path, weights, needles):
    proc = converter_cli("yolo", "--weights", weights, "--out", str(tmp_path))
    assert_clean_error(proc.returncode, proc.stderr, *needles)


@needs_weights
def test_yolo_points_classic_yolov5_elsewhere(tmp_path):
    proc = converter_cli("yolo", "--weights", str(YOLOV5N_WEIGHTS), "--out", str(tmp_path))
    assert_clean_error(proc.returncode, proc.stderr, "anchor-based", "python -m converters yolov5n")


def test_yolo_offline_default_download_fails_cleanly(tmp_path, monkeypatch, capsys):
    from converters import __main__ as cli_main, sources
    from converters.ultralytics_yolo import official

    monkeypatch.setenv("DATARAILROAD_SHARED", str(tmp_path / "shared"))
    monkeypatch.setattr(sources, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(official, "RELEASE", "http://127.0.0.1:9/")
    code = cli_main.main(["yolo", "--out", str(tmp_path / "models")])
    assert_clean_error(code, capsys.readouterr().err, "yolo11n.pt is not in", "can't download it", "--weights")
