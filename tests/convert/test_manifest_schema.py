"""manifest.json against its schema (modelcontract/manifest.schema.json), on write and on load;
the server's manifest registry (cached, refreshed when a folder changes); atomic installs."""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import converters
from converters import pipeline
from converters.errors import ConverterError
from modelcontract import manifest as contract
from server import create_app, manifests
from server.inference import registry
from tests.fixtures import fake_family
from tests.fixtures.manifests import minimal
from harness.models import edit_manifest, install_copy
from harness.photos import photo_bytes

JPEG = {"Content-Type": "image/jpeg"}


def copy_model(src: Path, models: Path, model_id: str, change=None) -> Path:
    """A copy of a built model under a new id; ``change(manifest)`` edits its manifest."""
    folder = install_copy(src, models, model_id)
    if change:
        edit_manifest(folder, change)
    return folder


def classify(client, model_id: str):
    return client.post(f"/api/v1/classify?model={model_id}", data=photo_bytes("bus.jpg"), headers=JPEG)


# ---------------------------------------------------------------------------- the schema

def test_every_built_manifest_validates(api_models, models_dir):
    """What the converters write today (each model the session built, and any other model
    built into the same folder or its variants: test_convert_* run earlier) matches the schema."""
    built = [*Path(models_dir).glob("*/manifest.json"), *Path(models_dir).glob(".variants/*/*/manifest.json")]
    folders = set(api_models.values()) | {p.parent for p in built}
    assert api_models and folders
    for folder in sorted(folders):
        data = json.loads((folder / "manifest.json").read_text())
        assert contract.problems(data) == [], folder.name


def test_schema_names_the_code_s_constants():
    from modelcontract.limits import MODEL_ID_PATTERN
    from server.inference import RUNNERS

    props = contract.schema()["properties"]
    assert props["id"]["pattern"] == f"^{MODEL_ID_PATTERN}$"
    assert props["schema_version"]["const"] == contract.SCHEMA_VERSION
    assert props["quantization"]["enum"] == list(converters.QUANTIZATIONS)
    assert set(props["task"]["enum"]) == set(RUNNERS)


@pytest.mark.parametrize("change, problem", [
    (lambda m: m.update(schema_version=2), "schema_version 2: this code reads schema_version 1 only"),
    (lambda m: m.pop("schema_version"), "no schema_version: this code reads schema_version 1 only"),
    (lambda m: m.pop("input"), "the manifest has no 'input'"),
    (lambda m: m["input"].update(shape=[1, 224, 224]), "input.shape: [1, 224, 224] is too short"),
    (lambda m: m["outputs"].update(format="boxes"), "outputs.format: 'boxes' is not one of"),
    (lambda m: m["files"].update({"a.bin": -1}), "files.a.bin: -1 is less than the minimum of 0"),
    (lambda m: m.update(licence="MIT"), "Additional properties are not allowed ('licence' was unexpected)"),
    (lambda m: m["source"].update(licence={"url": None}), "source.licence has no 'name'"),
    (lambda m: m.update(speed={"runtime": "litert", "threads": 2, "ms": 0, "runs": 5}),
     "speed.ms: 0 is less than or equal to the minimum of 0"),
])
def test_problems_say_where_and_what(change, problem):
    data = minimal()
    assert contract.problems(data) == []
    change(data)
    found = contract.problems(data)
    assert any(problem in p for p in found), found
    with pytest.raises(contract.InvalidManifest, match="schema_version|has no|:"):
        contract.validate(data)


def test_shared_fields_are_allowed():
    """source.licence, speed and agreement (common.md) validate when well formed."""
    data = minimal(source={"kind": "test", "sha256": "0" * 64,
                           "licence": {"name": "AGPL-3.0", "url": "https://www.gnu.org/licenses/agpl-3.0.html"}},
                   speed={"runtime": "litert", "threads": 2, "ms": 12.5, "runs": 20},
                   agreement={"reference": "yolov5n at 640 px", "photos": ["bus.jpg"], "reference_detections": 5,
                              "kept": 4, "fraction": 0.8, "rule": "IoU >= 0.5, same class"})
    assert contract.problems(data) == []


