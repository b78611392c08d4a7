"""Python twin of static/js/contract/example_sets.js: named classes of recorded example vectors,
matched by k nearest neighbours, and the JSON file they are kept in (the pages export it;
the API takes it as a request's ``custom`` part). example_sets.js explains the rules."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable


class ExampleFileError(ValueError):
    """The file is not a valid set; the message says why."""


@dataclass(frozen=True)
class ExampleSets:
    format: str
    size: int
    limits: dict
    distance: Callable
    max_distance: float
    k: int
    noun: str

    @classmethod
    def of(cls, kind: dict, distance: Callable) -> ExampleSets:
        """A kind as twins.json writes it (its ``decimals`` and ``limits.warn_below`` are the
        page's alone) with its distance function."""
        return cls(format=kind["format"], size=kind["size"], limits=kind["limits"], distance=distance,
                   max_distance=float(kind["max_distance"]), k=kind["k"], noun=kind["noun"])

    def schema(self) -> dict:
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object", "required": ["format", "version", "classes"],
            "properties": {
                "format": {"const": self.format}, "version": {"const": 1},
                "classes": {"type": "array", "maxItems": self.limits["classes"], "items": {
                    "type": "object", "required": ["name", "examples"],
                    "properties": {
                        "name": {"type": "string", "minLength": 1, "maxLength": self.limits["name"],
                                 "pattern": r"^\S(.*\S)?$"},
                        "examples": {"type": "array", "minItems": 1, "maxItems": self.limits["examples"],
                                     "items": {"type": "array", "minItems": self.size, "maxItems": self.size,
                                               "items": {"type": "number"}}}}}},
            },
        }

    def match(self, vector, example_set: dict) -> dict | None:
        near = [(d, order, c["name"]) for order, c in enumerate(example_set["classes"]) for e in c["examples"]
                if (d := self.distance(vector, e)) <= self.max_distance]
        if not near:
            return None
        near.sort(key=lambda n: (n[0], n[1]))
        k = min(self.k, len(near))
        tally: dict[str, list] = {}   # name -> [votes, nearest]
        for d, _, name in near[:k]:
            tally.setdefault(name, [0, d])[0] += 1
        best = None
        for name, (votes, nearest) in tally.items():
            if best is None or votes > best[1] or (votes == best[1] and nearest < best[2]):
                best = (name, votes, nearest)
        name, votes, nearest = best
        return {"name": name, "distance": nearest, "confidence": votes / k,
                "votes": {n: v / k for n, (v, _) in tally.items()}}

    def validate(self, data) -> dict:
        """Parsed JSON -> the set; ExampleFileError with the first problem otherwise."""
        from jsonschema import Draft202012Validator

        errors = sorted(Draft202012Validator(self.schema()).iter_errors(data), key=lambda e: list(e.absolute_path))
        what = f"not a {self.noun} file"
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "the file"
            raise ExampleFileError(f"{what}: {where}: {errors[0].message[:200]}")
        names = [c["name"] for c in data["classes"]]
        if len(set(names)) != len(names):
            raise ExampleFileError(f"{what}: a name appears twice")
        if not all(math.isfinite(v) for c in data["classes"] for e in c["examples"] for v in e):
            raise ExampleFileError(f"{what}: an example holds a number that is not finite")
        return {"format": self.format, "version": 1,
                "classes": [{"name": c["name"], "examples": c["examples"]} for c in data["classes"]]}

    def parse(self, data: bytes) -> dict:
        try:
            parsed = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):   # RecursionError: nesting past Python's limit
            raise ExampleFileError(f"not a {self.noun} file: it is not UTF-8 JSON") from None
        return self.validate(parsed)
