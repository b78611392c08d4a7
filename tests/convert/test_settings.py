"""server/settings.py: the one table of settings, its parsing and bounds, the docs'
table of it, and that the app, gunicorn, the runners and the cluster take their values from it."""
from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import runpy
from pathlib import Path

import pytest

from server.settings import SETTINGS, Settings, load, main
from server import config, create_app

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "configuration.md"


def docs_table() -> dict[str, list[str]]:
    """docs/configuration.md's environment table: variable -> its other cells."""
    section = DOCS.read_text().split("## Environment", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        match = re.fullmatch(r"`([A-Z_]+)`", cells[0]) if line.startswith("|") else None
        if match:
            assert match.group(1) not in rows, f"{match.group(1)} is listed twice"
            rows[match.group(1)] = cells[1:]
    return rows


def test_docs_table_lists_exactly_the_settings():
    listed = docs_table()
    assert list(listed) == [row.env for row in SETTINGS.values()]
    # ... with the code's defaults and bounds (`python -m server.settings --markdown` writes it).
    assert {env: cells[:2] for env, cells in listed.items()} == \
        {row.env: [row.shown, row.limits] for row in SETTINGS.values()}


def test_every_variable_is_read_only_by_the_settings():
    """No module of the app, the converters or the contract reads a setting's variable itself
    (modelcontract/paths.py reads the folders' variables for the converters: see below)."""
    names = {row.env for row in SETTINGS.values()}
    offenders = []
    for folder in ("server", "converters", "modelcontract"):
        for path in (ROOT / folder).rglob("*.py"):
            if path in (ROOT / "server" / "settings.py", ROOT / "modelcontract" / "paths.py"):
                continue
            text = path.read_text()
            for match in re.finditer(r"(?:environ\.get|environ\[|getenv)\(?\s*[\"']([A-Z_]+)", text):
                if match.group(1) in names:
                    offenders.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    for match in re.finditer(r"(?:environ\.get|environ\[|getenv)\(?\s*[\"']([A-Z_]+)",
                             (ROOT / "gunicorn.conf.py").read_text()):
        offenders.append(f"gunicorn.conf.py: {match.group(0)}")
    assert offenders == []


def test_the_converters_folders_are_the_settings():
    """modelcontract/paths.py (the converters' side, no server import) reads the folders'
    variables as the settings do: same variables, defaults and parsing."""
    from modelcontract import paths

    for name, (env, default) in paths.FOLDERS.items():
        assert SETTINGS[name].env == env
        assert paths.folder(name, {}) == getattr(Settings.from_env({}), name) == default
        environ = {env: "~/somewhere"}
        assert paths.folder(name, environ) == getattr(Settings.from_env(environ), name) == Path.home() / "somewhere"


def test_defaults():
    s = Settings.from_env({})
    assert s == Settings()
    assert s.models == ROOT / "models" and s.node_modules == ROOT / "node_modules" and s.certs == ROOT / "certs"
    assert s.max_upload_bytes == 10 * 1024 * 1024 and s.max_image_pixels == 40_000_000 and s.max_video_frames == 600
    assert (s.host, s.port, s.bind) == ("127.0.0.1", 8000, "127.0.0.1:8000")
    assert s.workers == (os.cpu_count() or 1) and s.infer_threads == max(1, (os.cpu_count() or 1) // s.workers)
    assert (s.threads, s.http_threads, s.connections, s.send_timeout) == (2, 16, 1000, 30.0)
    assert (s.idle_timeout, s.body_timeout, s.buffer_bytes) == (15.0, 120.0, 64 * 1024 * 1024)
    assert (s.batch, s.batch_wait_ms, s.interpreters, s.https) == (4, 0.0, 1, False)


def test_parsing():
    s = Settings.from_env({
        "DATARAILROAD_MODELS": "some/models", "DATARAILROAD_MAX_UPLOAD_BYTES": " 1234 ",
        "DATARAILROAD_IDLE_TIMEOUT": "2.5", "DATARAILROAD_HTTPS": "1", "DATARAILROAD_PORT": "9000",
        "WEB_CONCURRENCY": "4", "DATARAILROAD_BATCH": "", "DATARAILROAD_CERTS": "~/certs"})
    assert s.models == Path("some/models").resolve()
    assert s.certs == Path.home() / "certs"
    assert (s.max_upload_bytes, s.idle_timeout, s.https, s.port, s.workers) == (1234, 2.5, True, 9000, 4)
    assert s.batch == 4  # empty: the default
    assert s.bind == "127.0.0.1:9000"
    assert s.infer_threads == max(1, (os.cpu_count() or 1) // 4)
    assert Settings.from_env({"DATARAILROAD_BIND": "unix:/tmp/x.sock", "DATARAILROAD_PORT": "1"}).bind == "unix:/tmp/x.sock"
    assert Settings.from_env({"DATARAILROAD_HTTPS": "0"}).https is False


@pytest.mark.parametrize("env, value, says", [
    ("DATARAILROAD_MAX_UPLOAD_BYTES", "10MB", "must be an integer"),
    ("DATARAILROAD_MAX_UPLOAD_BYTES", "0", "must be ≥ 1"),
    ("DATARAILROAD_IDLE_TIMEOUT", "0", "must be > 0"),
    ("DATARAILROAD_BODY_TIMEOUT", "-1", "must be > 0"),
    ("DATARAILROAD_BODY_TIMEOUT", "nan", "finite"),
    ("DATARAILROAD_BODY_TIMEOUT", "soon", "must be a number"),
    ("DATARAILROAD_PORT", "70000", "≤ 65535"),
    ("DATARAILROAD_HTTPS", "yes", "1 (on) or 0 (off)"),
    ("WEB_CONCURRENCY", "0", "must be ≥ 1"),
])
def test_a_bad_value_names_its_variable(env, value, says):
    with pytest.raises(ValueError) as error:
        Settings.from_env({env: value})
    assert env in str(error.value) and says in str(error.value)


def test_bounds_that_clamp():
    s = Settings.from_env({"DATARAILROAD_IDLE_TIMEOUT": "100", "DATARAILROAD_BATCH": "0",
                           "DATARAILROAD_BATCH_WAIT_MS": "-5", "DATARAILROAD_INFER_THREADS": "0",
                           "DATARAILROAD_INTERPRETERS": "-2"})
    assert (s.idle_timeout, s.batch, s.batch_wait_ms, s.infer_threads, s.interpreters) == (30.0, 1, 0.0, 1, 1)


def test_frozen_and_replaced_copies_are_validated():
    s = Settings()
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.batch = 1
    copy = dataclasses.replace(s, batch=1, idle_timeout=60, models="elsewhere")
    assert (copy.batch, copy.idle_timeout, copy.models, s.batch) == (1, 30, Path("elsewhere"), 4)
    with pytest.raises(ValueError, match="DATARAILROAD_BODY_TIMEOUT"):
        dataclasses.replace(s, body_timeout=0)


def test_load_reads_the_environment_once(monkeypatch):
    load.cache_clear()
    monkeypatch.setenv("DATARAILROAD_THREADS", "7")
    try:
        first = load()
        monkeypatch.setenv("DATARAILROAD_THREADS", "8")
        assert load() is first and first.threads == 7
        load.cache_clear()
        assert load().threads == 8
    finally:
        load.cache_clear()


def test_printed(capsys):
    assert main(["--markdown"]) == 0
    assert "| `DATARAILROAD_IDLE_TIMEOUT` | 15 s |" in capsys.readouterr().out
    assert main([]) == 0
    assert re.search(r"^DATARAILROAD_BATCH +\d+$", capsys.readouterr().out, re.M)


# ---------------------------------------------------------------------------- who takes them

def test_the_app_takes_its_settings(tmp_path):
    """A value set in the settings reaches the app: an upload over a small limit is a 413."""
    settings = dataclasses.replace(Settings(), models=tmp_path, max_upload_bytes=1000)
    app = create_app({"TESTING": True}, settings)
    assert config.settings(app) is settings and app.config["MAX_CONTENT_LENGTH"] == 1000
    client = app.test_client()
    files = {"image": (io.BytesIO(b"x" * 5000), "big.jpg", "image/jpeg")}
    response = client.post("/api/v1/detect", data=files, content_type="multipart/form-data")
    assert response.status_code == 413, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "payload_too_large"
    raw = client.post("/api/v1/detect", data=b"x" * 5000, content_type="image/jpeg")
    assert raw.status_code == 413
    small = client.post("/api/v1/detect", data=b"x" * 10, content_type="image/jpeg")
    assert small.status_code != 413


def test_flask_config_keys_override_their_settings(tmp_path):
    """create_app({"MAX_CONTENT_LENGTH": ...}) (the tests' usual way) changes the setting too."""
    app = create_app({"MODELS_DIR": str(tmp_path), "MAX_CONTENT_LENGTH": 1234, "TESTING": True}, Settings())
    assert config.settings(app).max_upload_bytes == 1234 == app.config["MAX_CONTENT_LENGTH"]
    assert config.settings(app).models == tmp_path == app.config["MODELS_DIR"]
    with pytest.raises(ValueError, match="DATARAILROAD_MAX_IMAGE_PIXELS"):
        create_app({"MAX_IMAGE_PIXELS": 0}, Settings())


def test_the_app_defaults_to_this_process_settings(tmp_path):
    assert config.settings(create_app({"MODELS_DIR": tmp_path})) == dataclasses.replace(load(), models=tmp_path)


def test_gunicorn_conf_takes_the_settings(monkeypatch):
    for name, value in {"WEB_CONCURRENCY": "3", "DATARAILROAD_HTTP_THREADS": "5",
                        "DATARAILROAD_IDLE_TIMEOUT": "100"}.items():
        monkeypatch.setenv(name, value)
    load.cache_clear()
    try:
        conf = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    finally:
        load.cache_clear()
    assert (conf["workers"], conf["worker_class"], conf["threads"], conf["keepalive"]) == (3, "gthread", 5, 30)
    assert "bind" not in conf and "certfile" not in conf  # the front's socket, given by server/front.py; TLS ends at HAProxy


def test_the_front_takes_the_settings(tmp_path):
    """HAProxy's configuration (server/front.py) carries the address, limits and timeouts, and
    HAProxy itself accepts it."""
    import subprocess

    from server import front

    settings = Settings.from_env({"DATARAILROAD_BIND": "127.0.0.1:8765", "WEB_CONCURRENCY": "3",
                                  "DATARAILROAD_THREADS": "5", "DATARAILROAD_CONNECTIONS": "77",
                                  "DATARAILROAD_IDLE_TIMEOUT": "2.5", "DATARAILROAD_SEND_TIMEOUT": "7",
                                  "DATARAILROAD_BODY_TIMEOUT": "60", "DATARAILROAD_MAX_UPLOAD_BYTES": "1000"})
    config = front.haproxy_config(settings, tmp_path / "app.sock", tmp_path)
    for line in ("bind 127.0.0.1:8765 tcp-ut 7000ms", "maxconn 77", "timeout http-request 2500ms",
                 "timeout client 7000ms", "http-request wait-for-body time 60000ms",
                 "tune.bufsize %d" % (1000 + front.BODY_SLACK), "req.hdr_val(content-length) gt %d }" % (1000 + front.HOPELESS), "req.body_size gt 1000 }",
                 f"server app {tmp_path / 'app.sock'}"):
        assert line in config, line
    path = front.prepare(settings, tmp_path)
    check = subprocess.run([front.haproxy_binary(), "-c", "-f", str(path)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert json.loads((tmp_path / "408.http").read_bytes().partition(b"\r\n\r\n")[2])["error"]["code"] == \
        "request_timeout"


def test_gunicorn_conf_refuses_a_bad_value(monkeypatch):
    monkeypatch.setenv("DATARAILROAD_BODY_TIMEOUT", "0")
    load.cache_clear()
    try:
        with pytest.raises(ValueError, match="DATARAILROAD_BODY_TIMEOUT"):
            runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    finally:
        load.cache_clear()


def test_runners_take_the_registry_settings(built_model):
    """The app's settings reach LiteRT: interpreter threads, pool size, batching."""
    from server.inference import registry

    lite0 = built_model("efficientnet-lite0")
    settings = dataclasses.replace(Settings(), models=lite0.parent, infer_threads=2, interpreters=3, batch=2,
                                   batch_wait_ms=5)
    runner = registry(create_app({"TESTING": True}, settings)).get("classify", "efficientnet-lite0")
    assert runner.settings is settings
    assert (runner.model.threads, runner.model.pool_size) == (2, 3)
    assert (runner.model._batcher.max_batch, runner.model._batcher.wait_s) == (2, 0.005)
    off = dataclasses.replace(settings, batch=1)
    assert registry(create_app({"TESTING": True}, off)).get("classify", "efficientnet-lite0").model._batcher is None


def test_cluster_replica_configures_its_registry_not_the_environment(tmp_path, monkeypatch):
    pytest.importorskip("ray.serve")
    from server.cluster.app import ModelServer

    monkeypatch.delenv("DATARAILROAD_INFER_THREADS", raising=False)
    monkeypatch.delenv("DATARAILROAD_INTERPRETERS", raising=False)
    replica = ModelServer.func_or_class("classify", str(tmp_path))
    replica.reconfigure({"threads": 3, "interpreters": 2})
    assert (replica.registry.settings.infer_threads, replica.registry.settings.interpreters) == (3, 2)
    assert replica.registry.settings.batch == replica.settings.batch  # the rest: the replica's own
    assert replica.registry.models_dir == tmp_path
    assert "DATARAILROAD_INFER_THREADS" not in os.environ and "DATARAILROAD_INTERPRETERS" not in os.environ
