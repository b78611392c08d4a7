"""static/js/runtime/model-file.js in Node: the metadata Ultralytics appends to a .tflite, read
as Python's zipfile reads it (deflated, or stored; with a zip comment), the manifest a page
makes of it for every task, and the one message for each file the page cannot run."""
from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from harness.node import js_url, run_node
from harness.paths import JS, SHARED
from harness.user_exports import tiny_onnx

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ultralytics-litert"
LEGACY = SHARED / "fixtures" / "ultralytics-tflite"   # Ultralytics 8.1-8.3 TensorFlow exports
TASKS = ("detect", "segment", "pose", "obb", "classify")

READ = """
import {File} from 'node:buffer';
const mf = await import(%s);
const {headScale} = await import(%s);
const out = [];
for (const c of req.cases) {
  const files = c.paths.map((p, i) => new File([readFileSync(p)], c.names[i]));
  try {
    const model = await mf.readModelFiles(files, c.page);
    const manifest = mf.userManifest(model, {id: 'yours-x', url: 'blob:x', files: model.files, added: 0});
    delete manifest.tfjsFiles;
    const rows = manifest.outputs.format === 'probabilities' ? null
      : 4 + model.labels.length + (model.task === 'pose' ? model.kptShape[0] * model.kptShape[1] : model.task === 'obb' ? 1 : model.task === 'segment' ? 32 : 0);
    out.push({metadata: model.metadata, manifest, scale: rows && Array.from(headScale(rows, model.imgsz, model.labels.length, model.kptShape))});
  } catch (e) {
    out.push({error: e.message, kind: e.constructor.name});
  }
}
process.stdout.write(JSON.stringify(out));
""" % (js_url(JS / "runtime/model-file.js"), js_url(JS / "contract/ultralytics_litert.js"))


def read(cases: list[dict]) -> list[dict]:
    """Each case: the files given at once ("path" or "paths"; named "name" / "names", else as
    the files are), for the "page"."""
    payload = []
    for c in cases:
        paths = c.get("paths") or [c["path"]]
        names = c.get("names") or ([c["name"]] if "name" in c else [Path(p).name for p in paths])
        payload.append({"paths": [str(p) for p in paths], "names": names, "page": c["page"]})
    return run_node(READ, {"cases": payload})


def metadata_of(path: Path) -> dict:
    data = path.read_bytes()
    return json.loads(zipfile.ZipFile(io.BytesIO(data[data.rfind(b"PK\x03\x04"):])).read("metadata.json"))


def rezipped(path: Path, out: Path, compression: int, comment: bytes = b"", **changes) -> Path:
    data = path.read_bytes()
    start = data.rfind(b"PK\x03\x04")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression) as z:
        z.writestr("metadata.json", json.dumps({**metadata_of(path), **changes}))
        z.comment = comment
    out.write_bytes(data[:start] + buffer.getvalue())
    return out


def test_every_tasks_metadata_reads_as_pythons_zipfile_reads_it_and_makes_its_manifest():
    cases = [{"path": FIXTURES / f"{t}.tflite", "name": f"{t}.tflite", "page": "classify" if t == "classify" else "detect"}
             for t in TASKS]
    results = read(cases)
    for task, case, got in zip(TASKS, cases, results):
        assert "error" not in got, got
        meta = metadata_of(case["path"])
        assert got["metadata"] == meta and meta["task"] == task
        manifest = got["manifest"]
        assert manifest["ultralytics_task"] == task and manifest["labels"] == [meta["names"][str(i)] for i in range(len(meta["names"]))]
        assert manifest["input"]["shape"] == [1, *meta["imgsz"], 3] and manifest["litert"]["model"]["url"] == "blob:x"
        assert manifest["outputs"]["format"] == {"detect": "yolo-raw", "segment": "yolo-seg", "pose": "yolo-pose",
                                                 "obb": "yolo-obb", "classify": "probabilities"}[task]
        h, w = meta["imgsz"]
        if task == "pose":  # x and y of every keypoint over the width and height; visibility as is
            k, d = meta["kpt_shape"]
            nc = len(meta["names"])
            assert manifest["kpt_shape"] == [k, d]
            assert got["scale"][4 + nc::d] == [w] * k and got["scale"][5 + nc::d] == [h] * k
            assert got["scale"][6 + nc::d] == [1] * k
        if got["scale"]:
            assert got["scale"][:4] == [w, h, w, h] and set(got["scale"][4:4 + len(meta["names"])]) == {1}


def test_a_stored_entry_and_a_zip_comment_read_the_same(tmp_path):
    stored = rezipped(FIXTURES / "pose.tflite", tmp_path / "stored.tflite", zipfile.ZIP_STORED, comment=b"made here")
    got = read([{"path": stored, "name": "stored.tflite", "page": "detect"}])[0]
    assert got.get("metadata") == metadata_of(FIXTURES / "pose.tflite")


