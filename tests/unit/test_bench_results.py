"""The benches' results files: every bench/results/*.json the README or docs/ cite exists,
parses and says what wrote it, when and where; every bench writes one (an --out option,
defaulting to bench/results/<name>.json). No bench runs here."""
from __future__ import annotations

import argparse
import ast
import json
import math
import re

import pytest

from bench._results import META, RESULTS, add_out_option, write_results
from harness.paths import ROOT

BENCHES = sorted(p for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
CITED = re.compile(r"bench/results/[\w.-]+\.json")


def cited() -> set[str]:
    texts = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return {m for path in texts for m in CITED.findall(path.read_text())}


def calls(path, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == name]


def first_string(call: ast.Call):
    strings = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return strings[0] if strings else None


def test_the_docs_cite_results_files():
    assert "bench/results/track.json" in cited()


@pytest.mark.parametrize("rel", sorted(cited()))
def test_a_cited_results_file_exists_and_says_what_measured_it(rel):
    path = ROOT / rel
    assert path.is_file(), f"{rel} is cited in the docs but not in the repo: run its bench"
    data = json.loads(path.read_text())
    assert set(META) <= set(data), sorted(data)
    assert data["bench"] == path.stem and (ROOT / "bench" / f"{path.stem}.py").is_file()
    assert data["machine"]["cpu_count"] >= 1 and data["machine"]["platform"]
    assert re.match(r"\d{4}-\d\d-\d\dT", data["date"])
    assert set(data) - set(META), "no figures besides the metadata"


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_every_results_file_parses_and_belongs_to_a_bench(path):
    data = json.loads(path.read_text())
    assert data["bench"] == path.stem and (ROOT / "bench" / f"{path.stem}.py").is_file()


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.stem)
def test_every_bench_has_an_out_option_and_writes_its_results(path):
    name = path.stem
    options = [c for c in calls(path, "add_out_option") + calls(path, "parse_args") if first_string(c) == name]
    assert options, f"bench/{path.name}: no add_out_option(parser, {name!r}) (or _browser.parse_args({name!r}, ...))"
    writes = [c for c in calls(path, "write_results") if first_string(c) == name]
    assert writes, f"bench/{path.name}: no write_results({name!r}, ...)"


def test_the_out_option_defaults_to_bench_results():
    parser = argparse.ArgumentParser()
    add_out_option(parser, "server")
    assert parser.parse_args([]).out == RESULTS / "server.json"
    assert str(parser.parse_args(["--out", "x.json"]).out) == "x.json"


def test_write_results_adds_the_machine_date_and_arguments(tmp_path, capsys):
    args = argparse.Namespace(out=tmp_path / "r" / "server.json", models=ROOT / "models", runs=3)
    write_results("server", args, {"latency": {"ms": 12.345678, "none": math.nan}, "rows": (1, 2)})
    data = json.loads((tmp_path / "r" / "server.json").read_text())
    assert data["bench"] == "server" and data["args"] == {"models": str(ROOT / "models"), "runs": 3}
    assert data["latency"] == {"ms": 12.3457, "none": None} and data["rows"] == [1, 2]
    assert data["machine"]["cpu_count"] >= 1 and "chromium" not in data["machine"]
    assert str(args.out) in capsys.readouterr().out
    with pytest.raises(AssertionError):
        write_results("server", args, {"date": "mine"})
