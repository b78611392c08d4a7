"""Where source weights, real test photos and class names come from (all offline)."""
from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from modelcontract.manifest import sha256_file
from modelcontract.paths import cache_dir

from .errors import ConverterError

CACHE = cache_dir()  # DATARAILROAD_CACHE (modelcontract/paths.py)


@dataclass
class Source:
    """The weights a build starts from. ``path`` None means random weights (--weights none)."""
    kind: str
    path: Path | None = None
    url: str | None = None
    sha256: str | None = None
    extra: dict = field(default_factory=dict)
    licence: dict | None = None  # of the weights: {"name", "url"} (see licence() below)

    def describe(self) -> dict:
        out = {"kind": self.kind, "path": str(self.path) if self.path else None,
               "url": self.url, "sha256": self.sha256,
               "licence": self.licence or licence(UNKNOWN)}
        out.update(self.extra)
        return out


# Licence names the manifests use besides SPDX ids.
UNKNOWN = "unknown"
RANDOM_WEIGHTS = "none (random weights)"
GIVEN_BY_USER = "as given by the user"


def licence(name: str, url: str | None = None, **notes) -> dict:
    """``source.licence`` as manifests record it: {"name", "url"} plus optional notes."""
    return {"name": name, "url": url, **notes}


def random_weights(kind: str, seed: int, **extra) -> Source:
    """The source of a --weights none build: a seeded initialisation, no file, no licence."""
    return Source(kind=kind, sha256=f"random-seed{seed}", extra=extra, licence=licence(RANDOM_WEIGHTS))


def user_licence(kind: str) -> dict:
    """Weights the user passed: their licence is whatever the user got them under."""
    return licence(UNKNOWN, None, note=f"{kind} {GIVEN_BY_USER}; its licence is not recorded in the file")


def package_licence(dist: str) -> dict:
    """The licence an installed package states: its metadata's License-Expression or License
    field, else the first line of the LICENSE file in its dist-info ("UNKNOWN" counts as none)."""
    from importlib import metadata

    meta = metadata.metadata(dist)
    stated, where = None, None
    for key in ("License-Expression", "License"):
        value = (meta.get(key) or "").strip()
        if value and value.upper() != "UNKNOWN":
            stated, where = value, f"{key} metadata field"
            break
    if stated is None:
        text = metadata.distribution(dist).read_text("LICENSE") or ""
        stated = next((line.strip() for line in text.splitlines() if line.strip()), None)
        where = "LICENSE file in its dist-info (the License metadata field says UNKNOWN)"
    if stated is None:
        return licence(UNKNOWN, meta.get("Home-page"), stated_by=f"{dist} {meta['Version']}: nothing stated")
    spdx = "Apache-2.0" if "apache" in stated.lower() and "2.0" in stated else stated
    url = "https://www.apache.org/licenses/LICENSE-2.0" if spdx == "Apache-2.0" else meta.get("Home-page")
    return licence(spdx, url, stated=stated, stated_by=f"{dist} {meta['Version']}, {where}")


def local_weights(path: str, kind: str, suffixes: tuple[str, ...]) -> Source:
    p = Path(path).expanduser()
    if not p.is_file():
        raise ConverterError(f"weights file not found: {p}", "pass an existing file with --weights PATH")
    if suffixes and p.suffix.lower() not in suffixes:
        raise ConverterError(f"{p.name} is not a {kind} file (expected {'/'.join(suffixes)})",
                             f"pass a {kind} file with --weights PATH")
    return Source(kind=kind, path=p.resolve(), sha256=sha256_file(p))


def download(url: str, filename: str, kind: str, timeout: float = 30) -> Source:
    """Fetch ``url`` into the cache once; offline this fails with the --weights fix."""
    target = CACHE / filename
    if not target.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".part")
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as f:
                while chunk := response.read(1 << 20):
                    f.write(chunk)
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            partial.unlink(missing_ok=True)
            raise ConverterError(
                f"could not download {filename} from {url} ({exc.__class__.__name__}: {exc}); "
                "this machine looks offline",
                f"download it elsewhere and pass --weights /path/to/{filename}") from None
        partial.rename(target)
    return Source(kind=kind, path=target, url=url, sha256=sha256_file(target))


def _ultralytics_root() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("ultralytics")
    if spec is None or spec.origin is None:
        raise ConverterError("the ultralytics package is not installed", "pip install -r requirements.txt")
    return Path(spec.origin).parent


def photo_path(name: str = "bus.jpg") -> Path:
    """Real photos shipped in the ultralytics wheel (bus.jpg, zidane.jpg)."""
    return _ultralytics_root() / "assets" / name


def load_photo(name: str = "bus.jpg") -> np.ndarray:
    from PIL import Image

    with Image.open(photo_path(name)) as im:
        return np.asarray(im.convert("RGB"))


def _names_from_yaml(filename: str) -> list[str]:
    import yaml

    data = yaml.safe_load((_ultralytics_root() / "cfg" / "datasets" / filename).read_text())
    names = data["names"]
    return [names[i] for i in sorted(names)] if isinstance(names, dict) else list(names)


def coco_names() -> list[str]:
    return _names_from_yaml("coco.yaml")


def imagenet_names() -> list[str]:
    return _names_from_yaml("ImageNet.yaml")
