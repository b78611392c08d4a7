"""The converter CLI in a child process and its user-error shape."""
from __future__ import annotations

import os
import subprocess
import sys

from harness.paths import ROOT


def converter_cli(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m converters ARGS` in a child process, output captured."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "converters", *args], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


def assert_clean_error(code: int, stderr: str, *needles: str) -> None:
    """The CLI's user-error shape: exit 2, an `error: ` line, a `  fix: ` line, no traceback,
    and each needle in the text."""
    assert code == 2, stderr[-2000:]
    lines = stderr.strip().splitlines()
    assert lines[0].startswith("error: "), stderr[-2000:]
    assert any(line.startswith("  fix: ") for line in lines), stderr[-2000:]
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in stderr, (needle, stderr[-2000:])
