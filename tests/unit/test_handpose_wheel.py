"""The handpose converter's source without mediapipe installed (converters/handpose/wheel.py):
the .tflite files read out of the wheel pip fetches, each checked against its sha256; a failed
fetch or a file that differs is a ConverterError with its fix. pip is stood in for: no network."""
from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import pytest

from converters.errors import ConverterError
from converters.handpose import wheel


def fake_pip(monkeypatch, members: dict[str, bytes] | None, stderr: str = "") -> list:
    """subprocess.run for `pip download`: writes a wheel holding ``members`` (None: fails)."""
    calls = []

    def run(cmd, **kwargs):
        calls.append(cmd)
        if members is None:
            return subprocess.CompletedProcess(cmd, 1, "", stderr)
        dest = Path(cmd[cmd.index("-d") + 1])
        with zipfile.ZipFile(dest / f"mediapipe-{wheel.MEDIAPIPE_VERSION}-cp311-cp311-x.whl", "w") as z:
            for name, data in members.items():
                z.writestr(name, data)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(wheel.subprocess, "run", run)
    monkeypatch.setattr(wheel, "installed_files", lambda: None)
    return calls


def test_a_failed_fetch_says_what_to_do(monkeypatch, tmp_path):
    fake_pip(monkeypatch, None, "ERROR: Could not find a version that satisfies the requirement\n"
                                "ERROR: No matching distribution found for mediapipe==0.10.21")
    with pytest.raises(ConverterError) as err:
        wheel.default_files(tmp_path)
    assert "No matching distribution found" in err.value.message
    assert "--weights FOLDER" in err.value.fix


def test_files_that_differ_from_mediapipe_0_10_21_are_refused(monkeypatch, tmp_path):
    calls = fake_pip(monkeypatch, {member: b"TFL3 not the real model" for member in wheel.MEMBERS.values()})
    with pytest.raises(ConverterError) as err:
        wheel.default_files(tmp_path)
    assert "sha256" in err.value.message and err.value.fix
    # the cp311 wheel whatever runs pip: one file, the same bytes, on every interpreter
    cmd = calls[0]
    assert cmd[cmd.index("--python-version") + 1] == "3.11" and "--only-binary=:all:" in cmd and "--no-deps" in cmd


def test_the_table_covers_the_four_models():
    assert set(wheel.MEMBERS) == set(wheel.SHA256) == set(wheel.TFLITE_FILES)
    assert all(member.endswith(wheel.TFLITE_FILES[key]) for key, member in wheel.MEMBERS.items())