def test_not_json_is_invalid(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(contract.InvalidManifest, match="manifest.json is not valid JSON"):
        contract.read(tmp_path)


# ---------------------------------------------------------------------------- validate on write

@pytest.fixture()
def fake(monkeypatch):
    """The fake family with a build that writes one small file (no TensorFlow): fast installs."""
    monkeypatch.setitem(converters.FAMILIES, "fake", "tests.fixtures.fake_family")
    fields = {"title": "Fake", "input": {"shape": [1, 4, 4, 3], "resize": "stretch"},
              "outputs": {"format": "logits"}}

    def build(ctx):
        (ctx.workdir / "model.bin").write_bytes(os.urandom(16))
        return dict(fields)

    monkeypatch.setattr(fake_family, "build", build)
    return fields


def test_a_build_whose_manifest_breaks_the_schema_installs_nothing(fake, tmp_path):
    first = pipeline.convert("fake", out=tmp_path)
    before = (first / "manifest.json").read_text()
    fake["nms"] = {"iou": 2.0}  # out of range
    with pytest.raises(ConverterError, match=r"does not match manifest.schema.json: nms.iou: 2.0 is greater"):
        pipeline.convert("fake", out=tmp_path, force=True)
    assert (tmp_path / "fake" / "manifest.json").read_text() == before
    assert list((tmp_path / ".builds").iterdir()) == [first.resolve()]


# ---------------------------------------------------------------------------- validate on load

@pytest.fixture(scope="module")
def mixed(api_models, tmp_path_factory):
    """good: a valid copy; future: schema_version 2; no-input: breaks the schema; garbled:
    not JSON; misnamed: a valid manifest whose id is not its folder's."""
    src = api_models["efficientnet-lite0"]
    folder = tmp_path_factory.mktemp("schema-models")
    copy_model(src, folder, "good")
    copy_model(src, folder, "future", lambda m: m.update(schema_version=2))
    copy_model(src, folder, "no-input", lambda m: m.pop("input"))
    (copy_model(src, folder, "garbled") / "manifest.json").write_text('{"id": "garbled", ')
    copy_model(src, folder, "misnamed", lambda m: m.update(id="other"))
    return folder


BROKEN = {"future": "schema_version 2", "no-input": "has no 'input'", "garbled": "not valid JSON",
          "misnamed": "says id 'other'"}


@pytest.fixture(scope="module")
def mixed_client(mixed):
    return create_app({"MODELS_DIR": mixed, "TESTING": True}).test_client()


@pytest.mark.parametrize("model_id", sorted(BROKEN))
def test_invalid_manifest_is_503_for_its_model_only(mixed_client, model_id):
    response = classify(mixed_client, model_id)
    assert response.status_code == 503 and response.is_json
    error = response.get_json()["error"]
    assert error["code"] == "model_unavailable" and BROKEN[model_id] in error["message"], error
    for path in (f"/models/{model_id}/model.tflite", f"/api/v1/models/{model_id}"):  # files, card
        other = mixed_client.get(path)
        assert other.status_code == 503 and BROKEN[model_id] in other.get_json()["error"]["message"], path
    assert classify(mixed_client, "good").status_code == 200
    assert mixed_client.get("/api/v1/models/good").status_code == 200
    assert mixed_client.get("/models/good/manifest.json").status_code == 200


def test_invalid_manifests_are_listed_as_broken(mixed_client):
    ready = mixed_client.get("/readyz")
    assert ready.status_code == 503
    states = {m["id"]: m for m in ready.get_json()["models"]}
    assert states["good"]["status"] == "ready"
    listed = {m["id"]: m for m in mixed_client.get("/api/v1/models").get_json()["models"]}
    assert listed["good"]["task"] == "classify" and "status" not in listed["good"]
    for model_id, reason in BROKEN.items():
        for entry in (states[model_id], listed[model_id]):
            assert entry["status"] == "broken" and reason in entry["error"] and entry["task"] is None, entry
    # As the OpenAPI document describes the list.
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    doc = Resource.from_contents(mixed_client.get("/api/v1/openapi.json").get_json(), default_specification=DRAFT202012)
    Draft202012Validator({"$ref": "urn:openapi#/components/schemas/ModelList"},
                         registry=Registry().with_resource("urn:openapi", doc)).validate({"models": list(listed.values())})
    # The task's default is a model that can run.
    default = mixed_client.post("/api/v1/classify", data=photo_bytes("bus.jpg"), headers=JPEG)
    assert default.status_code == 200 and default.get_json()["model"] == "good"
    # The pages offer only models that can run.
    html = mixed_client.get("/classify").get_data(as_text=True)
    assert 'value="good"' in html and not any(f'value="{m}"' in html for m in BROKEN)


# ---------------------------------------------------------------------------- the registry

def test_registry_reads_a_manifest_once_and_again_when_it_changes(api_models, tmp_path, monkeypatch):
    copy_model(api_models["efficientnet-lite0"], tmp_path, "net")
    app = create_app({"MODELS_DIR": tmp_path, "TESTING": True})
    client = app.test_client()
    reads = []
    original = manifests.contract.read
    monkeypatch.setattr(manifests.contract, "read", lambda folder: reads.append(folder) or original(folder))
    for path in ("/", "/classify", "/api/v1/models", "/models/net/manifest.json"):
        assert client.get(path).status_code == 200, path
    assert len(reads) == 1
    edit_manifest(tmp_path / "net", lambda m: m.update(title="Net, rebuilt"))
    titles = [m["title"] for m in client.get("/api/v1/models").get_json()["models"]]
    assert titles == ["Net, rebuilt"] and len(reads) == 2


def test_rebuild_and_removal_are_seen_without_a_restart(api_models, tmp_path):
    """An install (the pipeline's symlink swap) and a removal, while the app keeps running."""
    src = api_models["efficientnet-lite0"]
    builds = tmp_path / pipeline.BUILDS
    builds.mkdir()
    first = copy_model(src, builds, "net", lambda m: m.update(title="first"))
    assert pipeline._install(first, tmp_path / "net") is None
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    assert classify(client, "net").status_code == 200
    assert [m["title"] for m in client.get("/api/v1/models").get_json()["models"]] == ["first"]

    second = copy_model(src, builds, "net-2", lambda m: m.update(id="net", title="second"))
    assert pipeline._install(second, tmp_path / "net") == first
    assert [m["title"] for m in client.get("/api/v1/models").get_json()["models"]] == ["second"]
    assert classify(client, "net").status_code == 200  # the runner follows the new build
    assert client.get("/readyz").get_json()["models"][0]["title"] == "second"

    (tmp_path / "net").unlink()
    assert client.get("/api/v1/models").get_json()["models"] == []
    assert classify(client, "net").status_code == 404
    assert client.get("/models/net/manifest.json").status_code == 404
    assert client.get("/readyz").status_code == 503
    assert "net" not in registry(client.application)._runners  # its interpreters are let go


# ---------------------------------------------------------------------------- atomic install

def _valid_at(target: Path) -> str | None:
    """The installed manifest's title, or None when there is no valid model at ``target``."""
    try:
        return contract.read(target)["title"]
    except (OSError, contract.InvalidManifest):
        return None


def test_install_is_atomic_at_every_filesystem_step(fake, tmp_path, monkeypatch):
    """Each rename the install makes leaves a valid model in place, old or new (the previous
    two-rename swap left none between its renames)."""
    fake["title"] = "old"
    pipeline.convert("fake", out=tmp_path)
    target = tmp_path / "fake"
    seen = []
    for name in ("rename", "replace"):
        real = getattr(os, name)

        def spy(src, dst, *args, _real=real, **kwargs):
            _real(src, dst, *args, **kwargs)
            seen.append(_valid_at(target))

        monkeypatch.setattr(os, name, spy)
    fake["title"] = "new"
    pipeline.convert("fake", out=tmp_path, force=True)
    assert seen == ["new"]  # one rename, straight from the old model to the new
    assert _valid_at(target) == "new"
    assert len(list((tmp_path / ".builds").iterdir())) == 1  # the old build is removed


class Crash(BaseException):
    """A process killed mid-install (not an Exception: nothing catches it on the way)."""


def test_a_crash_before_or_after_the_swap_leaves_a_model(fake, tmp_path, monkeypatch):
    fake["title"] = "old"
    pipeline.convert("fake", out=tmp_path)
    target = tmp_path / "fake"

    def crash(*args, **kwargs):
        raise Crash

    # Before the swap: the new build is written, the link not yet renamed over the old one.
    fake["title"] = "new"
    with monkeypatch.context() as m:
        m.setattr(os, "replace", crash)
        with pytest.raises(Crash):
            pipeline.convert("fake", out=tmp_path, force=True)
    assert _valid_at(target) == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".builds", "fake"]  # no stray link

    # After the swap, before the old build is removed: the new one serves, the old is litter.
    with monkeypatch.context() as m:
        m.setattr(pipeline.shutil, "rmtree", crash)
        with pytest.raises(Crash):
            pipeline.convert("fake", out=tmp_path, force=True)
    assert _valid_at(target) == "new"
    assert len(list((tmp_path / ".builds").iterdir())) == 2


