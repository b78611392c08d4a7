"""The slim runtime (requirements-serve.txt, `make serve-install` -> .venv-serve) runs the
server on built models without any converter dependency. It is made with the interpreter the
suite runs on, beside the suite's venv (.venv -> .venv-serve, make test-python's .venv-py3.13 ->
.venv-py3.13-serve), so each Python gets its own.

Time: `make serve-install` reuses .venv-serve while requirements-serve.txt is unchanged
(make's timestamp rule), so only the first run pays for the venv: about 70 s here from
pip's cache (Ray's wheel is most of it), then a few seconds. Not marked slow for that."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from server import create_app
from harness.models import need
from harness.photos import photo_bytes
from harness.servers import ProductionServer

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / f"{Path(sys.prefix).name}-serve"
PORT = 8432
CONVERTER_DEPENDENCIES = ("torch", "torchvision", "tensorflow", "tf_keras", "keras", "tensorflowjs", "jax",
                          "jaxlib", "flax", "ultralytics", "mediapipe", "onnx", "onnxruntime", "onnx2tf")


@pytest.fixture(scope="module")
def serve_venv() -> Path:
    subprocess.run(["make", "serve-install", f"SERVE_VENV={VENV}", f"PYTHON={sys._base_executable}"], cwd=ROOT,
                   check=True, timeout=900)
    return VENV


def without_timing(body: dict) -> dict:
    return {k: v for k, v in body.items() if k != "timing_ms"}


def test_serve_venv_has_no_converter_dependency(serve_venv):
    script = ("import importlib.util, sys; names = sys.argv[1:]; "
              "print(' '.join(n for n in names if importlib.util.find_spec(n)))")
    found = subprocess.run([serve_venv / "bin/python", "-c", script, *CONVERTER_DEPENDENCIES], check=True,
                           capture_output=True, text=True, env={"PATH": os.environ["PATH"]}).stdout.split()
    assert found == []
    # and what the server itself imports is there
    subprocess.run([serve_venv / "bin/python", "-c", "import server, server.api, server.inference, "
                    "server.images, modelcontract.geometry, modelcontract.track, ai_edge_litert.interpreter, gunicorn, ray.serve, a2wsgi"],
                   cwd=ROOT, check=True, env={"PATH": os.environ["PATH"]}, timeout=120)


def requirement_pin(path: Path, name: str) -> str:
    """The version ``path`` pins ``name`` to (``name==X`` on a line of its own)."""
    pins = [line.split("==", 1)[1].strip() for line in path.read_text().splitlines()
            if line.split("==", 1)[0].strip().lower() == name]
    assert len(pins) == 1, (path.name, name, pins)
    return pins[0]


# LiteRT versions measured slower on the server's models (requirements-serve.txt gives the figures).
SLOW_LITERT = {"2.2.0", "2.3.0"}


def test_serve_venv_runs_the_fast_litert(serve_venv):
    """The server runs LiteRT 2.1.0: 2.2 and 2.3 took 1.4x as long per invoke on yolov5n here.
    The converters' venv needs 2.3 (litert-torch), so this is the pin most likely to drift."""
    pinned = requirement_pin(ROOT / "requirements-serve.txt", "ai-edge-litert")
    assert pinned not in SLOW_LITERT
    installed = subprocess.run([serve_venv / "bin/python", "-c", "from importlib.metadata import version; "
                                "print(version('ai-edge-litert'))"], check=True, capture_output=True, text=True,
                               env={"PATH": os.environ["PATH"]}).stdout.strip()
    assert installed == pinned


def test_front_from_serve_venv_serves_the_three_tasks(serve_venv, api_models):
    import requests

    need(api_models, "yolov5n")
    folder = next(iter(api_models.values())).parent
    # Only PATH in its environment (no PYTHONPATH): nothing from the full venv can leak in.
    server = ProductionServer(folder, 1, port=PORT, python=serve_venv / "bin/python", clean_env=True)
    try:
        url = server.url
        reference = create_app({"MODELS_DIR": folder, "TESTING": True}).test_client()
        data = photo_bytes("zidane.jpg")
        for endpoint in ("detect", "classify", "hands"):
            got = requests.post(f"{url}/api/v1/{endpoint}", data=data, headers={"Content-Type": "image/jpeg"},
                                timeout=60)
            want = reference.post(f"/api/v1/{endpoint}", data=data, content_type="image/jpeg")
            assert got.status_code == want.status_code == 200, got.text[:300]
            assert without_timing(got.json()) == without_timing(want.get_json())
    finally:
        server.stop()


@pytest.mark.slow  # a third Ray node (a minute); the serve venv serves through gunicorn in make test
def test_cluster_node_runs_from_serve_venv(serve_venv, api_models):
    """A Ray node started from .venv-serve (its `ray`, its Python for every worker) runs the
    Serve app: the slim install is what a cluster node needs."""
    import requests

    folder = next(iter(api_models.values())).parent
    ray_port, http_port = 6396, 8436
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}
    cli = [serve_venv / "bin/python", "-m", "server.cluster"]
    try:
        up = subprocess.run([*cli, "up", "--nodes", "1", "--port", str(http_port), "--ray-port", str(ray_port),
                             "--node-ports", "10800", "--models", str(folder)], cwd=ROOT, env=env, timeout=300,
                            capture_output=True, text=True)
        assert up.returncode == 0, (up.stdout + up.stderr)[-3000:]
        reference = create_app({"MODELS_DIR": folder, "TESTING": True}).test_client()
        data = photo_bytes("bus.jpg")
        got = requests.post(f"http://127.0.0.1:{http_port}/api/v1/classify", data=data,
                            headers={"Content-Type": "image/jpeg"}, timeout=60)
        want = reference.post("/api/v1/classify", data=data, content_type="image/jpeg")
        assert got.status_code == 200, got.text[:300]
        assert without_timing(got.json()) == without_timing(want.get_json())
    finally:
        subprocess.run([*cli, "down", "--ray-port", str(ray_port)], cwd=ROOT, env=env, timeout=120)
