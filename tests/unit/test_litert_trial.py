"""server.inference.litert.trial_load: a .tflite is loaded and run once in a child process, so
a file on which LiteRT crashes kills the child, not the worker, and is named by its signal.
ai-edge-litert 2.3 refuses the truncated files 2.1 crashed on, so a child that crashes on
purpose stands in for LiteRT here; the integrity tests load real broken files."""
from __future__ import annotations

import pytest

from server.inference import litert


@pytest.fixture
def trial(monkeypatch, tmp_path):
    def run(script: str):
        monkeypatch.setattr(litert, "_TRIAL", script)
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.tflite"
        path.write_bytes(b"not read by the stand-in")
        return path
    return run


def test_a_crash_in_the_trial_is_named_by_its_signal(trial):
    path = trial("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    with pytest.raises(litert.LoadError, match=r"LiteRT crashed on it \(SIGSEGV\) in a trial run"):
        litert.trial_load(path)
    # remembered for this version of the file: the second call runs no child
    with pytest.raises(litert.LoadError, match="SIGSEGV"):
        litert.trial_load(path)


def test_an_error_in_the_trial_gives_its_last_line(trial):
    path = trial("raise ValueError('The model is not a valid Flatbuffer buffer')\n")
    with pytest.raises(litert.LoadError, match="could not load or run it: ValueError: The model is not a valid"):
        litert.trial_load(path)


def test_a_trial_that_runs_passes(trial):
    litert.trial_load(trial("pass\n"))  # no LoadError
