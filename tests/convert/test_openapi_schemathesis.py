"""schemathesis (`--checks all`, the CLI's own checks) against the OpenAPI document of a live
server on loopback: every request the document calls valid is answered 2xx (or 404/5xx as
the checks allow), every invalid one 4xx, every answer matches its documented schema.
Bounded: a fixed number of examples per operation and a fixed seed (about a minute).
POST /api/v1/track is left out: a random byte string its schema calls valid (any binary
body) is never a video, so every generated case is rightly refused; tests/convert/test_track_api.py
covers that route's answers and errors."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.servers import live_server

MAX_EXAMPLES = 40
SEED = 11


def test_schemathesis_checks_all_pass(api_models, tmp_path):
    cli = Path(sys.executable).parent / "schemathesis"
    if not cli.exists() and shutil.which("schemathesis") is None:
        pytest.skip("schemathesis is not installed (requirements.txt)")
    from server import create_app

    app = create_app({"MODELS_DIR": next(iter(api_models.values())).parent, "TESTING": True})
    with live_server(app) as url:
        proc = subprocess.run([str(cli if cli.exists() else shutil.which("schemathesis")), "--no-color", "run",
                               f"{url}/api/v1/openapi.json", "--checks", "all", "--max-examples", str(MAX_EXAMPLES),
                               "--seed", str(SEED), "--workers", "1", "--exclude-path", "/api/v1/track"],
                              capture_output=True, text=True, timeout=600, cwd=tmp_path)  # its .schemathesis/ cache
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "No issues found" in out, out[-3000:]
