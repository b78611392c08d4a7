"""A broken model is contained: files checked against the manifest's sizes and sha256, a
.tflite that crashes LiteRT found by a trial run in a child process, 503 for that model only,
/readyz per model; /models/<id>/<file> serves only regular files inside the model folder.
(The same against the real gunicorn server: tests/convert/test_server_hardening.py.)"""
from __future__ import annotations

import json

import pytest

from converters import pipeline
from modelcontract import manifest as contract
from server import create_app, manifests
from harness.models import edit_manifest, install_copy, truncate
from harness.photos import photo_bytes
from tests.fixtures.manifests import minimal

JPEG = {"Content-Type": "image/jpeg"}


@pytest.fixture(scope="module")
def models(api_models, tmp_path_factory):
    """good: a verified copy; truncated: model.tflite cut short (size and sha256 say so);
    crashing: the same cut file in a manifest written for it without sha256 (an old manifest),
    so only the trial run finds it (LiteRT 2.1 segfaulted on it, 2.3's flatbuffer check refuses
    it; tests/unit/test_litert_trial.py has a crash); tampered: one byte changed, same size; no-input: a
    manifest without 'input'."""
    src = api_models["efficientnet-lite0"]
    folder = tmp_path_factory.mktemp("integrity-models")
    install_copy(src, folder, "good")
    truncate(install_copy(src, folder, "truncated") / "model.tflite")
    crashing = install_copy(src, folder, "crashing", digests=False)
    size = truncate(crashing / "model.tflite")
    edit_manifest(crashing, lambda m: m["files"].update({"model.tflite": size}))
    tampered = install_copy(src, folder, "tampered")
    data = bytearray((tampered / "model.tflite").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (tampered / "model.tflite").write_bytes(bytes(data))
    edit_manifest(install_copy(src, folder, "no-input"), lambda m: m.pop("input"))
    return folder


@pytest.fixture(scope="module")
def client(models):
    return create_app({"MODELS_DIR": models, "TESTING": True}).test_client()


def classify(client, model_id: str):
    return client.post(f"/api/v1/classify?model={model_id}", data=photo_bytes("bus.jpg"), headers=JPEG)


@pytest.mark.parametrize("model_id, reason", [
    ("truncated", "bytes, the manifest says"),
    ("crashing", "LiteRT could not load or run it: ValueError: The model is not a valid Flatbuffer"),
    ("tampered", "model.tflite: its sha256 differs"),
    ("no-input", "no 'input'"),
])
def test_broken_model_is_503_for_itself_only(client, model_id, reason):
    for _ in range(2):  # the failure is remembered: the second answer comes from the cache
        response = classify(client, model_id)
        assert response.status_code == 503, response.get_data()
        error = response.get_json()["error"]
        assert error["code"] == "model_unavailable" and reason in error["message"], error
    assert classify(client, "good").status_code == 200


def test_default_model_skips_a_broken_one(models):
    """Without ?model=, the task's defaults are tried in order ("crashing" and "no-input" sort
    before "good"): a broken one installed beside a good one doesn't take the task down."""
    client = create_app({"MODELS_DIR": models, "TESTING": True}).test_client()
    for _ in range(2):
        response = client.post("/api/v1/classify", data=photo_bytes("bus.jpg"), headers=JPEG)
        assert response.status_code == 200, response.get_data()
        assert response.get_json()["model"] == "good"


def test_default_model_all_broken_is_503_naming_the_first(api_models, tmp_path):
    truncate(install_copy(api_models["efficientnet-lite0"], tmp_path, "only") / "model.tflite")
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    response = client.post("/api/v1/classify", data=photo_bytes("bus.jpg"), headers=JPEG)
    assert response.status_code == 503 and "'only'" in response.get_json()["error"]["message"]


def test_readyz_reports_each_model_and_is_not_ready_while_one_is_broken(client):
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.get_json()
    assert body["status"] == "not_ready" and "truncated" in body["reason"]
    states = {m["id"]: m for m in body["models"]}
    assert states["good"]["status"] == "ready" and states["good"]["verified"] == "sha256"
    assert states["crashing"]["verified"] == "size"
    for broken in ("truncated", "crashing", "tampered", "no-input"):
        assert states[broken]["status"] == "broken" and states[broken]["error"], broken
    assert response.headers["Cache-Control"] == "no-store"


def test_readyz_is_ready_with_good_models_only_and_not_without_models(api_models, tmp_path):
    empty = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client().get("/readyz")
    assert empty.status_code == 503 and "no model is installed" in empty.get_json()["reason"]
    install_copy(api_models["efficientnet-lite0"], tmp_path, "good")
    ready = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client().get("/readyz")
    assert ready.status_code == 200, ready.get_json()
    assert ready.get_json()["status"] == "ready" and ready.get_json()["tasks"] == ["classify"]


def test_rebuilt_model_is_checked_again(api_models, tmp_path):
    """A failure is remembered per version of the files: repairing them clears it."""
    src = api_models["efficientnet-lite0"]
    folder = install_copy(src, tmp_path, "repaired")
    good = (folder / "model.tflite").read_bytes()
    truncate(folder / "model.tflite")
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    assert classify(client, "repaired").status_code == 503
    (folder / "model.tflite").write_bytes(good)
    assert classify(client, "repaired").status_code == 200


def test_converters_record_size_and_sha256_of_every_file(monkeypatch, tmp_path):
    import converters
    from tests.fixtures import fake_family

    monkeypatch.setitem(converters.FAMILIES, "fake", "tests.fixtures.fake_family")
    monkeypatch.setattr(fake_family, "FAIL_AT_BUILD", False)
    target = pipeline.convert("fake", out=tmp_path)
    data = contract.read(target)
    assert set(data["files_sha256"]) == set(data["files"]) and data["files"]
    for name, digest in data["files_sha256"].items():
        assert digest == contract.sha256_file(target / name)
    assert manifests.verify_files(data, target) == []
    (target / name).write_bytes(b"x" * data["files"][name])  # same size, other bytes
    assert manifests.verify_files(data, target) == [f"{name}: its sha256 differs from the manifest's"]


# ---------------------------------------------------------------------------- /models/<id>/<file>

@pytest.fixture()
def listed(tmp_path):
    """A model whose manifest lists a '../' path and a symlink out of its folder."""
    models = tmp_path / "models"
    folder = models / "net"
    (folder / "tfjs").mkdir(parents=True)
    (folder / "tfjs" / "model.json").write_text("{}")
    (tmp_path / "outside.txt").write_text("secret")
    (models / "sibling.txt").write_text("secret")
    (folder / "link.bin").symlink_to(tmp_path / "outside.txt")
    (folder / "inner-link.json").symlink_to(folder / "tfjs" / "model.json")
    (folder / "tfjs" / "dir").mkdir()
    files = {"tfjs/model.json": 2, "../sibling.txt": 6, "tfjs/../../sibling.txt": 6, "link.bin": 6,
             "inner-link.json": 2, "tfjs/dir": 0, "/etc/hostname": 1}
    (folder / "manifest.json").write_text(json.dumps(minimal(id="net", files=files)))
    return create_app({"MODELS_DIR": models, "TESTING": True}).test_client()


@pytest.mark.parametrize("name", ["../sibling.txt", "tfjs/../../sibling.txt", "link.bin", "tfjs/dir"])
def test_model_files_outside_the_folder_are_404(listed, name):
    """Listed by the manifest, yet outside the folder or not a regular file."""
    response = listed.get(f"/models/net/{name}")
    assert response.status_code == 404 and response.is_json, name
    assert "no regular file" in response.get_json()["error"]["message"]


def test_model_files_inside_the_folder_are_served(listed):
    assert listed.get("/models/net/tfjs/model.json").get_data() == b"{}"
    assert listed.get("/models/net/inner-link.json").get_data() == b"{}"  # a link that stays inside
    assert listed.get("/models/net/manifest.json").status_code == 200


def test_model_path_rules(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "a.bin").write_bytes(b"1")
    (tmp_path / "x.bin").write_bytes(b"1")
    (tmp_path / "m" / "out").symlink_to(tmp_path / "x.bin")
    assert contract.model_path(tmp_path / "m", "a.bin") == (tmp_path / "m" / "a.bin").resolve()
    for name in ("../x.bin", "out", "/etc/passwd", "", ".", "a.bin/..", "nope.bin", "..\\x.bin"):
        assert contract.model_path(tmp_path / "m", name) is None, name
