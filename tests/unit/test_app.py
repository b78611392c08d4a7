"""The Flask app without a browser: pages, headers, vendored files, model files, health, errors."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from server import create_app
from server.assets import IMPORT_MAP, VENDOR_FILES
from tests.fixtures.manifests import minimal

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def models(tmp_path):
    """A models folder with one installed (manifest-listed) model and one half-built folder."""
    folder = tmp_path / "demo-net"
    (folder / "tfjs").mkdir(parents=True)
    (folder / "tfjs" / "model.json").write_text('{"format": "graph-model"}')
    (folder / "tfjs" / "group1-shard1of1.bin").write_bytes(b"\x00" * 64)
    (folder / "secret.txt").write_text("not listed in the manifest")
    manifest = minimal(id="demo-net", title="Demo net", tfjs={"model": "tfjs/model.json"},
                       files={"tfjs/model.json": 25, "tfjs/group1-shard1of1.bin": 64})
    (folder / "manifest.json").write_text(json.dumps(manifest))
    (tmp_path / ".demo-net.tmp123").mkdir()  # an interrupted build: must be ignored
    return tmp_path


@pytest.fixture()
def client(models):
    return create_app({"MODELS_DIR": models, "TESTING": True}).test_client()


@pytest.mark.parametrize("path", ["/", "/detect", "/classify", "/hands"])
def test_pages_render(client, path):
    response = client.get(path)
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    assert b"<main>" in response.data


def test_page_without_model_shows_exact_install_command(client):
    html = client.get("/classify").get_data(as_text=True)
    assert 'data-state="missing"' in html
    assert "python -m converters efficientnet-lite0" in html


def test_page_with_model_lists_it(client):
    html = client.get("/detect").get_data(as_text=True)
    assert 'data-state="installed"' in html and 'value="demo-net"' in html


def test_security_headers_on_every_response(client):
    for path in ["/", "/healthz", "/vendor/tfjs/tf.es2017.min.js", "/nope"]:
        headers = client.get(path).headers
        csp = headers["Content-Security-Policy"]
        script_src = re.search(r"script-src ([^;]+)", csp).group(1).split()
        assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
        assert "'self'" in script_src and "'wasm-unsafe-eval'" in script_src
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Cross-Origin-Opener-Policy"] == "same-origin"
        assert headers["Cross-Origin-Embedder-Policy"] == "require-corp"


def test_every_vendored_file_is_installed_and_typed(client):
    for name in VENDOR_FILES:
        response = client.get(f"/vendor/{name}")
        assert response.status_code == 200, name
        if name.endswith(".wasm"):
            assert response.mimetype == "application/wasm"
        if name.endswith(".js"):
            assert response.mimetype == "text/javascript"


@pytest.mark.parametrize("path", ["/vendor/", "/vendor/tfjs/", "/vendor/../package.json",
                                  "/vendor/tfjs/../../package.json", "/vendor/%2e%2e/package.json",
                                  "/vendor/@tensorflow/tfjs/package.json"])
def test_vendor_route_is_a_whitelist(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.is_json and response.get_json()["error"]["code"] == "not_found"


def test_model_files_have_types_and_etags(client):
    response = client.get("/models/demo-net/tfjs/model.json")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.headers["ETag"] and "no-cache" in response.headers["Cache-Control"]
    again = client.get("/models/demo-net/tfjs/model.json", headers={"If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304 and again.data == b""
    shard = client.get("/models/demo-net/tfjs/group1-shard1of1.bin")
    assert shard.status_code == 200 and shard.mimetype == "application/octet-stream" and len(shard.data) == 64


@pytest.mark.parametrize("path", ["/models/nope/model.json", "/models/demo-net/secret.txt",
                                  "/models/demo-net/../demo-net/manifest.json",
                                  "/models/.demo-net.tmp123/manifest.json"])
def test_model_route_serves_only_manifest_listed_files(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.is_json and "message" in response.get_json()["error"]


def test_health_and_readiness(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    ready = client.get("/readyz").get_json()
    assert ready["status"] == "ready" and ready["tasks"] == ["detect"]
    assert [m["id"] for m in ready["models"]] == ["demo-net"]


def test_api_errors_are_json(client):
    response = client.post("/api/v1/models")
    assert response.status_code == 405
    assert response.get_json()["error"]["code"] == "method_not_allowed"
    assert client.get("/api/v1/nothing").get_json()["error"]["code"] == "not_found"


def test_unknown_page_is_html_for_people(client):
    response = client.get("/no-such-page", headers={"Accept": "text/html"})
    assert response.status_code == 404 and response.mimetype == "text/html"


def test_config_from_settings(tmp_path):
    """The environment reaches the app through its Settings (server/settings.py)."""
    from server.settings import Settings

    settings = Settings.from_env({"DATARAILROAD_MODELS": str(tmp_path), "DATARAILROAD_MAX_UPLOAD_BYTES": "1234"})
    app = create_app(settings=settings)
    assert app.config["MODELS_DIR"] == tmp_path.resolve()
    assert app.config["MAX_CONTENT_LENGTH"] == 1234


REMOTE = re.compile(r"""(?:src|href)\s*=\s*["']\s*(?:https?:)?//|import\s*\(?\s*["']https?://|from\s+["']https?://"""
                    r"""|loadGraphModel\(\s*["']https?://|tfhub\.dev|cdn\.jsdelivr|unpkg\.com""")


def test_no_remote_urls_in_templates_or_static():
    offenders = []
    for folder in ("templates", "static"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".html", ".js", ".css", ".json"}:
                for match in REMOTE.finditer(path.read_text()):
                    offenders.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert offenders == []