def test_builds_a_killed_build_left_are_swept_a_day_later(fake, tmp_path):
    pipeline.convert("fake", out=tmp_path)
    builds = tmp_path / pipeline.BUILDS
    day_old = time.time() - pipeline.STALE_BUILD_SECONDS - 60
    killed, running, other = (builds / name for name in (
        "fake-20261101T000000Z-killed", "fake-20261203T000000Z-running", "fake-float16-20261101T000000Z-x"))
    for folder in (killed, running, other):
        folder.mkdir()
        (folder / "partial.bin").write_bytes(b"x")
    for folder in (killed, other):
        os.utime(folder, (day_old, day_old))
    target = pipeline.convert("fake", out=tmp_path, force=True)
    # Kept: the installed build, one still being written, another model's.
    assert sorted(p.name for p in builds.iterdir()) == sorted([target.resolve().name, running.name, other.name])


def test_unversioned_folder_is_moved_into_builds(fake, tmp_path):
    """A model installed as a plain folder (before versioned builds) is replaced by the link."""
    old = copy_model(Path(pipeline.convert("fake", out=tmp_path / "src")).resolve(), tmp_path, "fake")
    assert not old.is_symlink()
    fake["title"] = "new"
    target = pipeline.convert("fake", out=tmp_path, force=True)
    assert target.is_symlink() and _valid_at(target) == "new"
    assert [p.name for p in (tmp_path / ".builds").iterdir()] == [target.resolve().name]


