"""manifest.json, the one description of a built model, read one way by converters, server,
tests and benches (the pages' reader is static/js/contract/manifest.js): its JSON Schema
(manifest.schema.json beside this file), the one version this code writes and reads,
validation with errors a person can act on, what a manifest names, and its model folder.

Reading:
    read(folder)        -> the folder's manifest, validated (OSError when there is none,
                           InvalidManifest when it is not valid)
    parse(text), validate(manifest), problems(manifest)

What a manifest names (a valid manifest's dict; a missing field reads as empty):
    server_parts(m)     -> part -> .tflite path the server loads; server_artifacts(m): the paths
    litert_artifacts(m) -> the ``litert`` record: part -> {"path", "bytes"} for LiteRT.js
    tfjs_bytes(m)       -> part -> bytes a browser downloads on TF.js; browser_bytes(m): all parts
    files_bytes(m, names)

Its folder:
    model_path(folder, name)      -> a listed file, safely inside the folder, or None
    sha256_file(path); file_sizes(folder), file_digests(folder): ``files``, ``files_sha256``
    verify_files(m, folder)       -> what is wrong with the files against those two records

The converters validate before they install (converters/pipeline.py) and record the files;
the server validates what it loads and verifies the files before it runs them
(server/manifests.py), so a bad or unknown-version manifest answers 503 for its model only.
"""
from __future__ import annotations

import functools
import hashlib
import json
import stat
from pathlib import Path, PurePosixPath

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("manifest.schema.json")
_SHOWN = 5  # problems named in a message; the count of the rest follows


# ---------------------------------------------------------------------------- reading

