"""Installed models: read and edit a manifest, install a copy under a new id, break a file,
check the manifest's measured speed, skip when a model is not built."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from harness.paths import YOLOV5N_WEIGHTS


def read_manifest(folder: Path) -> dict:
    return json.loads((Path(folder) / "manifest.json").read_text())


def edit_manifest(folder: Path, change) -> dict:
    """Apply ``change(manifest)`` in place and write it back."""
    data = read_manifest(folder)
    change(data)
    (Path(folder) / "manifest.json").write_text(json.dumps(data))
    return data


def install_copy(src: Path, models: Path, model_id: str, digests: bool = True) -> Path:
    """A copy of a built model under a new id, with files_sha256 (as the converters write it)
    or, with digests=False, without (an old manifest)."""
    from modelcontract import manifest as manifest_io

    folder = models / model_id
    shutil.copytree(src, folder)

    def rename(m):
        m["id"] = model_id
        if digests:
            m["files_sha256"] = manifest_io.file_digests(folder)
        else:
            m.pop("files_sha256", None)

    edit_manifest(folder, rename)
    return folder


def truncate(path: Path) -> int:
    """Cut a .tflite to half its size: LiteRT 2.1 segfaulted on such a file (issue 11); 2.3 checks
    the flatbuffer and refuses it."""
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    return len(data) // 2


def assert_speed_measured(folder: Path, factor: float = 4) -> None:
    """The manifest's ``speed`` is this file's native LiteRT time in ms: within ``factor`` of
    the fastest of a few runs of it now (a constant, a unit slip or another file's figure
    fails; load between the two measurements does not), and no slower than its median."""
    from converters import tflite

    m = read_manifest(folder)
    speed = m["speed"]
    assert speed["runtime"] == "litert" and speed["threads"] == 2 and speed["runs"] >= 5
    assert 0 < speed["ms"] <= speed["median_ms"]
    zeros = [np.zeros(m["input"]["shape"], np.float32)]  # the one float32 input of a detector or classifier
    now = min(tflite.call_ms(folder / m["server"]["model"], zeros, threads=speed["threads"], runs=5))
    assert now / factor < speed["ms"] < now * factor, (speed, now)


def need(models: dict, model_id: str) -> Path:
    """The folder of a model the session could build, else skip."""
    if model_id not in models:
        pytest.skip(f"{model_id} is not built here (yolov5n needs {YOLOV5N_WEIGHTS})")
    return models[model_id]