def test_each_file_the_page_cannot_run_gets_its_message(tmp_path):
    segment = FIXTURES / "segment.tflite"
    data = segment.read_bytes()
    (tmp_path / "bare.tflite").write_bytes(data[:data.rfind(b"PK\x03\x04")])
    (tmp_path / "text.tflite").write_text("hello")
    (tmp_path / "best.pt").write_bytes(b"PK\x03\x04")
    (tmp_path / "model.json").write_text("{}")
    (tmp_path / "group1-shard1of1.bin").write_bytes(b"\0" * 8)
    cases = {
        "bare.tflite": ("detect", "without Ultralytics metadata"),
        "text.tflite": ("detect", "is not a model this page can run"),
        "best.pt": ("detect", "PyTorch checkpoint"),
        "model.json": ("detect", "is not a TF.js graph model"),
        "group1-shard1of1.bin": ("detect", "part of a TF.js model"),
        "panoptic.tflite": ("detect", 'task "panoptic"'),  # a task this app does not draw
        "integer.tflite": ("detect", "int8 tensors (a full-integer export)"),
        "nonames.tflite": ("detect", "lacks class names"),
        "gray.tflite": ("detect", "wants 1 channels"),
        "nokpt.tflite": ("detect", "without a usable kpt_shape"),
        "segment.tflite": ("classify", "open it on /detect"),
        "labels.tflite": ("detect", "without Ultralytics metadata"),
        "notask.tflite": ("detect", "metadata names no task"),
    }
    # another file appended where metadata would be (tflite_support's label list, say)
    labels = io.BytesIO()
    with zipfile.ZipFile(labels, "w") as z:
        z.writestr("labels.txt", "person\nbicycle\n")
    (tmp_path / "labels.tflite").write_bytes(data[:data.rfind(b"PK\x03\x04")] + labels.getvalue())
    rezipped(segment, tmp_path / "notask.tflite", zipfile.ZIP_DEFLATED, task=None)
    rezipped(segment, tmp_path / "panoptic.tflite", zipfile.ZIP_DEFLATED, task="panoptic")
    (tmp_path / "integer.tflite").write_bytes((LEGACY / "yolo11n_full_integer_quant.tflite").read_bytes())
    rezipped(segment, tmp_path / "nonames.tflite", zipfile.ZIP_DEFLATED, names={})
    rezipped(segment, tmp_path / "gray.tflite", zipfile.ZIP_DEFLATED, channels=1)
    rezipped(FIXTURES / "pose.tflite", tmp_path / "nokpt.tflite", zipfile.ZIP_DEFLATED, kpt_shape=None)
    (tmp_path / "segment.tflite").write_bytes(data)
    results = read([{"path": tmp_path / name, "name": name, "page": page} for name, (page, _) in cases.items()])
    for (name, (_, words)), got in zip(cases.items(), results):
        assert got.get("kind") == "ModelFileError" and words in got["error"], (name, got)


def tfjs_folder(folder: Path, metadata: dict, shards: int = 2) -> list[Path]:
    """A TF.js graph model's files as Ultralytics' TF.js export lays them out (weights are
    not read here): model.json, its shards, metadata.yaml."""
    import yaml

    folder.mkdir()
    paths = [f"group1-shard{i + 1}of{shards}.bin" for i in range(shards)]
    (folder / "model.json").write_text(json.dumps({
        "format": "graph-model", "signature": {"outputs": {"Identity_1:0": {"name": "Identity_1:0"},
                                                           "Identity:0": {"name": "Identity:0"}}},
        "modelTopology": {"node": []}, "weightsManifest": [{"paths": paths, "weights": []}]}))
    for p in paths:
        (folder / p).write_bytes(b"\0" * 16)
    (folder / "metadata.yaml").write_text(yaml.safe_dump(metadata))
    return sorted(folder.iterdir())


def test_a_tfjs_folder_reads_from_its_metadata_yaml_and_wants_every_file(tmp_path):
    metadata = {"description": "Ultralytics YOLOv8n-seg model trained on data.yaml", "task": "segment",
                "imgsz": [320, 320], "names": {0: "circle", 1: "square"}, "stride": 32, "batch": 1}
    files = tfjs_folder(tmp_path / "web", metadata)
    no_meta = [f for f in files if f.name != "metadata.yaml"]
    no_shard = [f for f in files if f.name != "group1-shard2of2.bin"]
    whole, missing, bare = read([{"paths": files, "page": "detect"}, {"paths": no_shard, "page": "detect"},
                                 {"paths": no_meta, "page": "detect"}])
    assert whole.get("metadata") == metadata | {"names": {"0": "circle", "1": "square"}}, whole
    manifest = whole["manifest"]
    assert manifest["tfjs"] == {"model": "model.json"} and "litert" not in manifest
    assert manifest["answer_reference"] == "wasm" and manifest["title"] == "YOLOv8n-seg (your TF.js model)"
    assert manifest["input"]["shape"] == [1, 320, 320, 3] and manifest["labels"] == ["circle", "square"]
    assert manifest["outputs"]["tensors"] == [{"name": "Identity", "key": "head", "role": "head"},
                                              {"name": "Identity_1", "key": "prototypes", "role": "prototypes"}]
    assert "group1-shard2of2.bin: pick every file of the model's folder" in missing["error"]
    assert "no metadata.yaml beside model.json" in bare["error"]


