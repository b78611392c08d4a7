"""The four MediaPipe Hands .tflite files, without installing mediapipe: mediapipe 0.10.21
has no wheel for CPython 3.13, so the converter reads the files out of that wheel fetched as
a file (``pip download``; any interpreter can fetch a cp311 wheel it could not install). An
installed mediapipe 0.10.21 is used as is. Either way each file must have the sha256 below
(what the built manifests have recorded since the converter was written), so every Python
version builds from the very same bytes and ``source.sha256`` stays the same."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from modelcontract.manifest import sha256_file

from ..errors import ConverterError
from .graphs import TFLITE_FILES

MEDIAPIPE_VERSION = "0.10.21"

# Where each file sits in the wheel (and under an installed mediapipe/), and its sha256.
MEMBERS = {
    "detector_full": "mediapipe/modules/palm_detection/palm_detection_full.tflite",
    "detector_lite": "mediapipe/modules/palm_detection/palm_detection_lite.tflite",
    "landmark_full": "mediapipe/modules/hand_landmark/hand_landmark_full.tflite",
    "landmark_lite": "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
}
SHA256 = {
    "detector_full": "1b14e9422c6ad006cde6581a46c8b90dd573c07ab7f3934b5589e7cea3f89a54",
    "detector_lite": "e9a4aaddf90dda56a87235303cf00e4c2d3fb28725f68fd88772997dac905c18",
    "landmark_full": "11c272b891e1a99ab034208e23937a8008388cf11ed2a9d776ed3d01d0ba00e3",
    "landmark_lite": "048edd3645c9bf7397d19a9f6e3a42957d6e414c9bea6598030a2e9b624156e6",
}

# One wheel on every machine: the cp311 manylinux x86_64 build (PyPI has no Linux aarch64
# build of 0.10.21). The .tflite files are data, read from the zip, never run from it.
PIP_DOWNLOAD = ["download", "--disable-pip-version-check", "--no-deps", "--only-binary=:all:",
                "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
                "--platform", "manylinux_2_28_x86_64", f"mediapipe=={MEDIAPIPE_VERSION}"]

WEIGHTS_FIX = "or pass --weights FOLDER holding " + ", ".join(TFLITE_FILES.values())


def installed_files() -> dict[str, Path] | None:
    """An installed mediapipe 0.10.21's files (found, not imported); None when there is none."""
    try:
        if metadata.version("mediapipe") != MEDIAPIPE_VERSION:
            return None
    except metadata.PackageNotFoundError:
        return None
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or spec.origin is None:
        return None
    root = Path(spec.origin).parent.parent
    files = {key: root / member for key, member in MEMBERS.items()}
    return files if all(p.is_file() for p in files.values()) else None


def cached_files(cache: Path) -> dict[str, Path]:
    """The files in ``cache``/mediapipe-0.10.21-hands/, read out of the fetched wheel once."""
    folder = cache / f"mediapipe-{MEDIAPIPE_VERSION}-hands"
    files = {key: folder / TFLITE_FILES[key] for key in MEMBERS}
    if all(p.is_file() and sha256_file(p) == SHA256[key] for key, p in files.items()):
        return files
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mediapipe-wheel-", dir=cache) as tmp:
        proc = subprocess.run([sys.executable, "-m", "pip", *PIP_DOWNLOAD, "-d", tmp],
                              capture_output=True, text=True, timeout=900)
        wheels = sorted(Path(tmp).glob("mediapipe-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no wheel"])[-1]
            raise ConverterError(f"could not fetch the mediapipe {MEDIAPIPE_VERSION} wheel, which holds the "
                                 f"MediaPipe Hands .tflite files (pip: {last})",
                                 f"connect to PyPI (or an index that has mediapipe=={MEDIAPIPE_VERSION}) and rerun, "
                                 + WEIGHTS_FIX)
        with zipfile.ZipFile(wheels[0]) as wheel:
            for key, member in MEMBERS.items():
                # Written beside the target, then renamed: parallel builds never read half a file.
                part = files[key].with_name(f"{files[key].name}.{os.getpid()}.part")
                part.write_bytes(wheel.read(member))
                os.replace(part, files[key])
    return files


def check(files: dict[str, Path], digests: dict[str, str], where: str, fix: str) -> None:
    """Each file's sha256 must be mediapipe 0.10.21's: the bytes every build starts from."""
    for key, path in files.items():
        if digests[key] != SHA256[key]:
            raise ConverterError(f"{path} ({where}) has sha256 {digests[key][:16]}..., not mediapipe "
                                 f"{MEDIAPIPE_VERSION}'s {key} ({SHA256[key][:16]}...)", fix)


def default_files(cache: Path) -> tuple[dict[str, Path], dict[str, str], str]:
    """The four files, their sha256s (checked) and where they came from."""
    files = installed_files()
    if files is not None:
        where, fix = (f"the installed mediapipe {MEDIAPIPE_VERSION}",
                      f"reinstall mediapipe=={MEDIAPIPE_VERSION}, or uninstall it (its wheel is then fetched "
                      "as a file), " + WEIGHTS_FIX)
    else:
        files = cached_files(cache)
        # A cached file that differs was fetched again above: the wheel itself is not PyPI's.
        where, fix = (f"read from the mediapipe {MEDIAPIPE_VERSION} wheel pip fetched",
                      f"let pip fetch PyPI's mediapipe=={MEDIAPIPE_VERSION} wheel (see `pip config list`), "
                      + WEIGHTS_FIX)
    digests = {key: sha256_file(path) for key, path in files.items()}
    check(files, digests, where, fix)
    return files, digests, where
