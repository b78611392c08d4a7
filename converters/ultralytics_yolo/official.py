"""The official Ultralytics checkpoints, found by name: yolo11n.pt, yolo26n.pt, yolo11n-seg.pt,
yolo11n-pose.pt, yolo26n-obb.pt.

``resolve(name)`` looks in the shared folder's models/ (DATARAILROAD_SHARED, default ../shared),
then in the converters' download cache, then downloads the release file from Ultralytics'
assets, as ``YOLO(name)`` would. Whatever it finds must have the release file's sha256
(``CHECKPOINTS``); a file that differs is refused, naming both hashes. Offline with no local
copy it fails in one line naming both places.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from modelcontract.manifest import sha256_file
from modelcontract.paths import shared_dir

from .. import sources
from ..errors import ConverterError

# Ultralytics' assets release that holds every checkpoint below (YOLO26 came with v8.4.0);
# ultralytics.utils.downloads fetches them from the same place.
RELEASE = "https://github.com/ultralytics/assets/releases/download/v8.4.0/"
LICENCE = sources.licence("AGPL-3.0", "https://github.com/ultralytics/ultralytics/blob/main/LICENSE")


@dataclass(frozen=True)
class Checkpoint:
    task: str        # the Ultralytics task
    data: str        # what it was trained on
    sha256: str      # of the release file


# The release files' sha256, as pinned by projects that use them (../shared/models/README.md
# lists the same; tests/unit/test_official_checkpoints.py checks the two agree). The order is
# the order make run builds them in: one per task, the detector first.
CHECKPOINTS = {
    "yolo11n.pt": Checkpoint("detect", "COCO, 80 classes",
                             "0ebbc80d4a7680d14987a577cd21342b65ecfd94632bd9a8da63ae6417644ee1"),
    "yolo11n-seg.pt": Checkpoint("segment", "COCO, 80 classes",
                                 "55ed65c56c91713d23e8402371c6c49a6fd84f257f7dce452e8d70e41dcbe152"),
    "yolo11n-pose.pt": Checkpoint("pose", "COCO-pose: person, 17 keypoints",
                                  "869e83fcdffdc7371fa4e34cd8e51c838cc729571d1635e5141e3075e9319dc0"),
    "yolo26n-obb.pt": Checkpoint("obb", "DOTAv1, 15 classes",
                                 "6f51c78197aacda4a33be77294065a9001675fb893f56227a179731b53dbd2b0"),
    "yolo26n.pt": Checkpoint("detect", "COCO, 80 classes",
                             "9b09cc8bf347f0fc8a5f7657480587f25db09b34bf33b0652110fb03a8ad4fef"),
}
KIND = "official Ultralytics checkpoint"


class Unavailable(ConverterError):
    """No copy here and no download: ``make models`` skips the checkpoint with this line."""


def url(name: str) -> str:
    return RELEASE + name


def shared_path(name: str) -> Path:
    return shared_dir() / "models" / name


def is_official_name(weights: str) -> bool:
    """A bare official file name (no folder), as ``YOLO("yolo11n.pt")`` takes it."""
    return weights in CHECKPOINTS


def describe(path: Path, name: str, sha256: str) -> sources.Source:
    """The Source of a file known to be the release file ``name``."""
    checkpoint = CHECKPOINTS[name]
    return sources.Source(kind=KIND, path=path.resolve(), url=url(name), sha256=sha256, licence=LICENCE,
                          extra={"checkpoint": name, "trained_on": checkpoint.data})


def matching(path: Path, sha256: str) -> sources.Source | None:
    """``path`` as an official checkpoint when its bytes are one (any file name), else None."""
    for name, checkpoint in CHECKPOINTS.items():
        if checkpoint.sha256 == sha256:
            return describe(path, name, sha256)
    return None


def checked(path: Path, name: str) -> sources.Source:
    """``path``, which should hold the release file ``name``: refused when its bytes differ."""
    got = sha256_file(path)
    want = CHECKPOINTS[name].sha256
    if got != want:
        raise ConverterError(f"{path} is not the official {name}: its sha256 is {got}, the release file's is {want}",
                             f"remove it and fetch {name} again from {url(name)}, or pass your own "
                             "checkpoint by its path with --weights PATH --id NAME")
    return describe(path, name, got)


def resolve(name: str) -> sources.Source:
    """The release file ``name``: the shared folder's copy, else the cache's, else downloaded."""
    for place in (shared_path(name), sources.CACHE / name):
        if place.is_file():
            return checked(place, name)
    try:
        downloaded = sources.download(url(name), name, KIND)
    except ConverterError:
        raise Unavailable(f"{name} is not in {shared_path(name).parent} and this machine can't download it "
                             f"from {url(name)}",
                             f"put the file in {shared_path(name).parent} (or pass --weights PATH)") from None
    try:
        return checked(downloaded.path, name)
    except ConverterError:
        downloaded.path.unlink(missing_ok=True)  # not kept for the next run to trust
        raise