TENSORS = """
const {tfliteTensors} = await import(%s);
process.stdout.write(JSON.stringify(req.map((p) => {
  const {inputs, outputs, types} = tfliteTensors(new Uint8Array(readFileSync(p)));
  return {inputs, outputs, types: [...types].sort()};
})));
""" % js_url(JS / "runtime/tflite-file.js")


def test_the_flatbuffers_tensors_read_as_litert_reads_them():
    from ai_edge_litert.interpreter import Interpreter

    paths = sorted(LEGACY.glob("*.tflite")) + [FIXTURES / "segment.tflite"]
    for path, got in zip(paths, run_node(TENSORS, [str(p) for p in paths])):
        interpreter = Interpreter(model_path=str(path))
        for mine, theirs in [*zip(got["inputs"], interpreter.get_input_details()),
                             *zip(got["outputs"], interpreter.get_output_details())]:
            scale, zero_point = theirs["quantization"]
            assert mine["shape"] == theirs["shape"].tolist() and mine["dtype"] == theirs["dtype"].__name__, path
            assert (mine["scale"] or 0.0) == pytest.approx(scale) and (mine["zeroPoint"] or 0) == zero_point, path
        assert len(got["inputs"]) == len(interpreter.get_input_details())
        assert len(got["outputs"]) == len(interpreter.get_output_details())
        assert ("int8" in got["types"]) == any(w in path.name for w in ("int8", "integer")), (path, got["types"])


def test_legacy_files_read_their_python_repr_metadata_as_ultralytics_does():
    """8.1-8.3 wrote Python's repr of the metadata (temp_meta.txt): read as ast.literal_eval
    reads it, with NHWC input and (8.1's yolov8n) no channels key."""
    import ast

    names = ["yolov8n_int8_320.tflite", "yolo11n-seg_int8_320.tflite"]
    got = read([{"path": LEGACY / n, "name": n, "page": "detect"} for n in names])
    for name, result in zip(names, got):
        data = (LEGACY / name).read_bytes()
        text = zipfile.ZipFile(io.BytesIO(data[data.rfind(b"PK\x03\x04"):])).read("temp_meta.txt").decode()
        want = ast.literal_eval(text)
        assert result["metadata"] == json.loads(json.dumps(want)), name
        manifest = result["manifest"]
        assert manifest["file_io"]["layout"] == "NHWC" and manifest["quantization"] == "int8"
        assert manifest["input"]["shape"] == [1, 320, 320, 3] and manifest["nms"]["where"] == "page"
        assert "TensorFlow Lite (onnx2tf export, NHWC input), int8 weights" == manifest["user"]["format"]


def test_a_file_with_nms_inside_is_read_as_detections_after_nms(tmp_path):
    """nms=True in the export's arguments, or end2end (YOLO26's NMS-free head): its outputs are
    detections after NMS, and the page runs no NMS of its own on them."""
    nms = rezipped(FIXTURES / "pose.tflite", tmp_path / "nms.tflite", zipfile.ZIP_DEFLATED,
                   args={"nms": True, "batch": 1})
    e2e = rezipped(FIXTURES / "detect.tflite", tmp_path / "e2e.tflite", zipfile.ZIP_DEFLATED, end2end=True)
    got = read([{"path": p, "name": p.name, "page": "detect"} for p in (nms, e2e, FIXTURES / "detect.tflite")])
    for result in got[:2]:
        assert result["manifest"]["file_io"]["end2end"] is True and result["manifest"]["nms"]["where"] == "model"
    assert got[0]["manifest"]["user"]["format"].endswith("NMS inside")
    assert got[1]["manifest"]["user"]["format"].endswith("NMS-free head")
    assert got[2]["manifest"]["file_io"] == {"layout": "NCHW", "weights": "float32", "end2end": False,
                                                 **{k: got[2]["manifest"]["file_io"][k] for k in ("input", "outputs")}}
    assert got[2]["manifest"]["nms"]["where"] == "page"


