"""Nothing rots silently: the scripts that no test runs otherwise still start.

No Python file edits sys.path (the project is installed editable, so everything imports by
name; a path hack hides a broken import until someone runs the script from elsewhere), found
in the syntax tree, not the text. Every bench (python -m bench.<name>) and every tools/ script
(python tools/<name>.py) answers --help with its usage, all of them at once in parallel. And
the benches' modes that need no model and no browser run for real: bench.track's synthetic
sequence and its tracker timing (Python and the JS twin in Node), and bench.mask_decode at
its smallest.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from harness.node import node as require_node

ROOT = Path(__file__).resolve().parents[2]
# Folders never scanned: environments, installed or generated files, caches.
SKIP_ANYWHERE = ("node_modules", ".git", "__pycache__", ".ruff_cache", ".pytest_cache")
SKIP_AT_TOP = ("models", "test-artifacts")
# list methods that change sys.path in place
MUTATORS = {"insert", "append", "extend", "remove", "pop", "clear", "__setitem__", "__iadd__"}

BENCHES = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if not p.name.startswith("_"))
TOOLS = sorted(p.name for p in (ROOT / "tools").glob("*.py"))
HELP_COMMANDS = {f"bench.{name}": [sys.executable, "-m", f"bench.{name}", "--help"] for name in BENCHES}
HELP_COMMANDS |= {f"tools/{name}": [sys.executable, f"tools/{name}", "--help"] for name in TOOLS}


def python_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        top = Path(folder) == ROOT
        dirs[:] = sorted(d for d in dirs if not (d.startswith(".venv") or d in SKIP_ANYWHERE
                                                 or (top and d in SKIP_AT_TOP)))
        found += [Path(folder) / f for f in sorted(files) if f.endswith(".py")]
    return found


def sys_path_edits(source: str) -> list[int]:
    """Line numbers where ``source`` changes sys.path: a list method called on it, an item or
    slice assigned or deleted, the name assigned or added to (also through ``import sys as s``
    and ``from sys import path``)."""
    tree = ast.parse(source)
    sys_names, path_names = {"sys"}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            sys_names |= {a.asname or a.name for a in node.names if a.name == "sys"}
        elif isinstance(node, ast.ImportFrom) and node.module == "sys":
            path_names |= {a.asname or a.name for a in node.names if a.name == "path"}

    def is_sys_path(node) -> bool:
        return ((isinstance(node, ast.Attribute) and node.attr == "path"
                 and isinstance(node.value, ast.Name) and node.value.id in sys_names)
                or (isinstance(node, ast.Name) and node.id in path_names))

    def changes(target) -> bool:
        return is_sys_path(target) or (isinstance(target, ast.Subscript) and is_sys_path(target.value))

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            hit = isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS and is_sys_path(node.func.value)
        elif isinstance(node, ast.Assign):
            hit = any(changes(t) for t in node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            hit = changes(node.target)
        elif isinstance(node, ast.Delete):
            hit = any(changes(t) for t in node.targets)
        else:
            hit = False
        if hit:
            lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("source", [
    "import sys\nsys.path.insert(0, 'x')",
    "import sys\nsys.path.append('x')",
    "import sys\nsys.path.extend(['x'])",
    "import sys\nsys.path[:0] = ['x']",
    "import sys\nsys.path[0] = 'x'",
    "import sys\nsys.path = ['x']",
    "import sys\nsys.path += ['x']",
    "import sys\ndel sys.path[0]",
    "import sys as system\nsystem.path.insert(0, 'x')",
    "from sys import path\npath.insert(0, 'x')",
    "from sys import path as p\np[:0] = ['x']",
    "def main():\n    import sys\n    if True:\n        sys.path.insert(0, 'x')",
])
def test_the_sys_path_check_finds_each_way_of_editing_it(source):
    assert sys_path_edits(source) != []


def test_the_sys_path_check_lets_reads_and_other_lists_be():
    source = ("import sys\nfrom pathlib import Path\nprint(sys.path[0], list(sys.path))\n"
              "path = []\npath.insert(0, 1)\nPath('x').parent\nos.environ['PYTHONPATH'] = 'x'\n")
    assert sys_path_edits(source) == []


def test_no_python_file_edits_sys_path():
    files = python_files()
    assert ROOT / "bench" / "track.py" in files and Path(__file__) in files
    edits = {}
    for path in files:
        if lines := sys_path_edits(path.read_text(encoding="utf-8")):
            edits[path.relative_to(ROOT).as_posix()] = lines
    assert edits == {}, "sys.path edited (the project is installed editable: import by name instead)"


@pytest.fixture(scope="module")
def help_runs() -> dict[str, subprocess.CompletedProcess]:
    """Every script's --help, run from the repo root as the docs run them, all at once."""
    def run(command):
        return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    with ThreadPoolExecutor(max_workers=min(8, len(HELP_COMMANDS))) as pool:
        return dict(zip(HELP_COMMANDS, pool.map(run, HELP_COMMANDS.values())))


def test_the_scripts_are_found():
    assert "track" in BENCHES and "ultralytics_litert_fixtures.py" in TOOLS


@pytest.mark.parametrize("script", list(HELP_COMMANDS))
def test_every_bench_and_tool_answers_help(help_runs, script):
    proc = help_runs[script]
    assert proc.returncode == 0, f"{' '.join(HELP_COMMANDS[script][1:])} failed:\n{proc.stderr[-3000:]}"
    assert "usage:" in proc.stdout.lower(), proc.stdout


def test_bench_track_synthetic_sequence_and_tracker_cost(tmp_path):
    require_node()  # skips without Node, which the JS twin's timing needs
    sequence = tmp_path / "seq"
    proc = subprocess.run([sys.executable, "-m", "bench.track", "--make-sequence", str(sequence)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    frames = sorted((sequence / "img1").glob("*.jpg"))
    assert len(frames) == 150 and frames[0].name == "000001.jpg"
    from bench.track import read_gt, tracker_cost

    gt = read_gt(sequence / "gt" / "gt.txt")
    assert sorted(gt) == list(range(1, 151)) and {len(rows) for rows in gt.values()} == {4}
    cost = tracker_cost(objects=5, frames=20)   # the JS twin by its path in static/js
    assert cost["python_ms_per_frame"] > 0 and cost["js_ms_per_frame"] > 0


def test_bench_mask_decode_at_its_smallest(tmp_path):
    require_node()
    out = tmp_path / "mask_decode.json"
    proc = subprocess.run([sys.executable, "-m", "bench.mask_decode", "--instances", "2", "--runs", "1",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(out.read_text())["bench"] == "mask_decode"
