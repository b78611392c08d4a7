"""Where models and the converters' files live: the checkout's root and the folders the
converters and the server share, each with its environment variable.

The server's settings (server/settings.py) list the same variables in their one table, with
these defaults and this reading of a path; the converters, which must not import the server,
read them here.
"""
from __future__ import annotations

import calendar
import os
import re
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Folder -> (its environment variable, its default).
FOLDERS = {
    "models": ("DATARAILROAD_MODELS", ROOT / "models"),
    "cache": ("DATARAILROAD_CACHE", Path.home() / ".cache" / "datarailroad"),
    "shared": ("DATARAILROAD_SHARED", ROOT.parent / "shared"),
}


def read_path(text: str) -> Path:
    """A variable's path, as every setting reads one: ``~`` expanded, absolute."""
    return Path(text).expanduser().resolve()


def folder(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """The folder ``name`` ("models", "cache", "shared") in ``environ`` (default: os.environ);
    unset or empty: its default."""
    env, default = FOLDERS[name]
    text = (os.environ if environ is None else environ).get(env, "").strip()
    return read_path(text) if text else default


def models_dir() -> Path:
    """Installed models (DATARAILROAD_MODELS): the converters write them, the server serves them."""
    return folder("models")


def cache_dir() -> Path:
    """The converters' downloads (DATARAILROAD_CACHE)."""
    return folder("cache")


def shared_dir() -> Path:
    """Shared fixtures (DATARAILROAD_SHARED)."""
    return folder("shared")


# Every build gets a folder of its own, <models>/.builds/<id>-<UTC start>-<random>
# (converters/pipeline.py); <models>/<id> links to the installed one. The server reads the same
# names to tell which models are being built.
BUILDS = ".builds"
BUILD_STAMP = "%Y%m%dT%H%M%SZ"
_BUILD_FOLDER = re.compile(r"(.+)-(\d{8}T\d{6}Z)-[a-z0-9_]+")  # mkdtemp's suffix: [a-z0-9_]


def build_stamp(when: float | None = None) -> str:
    return time.strftime(BUILD_STAMP, time.gmtime(when))


def build_folder(name: str) -> tuple[str, float] | None:
    """A build folder's (model id, start in epoch seconds); None for another name."""
    match = _BUILD_FOLDER.fullmatch(name)
    if not match:
        return None
    return match[1], float(calendar.timegm(time.strptime(match[2], BUILD_STAMP)))
