"""The official Ultralytics checkpoints found by name (converters/ultralytics_yolo/official.py):
the sha256 table agrees with the shared folder's README, a file with other bytes is refused
naming both hashes, offline with no copy is one line naming both places, and `converters
official` skips what it can't have and says so, one line each."""
from __future__ import annotations

import re

import pytest

from converters import __main__ as cli
from converters import sources
from converters.errors import ConverterError
from converters.ultralytics_yolo import official
from harness.paths import SHARED

README = SHARED / "models" / "README.md"


@pytest.fixture()
def nowhere(tmp_path, monkeypatch):
    """An empty shared folder and cache, and a release URL on a closed loopback port."""
    monkeypatch.setenv("DATARAILROAD_SHARED", str(tmp_path / "shared"))
    monkeypatch.setattr(sources, "CACHE", tmp_path / "cache")
    monkeypatch.setattr(official, "RELEASE", "http://127.0.0.1:9/")
    return tmp_path


def test_the_table_is_the_shared_readme_s():
    if not README.is_file():
        pytest.skip(f"{README} is not here")
    rows = dict(re.findall(r"^\| (yolo\w+(?:-\w+)?\.pt) \|.*\| ([0-9a-f]{64}) \|", README.read_text(), re.M))
    assert rows == {name: c.sha256 for name, c in official.CHECKPOINTS.items()}


def test_one_checkpoint_of_each_task():
    tasks = [c.task for c in official.CHECKPOINTS.values()]
    assert {"detect", "segment", "pose", "obb"} <= set(tasks) and tasks[0] == "detect"


def test_other_bytes_under_an_official_name_are_refused(nowhere):
    fake = official.shared_path("yolo11n.pt")
    fake.parent.mkdir(parents=True)
    fake.write_bytes(b"not the release file")
    with pytest.raises(ConverterError) as caught:
        official.resolve("yolo11n.pt")
    got = sources.sha256_file(fake)
    assert got in caught.value.message and official.CHECKPOINTS["yolo11n.pt"].sha256 in caught.value.message


def test_offline_without_a_copy_is_one_line_naming_both_places(nowhere, capsys):
    assert cli.main(["yolo", "--weights", "yolo11n-pose.pt", "--out", str(nowhere / "models")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("error: yolo11n-pose.pt is not in ") and str(nowhere / "shared" / "models") in err[0]
    assert "http://127.0.0.1:9/yolo11n-pose.pt" in err[0]


def test_official_skips_what_it_cannot_have(nowhere, capsys):
    assert cli.main(["official", "--out", str(nowhere / "models")]) == 0
    skipped = [line for line in capsys.readouterr().err.splitlines() if line.startswith("[yolo] skipped ")]
    assert [line.split()[2].rstrip(":") for line in skipped] == list(official.CHECKPOINTS)
    assert not (nowhere / "models").exists() or not any((nowhere / "models").iterdir())