class InvalidManifest(ValueError):
    """A manifest that is not JSON, has an unknown schema_version, or breaks the schema."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        super().__init__("; ".join(problems[:_SHOWN]) + more)


@functools.cache
def schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


@functools.cache
def _validator():
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema())
    return Draft202012Validator(schema())


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "the manifest"


def _readable(error) -> str:
    """One schema error as a sentence: where, and what (long values cut short)."""
    if error.validator == "required":
        missing = error.message.removesuffix(" is a required property")  # "'input'"
        return f"{_where(error.absolute_path)} has no {missing}"
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    return f"{_where(error.absolute_path)}: {message}"


def version_problem(manifest) -> str | None:
    """An unknown schema_version says so alone: the rest of such a manifest follows another schema."""
    if not isinstance(manifest, dict):
        return f"the manifest must be a JSON object, not {type(manifest).__name__}"
    version = manifest.get("schema_version")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        found = "no schema_version" if version is None else f"schema_version {version!r}"
        return (f"{found}: this code reads schema_version {SCHEMA_VERSION} only "
                "(rebuild the model with this checkout's converters)")
    return None


def problems(manifest) -> list[str]:
    """What is wrong with a manifest (empty: nothing)."""
    problem = version_problem(manifest)
    if problem:
        return [problem]
    return [_readable(e) for e in _validator().iter_errors(manifest)]


def validate(manifest) -> dict:
    found = problems(manifest)
    if found:
        raise InvalidManifest(found)
    return manifest


def parse(text: str) -> dict:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InvalidManifest([f"{MANIFEST} is not valid JSON: {exc}"]) from None
    return validate(data)


def read(folder) -> dict:
    """The folder's manifest, validated; OSError when it can't be read."""
    return parse((Path(folder) / MANIFEST).read_text())


# ---------------------------------------------------------------------------- what it names

def server_parts(manifest: dict) -> dict[str, str]:
    """The .tflite files the server loads, part -> path in the model folder: "model" for a
    one-graph model (``server.model``), else ``server.models``' keys (handpose's detector_full...)."""
    server = manifest.get("server") or {}
    models = server.get("models")
    parts = dict(models) if isinstance(models, dict) else {}
    if server.get("model"):
        parts["model"] = server["model"]
    return parts


def server_artifacts(manifest: dict) -> list[str]:
    """The paths of the files the server loads."""
    return list(server_parts(manifest).values())


def litert_artifacts(manifest: dict) -> dict:
    """The ``litert`` record: the .tflite files the browser can run with LiteRT.js (the
    server's very files), part -> {"path", "bytes"}, for the parts whose file is listed."""
    files = manifest.get("files") or {}
    return {part: {"path": path, "bytes": files.get(path)}
            for part, path in server_parts(manifest).items() if path in files}


def files_bytes(manifest: dict, names) -> int:
    """The recorded sizes of ``names`` added up (a name the manifest does not list: 0)."""
    files = manifest.get("files") or {}
    return sum(int(files.get(name) or 0) for name in names)


def _folder_of(path: str) -> str:
    return path.rsplit("/", 1)[0] + "/"


def tfjs_bytes(manifest: dict) -> dict[str, int]:
    """What a browser downloads for each TF.js part: the files of its graph's folder."""
    files = manifest.get("files") or {}
    return {part: sum(size for name, size in files.items() if name.startswith(_folder_of(path)))
            for part, path in (manifest.get("tfjs") or {}).items()}


def browser_bytes(manifest: dict) -> int:
    """What a browser downloads for the whole model on TF.js: the files of every graph folder
    (a folder two parts share, once)."""
    folders = {_folder_of(path) for path in (manifest.get("tfjs") or {}).values()}
    return sum(size for name, size in (manifest.get("files") or {}).items()
               if any(name.startswith(folder) for folder in folders))


# ---------------------------------------------------------------------------- its folder

def model_path(folder, relative: str) -> Path | None:
    """The regular file ``relative`` (a manifest's name) inside ``folder``, or None: no
    absolute or ``..`` paths, no symlink that leads out of the folder (the folder itself may
    be a link), nothing but a regular file."""
    if not isinstance(relative, str) or not relative or "\\" in relative or "\x00" in relative:
        return None
    parts = PurePosixPath(relative).parts
    if PurePosixPath(relative).is_absolute() or any(p in (".", "..") for p in parts):
        return None
    try:
        base = Path(folder).resolve(strict=True)
        path = (base / relative).resolve(strict=True)
        mode = path.stat().st_mode
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    if base not in path.parents or not stat.S_ISREG(mode):
        return None
    return path


def sha256_file(path) -> str:
    """A file's sha256, hex: what ``files_sha256`` records and ``verify_files`` compares."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_sizes(folder) -> dict[str, int]:
    """``files``: relative path -> bytes of every file in a model folder (manifest excluded)."""
    folder = Path(folder)
    return {p.relative_to(folder).as_posix(): p.stat().st_size
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MANIFEST}


def file_digests(folder) -> dict[str, str]:
    """``files_sha256``: relative path -> sha256 of the same files as ``file_sizes``."""
    return {name: sha256_file(Path(folder) / name) for name in file_sizes(folder)}


def verify_files(manifest: dict, folder, sha256=sha256_file) -> list[str]:
    """What is wrong with a model's files (empty: nothing). Every file the manifest lists
    must be a regular file inside the folder, of the recorded size and, where the manifest
    records it (``files_sha256``, converters since this check), of the recorded sha256.
    Manifests older than ``files_sha256`` are checked by size only (docs/server.md
    "Readiness and broken models"). ``sha256(path)``: how a file is hashed (the server
    passes its cache)."""
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return ["the manifest lists no files"]
    digests = manifest.get("files_sha256")
    found = [f"{name}: the server loads it but the manifest does not list it"
             for name in server_artifacts(manifest) if name not in files]
    for name, size in files.items():
        path = model_path(folder, name)
        if path is None:
            found.append(f"{name}: missing, not a regular file, or outside the model folder")
            continue
        actual = path.stat().st_size
        if actual != size:
            found.append(f"{name}: {actual} bytes, the manifest says {size}")
        elif isinstance(digests, dict):
            if name not in digests:
                found.append(f"{name}: no sha256 in the manifest")
            elif sha256(path) != digests[name]:
                found.append(f"{name}: its sha256 differs from the manifest's")
    return found