def test_no_remote_script_sources_in_rendered_pages(client):
    for path in ["/", "/detect", "/classify", "/hands"]:
        html = client.get(path).get_data(as_text=True)
        assert not REMOTE.search(html), path
        for src in re.findall(r"<script[^>]*\ssrc=\"([^\"]+)\"", html):
            assert src.startswith("/"), src
        inline = [(attrs.strip(), body) for attrs, body in
                  re.findall(r"<script(?![^>]*(?:\ssrc=|type=\"application/json\"))([^>]*)>(.*?)</script>", html, re.S)
                  if body.strip()]
        # The one inline script: LiteRT.js's import map, which the CSP allows by its exact hash.
        assert inline == [('type="importmap"', IMPORT_MAP)], path


def test_csp_allows_exactly_the_import_map(client):
    import base64
    import hashlib

    csp = client.get("/detect").headers["Content-Security-Policy"]
    script_src = next(d for d in csp.split("; ") if d.startswith("script-src"))
    digest = base64.b64encode(hashlib.sha256(IMPORT_MAP.encode()).digest()).decode()
    assert f"'sha256-{digest}'" in script_src.split()
    assert "'unsafe-inline'" not in script_src and "'unsafe-eval'" not in script_src
    assert json.loads(IMPORT_MAP)["imports"]["@litertjs/wasm-utils"].startswith("/vendor/")


def test_gunicorn_config_defaults(monkeypatch):
    import runpy

    from server import front
    from server.settings import load

    monkeypatch.delenv("DATARAILROAD_BIND", raising=False)
    monkeypatch.delenv("DATARAILROAD_PORT", raising=False)
    monkeypatch.delenv("DATARAILROAD_HOST", raising=False)
    load.cache_clear()  # gunicorn.conf.py reads this process's settings once, as gunicorn's master does
    try:
        settings = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
        front_config = front.haproxy_config(load(), ROOT / "app.sock", ROOT)
    finally:
        load.cache_clear()
    assert "bind 127.0.0.1:8000 " in front_config  # the public address is HAProxy's
    assert settings["preload_app"] is True and settings["workers"] >= 1 and settings["worker_class"] == "gthread"


def test_pickers_prefer_real_fp32_models_and_take_a_model_parameter(tmp_path):
    def install(model_id, quantization="none", sha="abc"):
        folder = tmp_path / model_id
        folder.mkdir()
        (folder / "manifest.json").write_text(json.dumps(minimal(
            id=model_id, title=model_id, quantization=quantization, source={"kind": "test", "sha256": sha})))

    install("a-random", sha="random-seed0")
    install("b-real-float16", quantization="float16")
    install("c-real")
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    html = client.get("/detect").get_data(as_text=True)
    order = re.findall(r'<option value="([^"]+)"', html.split('id="model-select"')[1].split('</select>')[0])
    assert order == ["c-real", "b-real-float16", "a-random"]
    assert "(random weights" in html.split('value="a-random"')[1].split("</option>")[0]
    chosen = client.get("/detect?model=b-real-float16").get_data(as_text=True)
    assert re.search(r'<option value="b-real-float16"[^>]*\sselected', chosen)


def test_detect_groups_its_models_by_what_they_find_official_first(tmp_path):
    """/detect's picker: objects, segments, people, oriented boxes, in that order, each group's
    official checkpoints first; the index has a tile per task opening /detect on its model;
    the API's default detector is the official plain one."""
    def install(model_id, fmt, official=False):
        folder = tmp_path / model_id
        folder.mkdir()
        kind = "official Ultralytics checkpoint" if official else "test"
        (folder / "manifest.json").write_text(json.dumps(minimal(
            id=model_id, title=model_id, outputs={"format": fmt}, source={"kind": kind, "sha256": "1" * 64})))

    install("a-mine-obb", "yolo-obb")
    install("b-pose", "yolo-pose", official=True)
    install("c-seg", "yolo-seg", official=True)
    install("d-mine", "yolo-raw")
    install("e-official", "yolo-raw", official=True)
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    picker = client.get("/detect").get_data(as_text=True).split('id="model-select"')[1].split("</select>")[0]
    assert re.findall(r'<optgroup label="([^"]+)"', picker) == [
        "Objects", "Segments (instance masks)", "People (pose)", "Oriented boxes (aerial)"]
    assert re.findall(r'<option value="([^"]+)"', picker) == ["e-official", "d-mine", "c-seg", "b-pose", "a-mine-obb"]
    index = client.get("/").get_data(as_text=True)
    assert re.search(r'data-group="pose"[^>]*>\s*<h2><a href="/detect\?model=b-pose"', index)
    assert client.get("/api/v1/models").get_json()["models"][0]["id"] == "e-official"


def test_pages_say_which_models_are_being_built(tmp_path):
    """A build in progress (its folder in models/.builds, not linked yet) is named on the pages
    until it is installed; a killed build's old folder is not."""
    import time

    from server.manifests import Manifests

    builds = tmp_path / ".builds"
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    (builds / f"yolo11n-pose-{stamp}-abc_12").mkdir(parents=True)
    (builds / "yolo26n-20200101T000000Z-old1").mkdir()
    client = create_app({"MODELS_DIR": tmp_path, "TESTING": True}).test_client()
    assert Manifests(tmp_path).building() == ["yolo11n-pose"]
    for page in ("/", "/detect", "/classify"):
        assert 'id="building" data-models="yolo11n-pose"' in client.get(page).get_data(as_text=True), page
    (tmp_path / "yolo11n-pose").symlink_to(Path(".builds") / f"yolo11n-pose-{stamp}-abc_12")
    assert Manifests(tmp_path).building() == []
    assert 'id="building"' not in client.get("/detect").get_data(as_text=True)
