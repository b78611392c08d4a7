"""The tree describes itself, so its descriptions cannot drift: every Python module opens with
a docstring and every page module with a comment (what it does, in the file itself), the
development guide's folder map names exactly the folders there are, and every repo path the
docs, comments and templates name (server/api.py, static/js/pages/detect.js...) exists."""
from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACKED = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
# A repo path as prose names it: top folder, then a file with one of these extensions.
REPO_PATH = re.compile(r"(?<![\w./-])((?:server|converters|modelcontract|harness|bench|static|templates|tests|docs)"
                       r"/[\w./-]*?\w\.(?:py|js|md|html|json|yaml|css|env|txt))(?![\w-])")


def tracked(*suffixes: str) -> list[Path]:
    return [ROOT / f for f in TRACKED if f.endswith(suffixes) and (ROOT / f).is_file()]


def test_every_python_module_opens_with_a_docstring():
    bare = [p.relative_to(ROOT).as_posix() for p in tracked(".py")
            if p.stat().st_size and not ast.get_docstring(ast.parse(p.read_text()))]
    assert bare == []


def test_every_page_module_opens_with_a_comment():
    bare = [p.relative_to(ROOT).as_posix() for p in tracked(".js")
            if p.is_relative_to(ROOT / "static") and not p.read_text().lstrip().startswith(("//", "/*"))]
    assert bare == []


def test_the_folder_map_names_the_folders_there_are():
    text = (ROOT / "docs" / "development.md").read_text()
    block = re.search(r"## Folders\n.*?```\n(.*?)```", text, flags=re.S).group(1)
    top = set(re.findall(r"^([\w-]+)/", block, flags=re.M))
    present = {f.split("/")[0] for f in TRACKED if "/" in f and not f.startswith(".")}
    assert top == present | {"models"}   # models/ is generated, git-ignored
    parent = None
    for line in block.splitlines():
        if m := re.match(r"([\w-]+)/", line):
            parent = m.group(1)
        elif m := re.match(r"  ([\w/-]+)/\s", line):
            assert (ROOT / parent / m.group(1)).is_dir(), f"{parent}/{m.group(1)}/ is in the map, not in the tree"


def test_every_repo_path_named_in_docs_and_comments_exists():
    named = {}
    for page in tracked(".py", ".js", ".md", ".html", ".yaml", ".toml", "Makefile"):
        for path in REPO_PATH.findall(page.read_text()):
            if not (ROOT / path).exists() and "results" not in Path(path).parts[:2]:
                named.setdefault(path, []).append(page.relative_to(ROOT).as_posix())
    assert named == {}, "named but missing: " + "; ".join(f"{k} (in {', '.join(v[:3])})" for k, v in named.items())