def test_a_link_to_elsewhere_is_repointed_not_deleted(fake, tmp_path):
    elsewhere = pipeline.convert("fake", out=tmp_path / "elsewhere")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "fake").symlink_to(elsewhere.resolve())
    target = pipeline.convert("fake", out=tmp_path / "models", force=True)
    assert target.resolve().parent == (tmp_path / "models" / ".builds").resolve()
    assert _valid_at(elsewhere) == "Fake"


def test_install_link_is_served_and_links_inside_a_build_still_refused(tmp_path):
    """/models/<id>/<file> follows the install symlink into .builds, but a symlink inside
    the build that leads out of it stays refused."""
    build = tmp_path / pipeline.BUILDS / "net-1"
    (build / "tfjs").mkdir(parents=True)
    (build / "tfjs" / "model.json").write_text("{}")
    (tmp_path / "secret.txt").write_text("secret")
    (build / "leak.bin").symlink_to(tmp_path / "secret.txt")
    (build / "manifest.json").write_text(json.dumps(minimal(id="net", files={"tfjs/model.json": 2, "leak.bin": 6})))
    pipeline._install(build, tmp_path / "net")
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    assert client.get("/models/net/tfjs/model.json").get_data() == b"{}"
    leak = client.get("/models/net/leak.bin")
    assert leak.status_code == 404 and "no regular file" in leak.get_json()["error"]["message"]
    assert client.get(f"/models/{pipeline.BUILDS}/net-1/manifest.json").status_code == 404
