"""The shared conversion pipeline and CLI: atomic install, idempotence, errors (exit 2).
(Install atomicity under a crash: tests/convert/test_manifest_schema.py.)"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import converters
from converters import __main__ as cli
from converters import pipeline
from modelcontract import manifest
from tests.fixtures import fake_family

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def fake(monkeypatch):
    monkeypatch.setitem(converters.FAMILIES, "fake", "tests.fixtures.fake_family")
    monkeypatch.setattr(fake_family, "FAIL_AT_BUILD", False)
    return fake_family


def test_build_writes_model_and_manifest(fake, tmp_path):
    target = pipeline.convert("fake", out=tmp_path)
    assert target == tmp_path / "fake"
    data = manifest.read(target)
    assert data["id"] == "fake" and data["task"] == "classify" and data["quantization"] == "none"
    assert data["source"]["sha256"] == "random-v1"
    assert set(data["files"]) >= {"tfjs/model.json"}
    assert data["files"]["tfjs/model.json"] == (target / "tfjs" / "model.json").stat().st_size
    assert [s["step"] for s in data["steps"]] == ["trace/convert"]
    # The installed build is the only one kept: no temp folder or previous build left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == [".builds", "fake"]
    assert list((tmp_path / ".builds").iterdir()) == [target.resolve()]


def test_quantised_variant_sits_beside(fake, tmp_path):
    target = pipeline.convert("fake", out=tmp_path, quantize="float16")
    assert target.name == "fake-float16"
    assert manifest.read(target)["quantization"] == "float16"


def test_unchanged_source_is_skipped_and_force_rebuilds(fake, tmp_path, capsys):
    first = manifest.read(pipeline.convert("fake", out=tmp_path))
    pipeline.convert("fake", out=tmp_path)
    assert "up to date" in capsys.readouterr().out
    assert manifest.read(tmp_path / "fake")["created"] == first["created"]
    pipeline.convert("fake", out=tmp_path, force=True)
    assert "installed" in capsys.readouterr().out


def test_an_invalid_installed_manifest_is_rebuilt(fake, tmp_path, capsys):
    """The up-to-date check reads with the one validated reader: a manifest that breaks the
    schema (same source and options) is no reason to skip the build."""
    target = pipeline.convert("fake", out=tmp_path)
    edit = manifest.read(target)
    edit["files"] = "broken"
    (target / manifest.MANIFEST).write_text(json.dumps(edit))
    assert pipeline.installed_manifest(target) is None
    capsys.readouterr()
    pipeline.convert("fake", out=tmp_path)
    assert "installed" in capsys.readouterr().out and manifest.read(target)["files"] != "broken"


def test_failed_build_keeps_previous_model(fake, tmp_path, monkeypatch):
    pipeline.convert("fake", out=tmp_path)
    before = (tmp_path / "fake" / "manifest.json").read_text()
    monkeypatch.setattr(fake_family, "FAIL_AT_BUILD", True)
    with pytest.raises(RuntimeError):
        pipeline.convert("fake", out=tmp_path, force=True)
    assert (tmp_path / "fake" / "manifest.json").read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [".builds", "fake"]
    assert list((tmp_path / ".builds").iterdir()) == [(tmp_path / "fake").resolve()]


def test_failed_first_build_installs_nothing(fake, tmp_path, monkeypatch):
    monkeypatch.setattr(fake_family, "FAIL_AT_BUILD", True)
    with pytest.raises(RuntimeError):
        pipeline.convert("fake", out=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cli_unknown_name_lists_valid_ones(capsys):
    assert cli.main(["nope"]) == 2
    err = capsys.readouterr().err
    assert "unknown model 'nope'" in err and "yolov5n" in err and "handpose" in err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1


def test_cli_missing_weights_file_is_exit_2(fake, tmp_path, capsys):
    assert cli.main(["fake", "--weights", str(tmp_path / "missing.pt"), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: weights file not found") and "fix:" in err


def test_cli_all_refuses_weights(capsys):
    assert cli.main(["all", "--weights", "x.pt"]) == 2
    assert "--weights applies to one model" in capsys.readouterr().err


def test_cli_list_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "converters", "list"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0
    names = [line.split()[0] for line in result.stdout.splitlines()]
    assert names == list(converters.FAMILIES)


def test_id_names_the_build(fake, tmp_path):
    target = pipeline.convert("fake", out=tmp_path, model_id="mine")
    assert target == tmp_path / "mine" and manifest.read(target)["id"] == "mine"


def test_a_bad_id_is_refused_before_any_work(fake, tmp_path, capsys):
    assert cli.main(["fake", "--id", "../up", "--out", str(tmp_path)]) == 2
    assert "is not a model id" in capsys.readouterr().err and not list(tmp_path.iterdir())


def test_a_build_never_replaces_another_model_silently(fake, tmp_path, capsys):
    """Other weights under the same id, or another family's folder: refused, pointing at --id
    and --force; the installed model stays. --force replaces it."""
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    a.write_text("sha-a")
    b.write_text("sha-b")
    pipeline.convert("fake", weights=str(a), out=tmp_path / "models", model_id="net")
    assert cli.main(["fake", "--weights", str(b), "--id", "net", "--out", str(tmp_path / "models")]) == 2
    err = capsys.readouterr().err
    assert "holds a build of other weights" in err and "--id NAME" in err and "--force" in err
    assert manifest.read(tmp_path / "models" / "net")["source"]["sha256"] == "sha-a"
    pipeline.convert("fake", weights=str(b), out=tmp_path / "models", model_id="net", force=True)
    assert manifest.read(tmp_path / "models" / "net")["source"]["sha256"] == "sha-b"
    manifest_path = tmp_path / "models" / "net" / "manifest.json"
    data = json.loads(manifest_path.read_text())
    data["name"] = "yolov5n"
    manifest_path.write_text(json.dumps(data))
    with pytest.raises(converters.errors.ConverterError, match="holds a yolov5n model"):
        pipeline.convert("fake", weights=str(b), out=tmp_path / "models", model_id="net")
