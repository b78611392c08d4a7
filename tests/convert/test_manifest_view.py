"""The one manifest view (modelcontract/manifest.py): what a manifest names (server files,
LiteRT parts, browser bytes) and its folder (files, digests, verification), the same for the
converters that record them and the server that checks them. Built models: last test."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelcontract import manifest as contract
from server import cards, manifests
from tests.fixtures.manifests import minimal

ONE = minimal(tfjs={"model": "tfjs/model.json"}, server={"runtime": "litert", "model": "model.tflite"},
              files={"tfjs/model.json": 10, "tfjs/group1-shard1of1.bin": 90, "model.tflite": 300})
PARTS = minimal(
    tfjs={"detector": "tfjs/detector/model.json", "landmark": "tfjs/landmark/model.json"},
    server={"runtime": "litert", "models": {"detector": "tflite/palm.tflite", "landmark": "tflite/hand.tflite"}},
    files={"tfjs/detector/model.json": 1, "tfjs/detector/a.bin": 4, "tfjs/landmark/model.json": 2,
           "tfjs/landmark/b.bin": 8, "tflite/palm.tflite": 16, "tflite/hand.tflite": 32})


def test_server_files_and_litert_parts():
    assert contract.server_parts(ONE) == {"model": "model.tflite"}
    assert contract.server_artifacts(ONE) == ["model.tflite"]
    assert contract.litert_artifacts(ONE) == {"model": {"path": "model.tflite", "bytes": 300}}
    assert contract.server_artifacts(PARTS) == ["tflite/palm.tflite", "tflite/hand.tflite"]
    assert contract.litert_artifacts(PARTS) == {"detector": {"path": "tflite/palm.tflite", "bytes": 16},
                                               "landmark": {"path": "tflite/hand.tflite", "bytes": 32}}
    browser_only = minimal()
    assert contract.server_artifacts(browser_only) == [] and contract.litert_artifacts(browser_only) == {}
    unlisted = minimal(server={"runtime": "litert", "model": "model.tflite"})  # not in files: no LiteRT part
    assert contract.server_artifacts(unlisted) == ["model.tflite"] and contract.litert_artifacts(unlisted) == {}


def test_browser_bytes_per_part_and_in_all():
    assert contract.tfjs_bytes(ONE) == {"model": 100} and contract.browser_bytes(ONE) == 100
    assert contract.tfjs_bytes(PARTS) == {"detector": 5, "landmark": 10} and contract.browser_bytes(PARTS) == 15
    assert contract.files_bytes(PARTS, contract.server_artifacts(PARTS)) == 48
    assert contract.files_bytes(PARTS, ["nope", None]) == 0
    assert contract.browser_bytes({"id": "bare"}) == 0 == contract.files_bytes({"id": "bare"}, ["x"])
    # What the summary and the model card show are these.
    assert manifests.summary(PARTS)["bytes"] == 15
    assert cards.sizes_of({**PARTS, "litert": contract.litert_artifacts(PARTS)}) == {
        "browser": {"tfjs_bytes": 15, "tflite_bytes": 48}, "server": {"tflite_bytes": 48}}


def rewrite(path: Path, data: bytes) -> None:
    """New bytes in a new file, as a rebuild writes them (a new inode: the server's digest
    cache must not depend on the clock's granularity)."""
    path.with_name(path.name + ".new").write_bytes(data)
    path.with_name(path.name + ".new").replace(path)


@pytest.fixture()
def folder(tmp_path):
    """A model folder whose manifest records every file's size and sha256, as a build does."""
    (tmp_path / "tfjs").mkdir()
    (tmp_path / "tfjs" / "model.json").write_text("{}")
    (tmp_path / "model.tflite").write_bytes(b"tflite bytes")
    data = minimal(server={"runtime": "litert", "model": "model.tflite"},
                   files=contract.file_sizes(tmp_path), files_sha256=contract.file_digests(tmp_path))
    (tmp_path / contract.MANIFEST).write_text(json.dumps(data))
    return tmp_path


def test_recorded_files_are_every_file_but_the_manifest(folder):
    assert contract.file_sizes(folder) == {"model.tflite": 12, "tfjs/model.json": 2}
    digests = contract.file_digests(folder)
    assert set(digests) == {"model.tflite", "tfjs/model.json"}
    assert digests["model.tflite"] == contract.sha256_file(folder / "model.tflite")
    assert contract.sha256_file(folder / "tfjs" / "model.json") == (
        "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")  # sha256 of "{}"


def test_verify_files(folder):
    data = contract.read(folder)
    assert contract.verify_files(data, folder) == [] == manifests.verify_files(data, folder)
    rewrite(folder / "model.tflite", b"tflite BYTES")  # same size, other bytes
    assert contract.verify_files(data, folder) == ["model.tflite: its sha256 differs from the manifest's"]
    assert manifests.verify_files(data, folder) == ["model.tflite: its sha256 differs from the manifest's"]
    (folder / "model.tflite").write_bytes(b"short")
    assert contract.verify_files(data, folder) == ["model.tflite: 5 bytes, the manifest says 12"]
    (folder / "model.tflite").unlink()
    assert contract.verify_files(data, folder) == [
        "model.tflite: missing, not a regular file, or outside the model folder"]
    # An old manifest (no files_sha256) is checked by size; a missing digest is named.
    (folder / "model.tflite").write_bytes(b"tflite BYTES")
    assert contract.verify_files({**data, "files_sha256": None}, folder) == []
    digests = {"tfjs/model.json": data["files_sha256"]["tfjs/model.json"]}
    assert contract.verify_files({**data, "files_sha256": digests}, folder) == ["model.tflite: no sha256 in the manifest"]
    files = {"tfjs/model.json": 2}
    assert contract.verify_files({**data, "files": files, "files_sha256": digests}, folder) == [
        "model.tflite: the server loads it but the manifest does not list it"]
    assert contract.verify_files({**data, "files": {}}, folder) == ["the manifest lists no files"]


def test_server_hashes_each_file_version_once(folder, monkeypatch):
    hashed = []
    real = contract.sha256_file
    monkeypatch.setattr(contract, "sha256_file", lambda path: hashed.append(Path(path).name) or real(path))
    data = contract.read(folder)
    for _ in range(3):
        assert manifests.verify_files(data, folder) == []
    assert sorted(hashed) == ["model.json", "model.tflite"]
    rewrite(folder / "model.tflite", b"tflite BYTES")  # a new version of the file: hashed again
    assert manifests.verify_files(data, folder) == ["model.tflite: its sha256 differs from the manifest's"]
    assert sorted(hashed) == ["model.json", "model.tflite", "model.tflite"]


def test_one_reader_validated(folder):
    assert contract.read(folder)["id"] == "demo-net"
    (folder / contract.MANIFEST).write_text(json.dumps(minimal(schema_version=99)))
    with pytest.raises(contract.InvalidManifest, match="schema_version 99"):
        contract.read(folder)
    with pytest.raises(OSError):
        contract.read(folder / "nowhere")


def test_built_models_agree_with_the_view(api_models):
    """Each built model: its files verify, its ``litert`` record is the view's, and handpose's
    recorded per-part TF.js bytes are what the view counts from its files."""
    for model_id, folder in api_models.items():
        data = contract.read(folder)
        assert contract.verify_files(data, folder) == [], model_id
        assert data["litert"] == contract.litert_artifacts(data), model_id
        assert contract.browser_bytes(data) == sum(contract.tfjs_bytes(data).values()) > 0, model_id
        if "tfjs_bytes" in data:
            assert data["tfjs_bytes"] == contract.tfjs_bytes(data), model_id
