"""manifest.json: its JSON Schema (manifest.schema.json beside this file), the one version
this code writes and reads, and validation with errors a person can act on.

    validate(manifest)  -> the manifest, or InvalidManifest (every problem, readable)
    read(folder)        -> the folder's manifest, validated (OSError when there is none)

The converters validate before they install (converters/pipeline.py); the server validates
what it loads (server/manifests.py), so a bad or unknown-version manifest answers 503 for
its model only.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

MANIFEST = "manifest.json"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).with_name("manifest.schema.json")
_SHOWN = 5  # problems named in a message; the count of the rest follows


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