PYTHON_LITERALS = [
    "{'a': 1, 'b': [1, 2.5, -3e-2], 'c': (1, 2), 'd': {0: 'x', 1: \"it's\"}, 'e': True, 'f': None, 'g': False}",
    "{'path': 'C:\\\\data\\\\coco.yaml', 'tab': 'a\\tb', 'u': 'caf\\xe9 \\u2603'}",
    "[]",
]


def test_python_literals_read_as_ast_literal_eval_reads_them():
    import ast

    script = """
    const {pythonLiteral} = await import(%s);
    const out = req.map((text) => { try { return pythonLiteral(text); } catch (e) { return {error: e.message}; } });
    process.stdout.write(JSON.stringify(out));
    """ % js_url(JS / "runtime/tflite-file.js")
    bad = ["{'a': 1", "{'a' 1}", "{'a': print(1)}", "{'a': 1} extra"]
    got = run_node(script, PYTHON_LITERALS + bad)
    for text, value in zip(PYTHON_LITERALS, got):
        assert value == json.loads(json.dumps(ast.literal_eval(text))), text
    assert all("error" in value for value in got[len(PYTHON_LITERALS):]), got


ONNX_READ = """
const {onnxModel} = await import(%s);
process.stdout.write(JSON.stringify(req.map((p) => {
  try { return onnxModel(new Uint8Array(readFileSync(p))); } catch (e) { return {error: e.message}; }
})));
""" % js_url(JS / "runtime/onnx-file.js")


def test_an_onnx_files_inputs_outputs_and_metadata_read_as_the_onnx_library_reads_them(tmp_path):
    import onnx

    meta = {"task": "detect", "imgsz": "[32, 32]", "names": "{0: 'a', 1: \"b's\"}", "args": "{'nms': False}"}
    paths = [tiny_onnx(tmp_path / "fixed.onnx", meta), tiny_onnx(tmp_path / "dynamic.onnx", meta, dynamic=True),
             tiny_onnx(tmp_path / "custom.onnx", meta, op_domain="example.custom")]
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(paths[0].read_bytes()[:40])
    got = run_node(ONNX_READ, [str(p) for p in [*paths, truncated]])
    for path, mine in zip(paths, got):
        model = onnx.load(str(path))
        assert mine["metadata"] == {p.key: p.value for p in model.metadata_props}
        for values, theirs in ((mine["inputs"], model.graph.input), (mine["outputs"], model.graph.output)):
            assert [v["name"] for v in values] == [t.name for t in theirs]
            assert [v["shape"] for v in values] == [[d.dim_value or d.dim_param for d in t.type.tensor_type.shape.dim]
                                                    for t in theirs]
            assert all(v["dtype"] == "float32" for v in values)
        assert mine["opsets"] == {o.domain: o.version for o in model.opset_import}
    assert "could not be read as an ONNX model" in got[-1]["error"]


def test_onnx_files_make_their_manifest_or_say_why_not(tmp_path):
    meta = {"task": "pose", "imgsz": "[32, 32]", "names": "{0: 'person'}", "kpt_shape": "[17, 3]",
            "args": "{'nms': True, 'half': False}", "end2end": "False", "channels": "3",
            "description": "Ultralytics YOLO11n-pose model trained on coco-pose.yaml"}
    cases = [
        {"path": tiny_onnx(tmp_path / "pose.onnx", meta, dynamic=True), "name": "pose.onnx", "page": "detect"},
        {"path": tiny_onnx(tmp_path / "bare.onnx", {}), "name": "bare.onnx", "page": "detect"},
        {"path": tiny_onnx(tmp_path / "big.onnx", {**meta, "imgsz": "[64, 64]"}), "name": "big.onnx", "page": "detect"},
        {"path": tiny_onnx(tmp_path / "cls.onnx", {**meta, "task": "classify"}), "name": "cls.onnx", "page": "detect"},
    ]
    pose, bare, big, cls = read(cases)
    manifest = pose["manifest"]
    assert manifest["onnx"]["model"]["url"] == "blob:x" and manifest["graph"] == "ultralytics-onnx"
    assert manifest["answer_reference"] == "onnx-wasm" and manifest["kpt_shape"] == [17, 3]
    assert manifest["file_io"]["input"] == {"name": "images", "shape": [1, 3, 32, 32], "dtype": "float32"}
    assert manifest["file_io"]["units"] == "pixels" and manifest["file_io"]["end2end"] is True
    assert manifest["nms"]["where"] == "model" and manifest["title"] == "YOLO11n-pose (your file pose.onnx)"
    assert manifest["user"]["format"] == "ONNX (NCHW input, dynamic shapes), float32, NMS inside"
    assert "without Ultralytics metadata" in bare["error"]
    assert "not the [1, 3, 64, 64] its metadata's image size says" in big["error"]
    assert "open it on /classify" in cls["error"]
