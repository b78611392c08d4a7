"""`make run HTTPS=1` (docs/phones-offline.md): the local CA and server certificate of
server/certs.py, the real gunicorn serving https with them, the camera on https in Chromium,
and the message a page shows when the camera is blocked (an http origin that is not
localhost, a denied, missing or busy camera).

Traffic stays on loopback: `demo.test` is mapped to 127.0.0.1 in Chromium.
"""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import os
import socket
import ssl
import stat
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from converters.sources import load_photo
from server import certs
from harness.browser import CHROMIUM, fake_camera_flags, launch, open_page, screenshot, wait_frames
from harness.clips import write_y4m
from harness.paths import YOLOV5N_WEIGHTS
from harness.photos import letterbox_rgb
from harness.servers import ProductionServer

HTTPS_PORT, HTTP_PORT = 8450, 8451
IDLE = 3.0
LAN = ["192.168.1.23", "fd12:3456::5"]


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


# ---------------------------------------------------------------------------- certs.py

def test_server_certificate_names_chain_and_key_modes(tmp_path):
    bundle = certs.ensure(tmp_path / "certs", lan=LAN)
    ca, server = load(bundle.ca), load(bundle.cert)

    dns, ips = certs.names_of(server)
    assert dns == ["localhost"]
    assert set(ips) == {"127.0.0.1", "::1", *LAN}
    server.verify_directly_issued_by(ca)  # raises unless the CA signed it
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ExtendedKeyUsageOID.SERVER_AUTH in server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert server.not_valid_after_utc - server.not_valid_before_utc <= dt.timedelta(days=825)  # Apple's limit
    for key in ("ca.key", "server.key"):
        assert stat.S_IMODE((bundle.cert.parent / key).stat().st_mode) == 0o600
    assert stat.S_IMODE(bundle.cert.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(bundle.ca.stat().st_mode) == 0o644
    # The key file holds the key of the certificate.
    key = serialization.load_pem_private_key(bundle.key.read_bytes(), None)
    assert key.public_key().public_numbers() == server.public_key().public_numbers()


def test_python_tls_client_trusts_the_pair_for_each_name(tmp_path):
    """A real handshake (in memory) for every name: the CA as the only trust anchor."""
    bundle = certs.ensure(tmp_path, lan=LAN)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(bundle.cert, bundle.key)
    client_ctx = ssl.create_default_context(cafile=str(bundle.ca))
    for name in ["localhost", "127.0.0.1", *LAN]:
        assert handshake(server_ctx, client_ctx, name)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(server_ctx, client_ctx, "192.168.1.99")


def test_the_ca_cannot_vouch_for_a_public_name(tmp_path):
    """Name constraints: even a certificate made with ca.key for a public site is refused."""
    bundle = certs.ensure(tmp_path, lan=LAN)
    ca_key = serialization.load_pem_private_key((tmp_path / "ca.key").read_bytes(), None)
    forged, key = certs.make_server(load(bundle.ca), ca_key, ["example.com"], ["93.184.215.14"])
    (tmp_path / "forged.pem").write_bytes(
        forged.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()))
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(tmp_path / "forged.pem")
    client_ctx = ssl.create_default_context(cafile=str(bundle.ca))
    for name in ("example.com", "93.184.215.14"):
        with pytest.raises(ssl.SSLCertVerificationError, match="permitted subtree violation"):
            handshake(server_ctx, client_ctx, name)


def handshake(server_ctx, client_ctx, name: str) -> bool:
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(10):
        for side, obj, out, peer_in in (("client", client, c_out, s_in), ("server", server, s_out, c_in)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
            peer_in.write(out.read())
        if all(done.values()):
            return True
    return False


def test_reused_then_made_again_when_addresses_change_or_it_nears_its_end(tmp_path):
    first = certs.ensure(tmp_path, lan=LAN)
    files = {name: (tmp_path / name).read_bytes() for name in certs.FILES}
    again = certs.ensure(tmp_path, lan=list(reversed(LAN)))  # same set, other order
    assert not again.made_ca and not again.made_server
    assert {name: (tmp_path / name).read_bytes() for name in certs.FILES} == files

    moved = certs.ensure(tmp_path, lan=["10.0.0.7"])
    assert moved.made_server and not moved.made_ca
    assert (tmp_path / "ca.crt").read_bytes() == files["ca.crt"]  # the phone's trust stays valid
    assert set(certs.names_of(load(first.cert))[1]) == {"127.0.0.1", "::1", "10.0.0.7"}

    near_end = load(first.cert).not_valid_after_utc - dt.timedelta(days=certs.RENEW_DAYS - 1)
    late = certs.ensure(tmp_path, lan=["10.0.0.7"], now=near_end)
    assert late.made_server and not late.made_ca
    assert load(late.cert).not_valid_after_utc > near_end + dt.timedelta(days=300)


def test_server_certificate_of_another_ca_or_broken_files_are_replaced(tmp_path):
    certs.ensure(tmp_path, lan=LAN)
    other = certs.ensure(tmp_path / "other", lan=LAN)
    for name in ("server.crt", "server.key"):
        (tmp_path / name).write_bytes((other.cert.parent / name).read_bytes())
    fixed = certs.ensure(tmp_path, lan=LAN)
    assert fixed.made_server and not fixed.made_ca
    load(fixed.cert).verify_directly_issued_by(load(fixed.ca))

    (tmp_path / "ca.key").write_bytes(b"not a key")
    fresh = certs.ensure(tmp_path, lan=LAN)
    assert fresh.made_ca and fresh.made_server
    load(fresh.cert).verify_directly_issued_by(load(fresh.ca))


def test_lan_addresses_are_private_ones_without_loopback_link_local_or_duplicates(monkeypatch):
    monkeypatch.setattr(certs, "_from_hostname", lambda: ["127.0.1.1", "192.168.1.23", "fe80::1%eth0"])
    monkeypatch.setattr(certs, "_from_ip_command",
                        lambda: ["127.0.0.1", "::1", "192.168.1.23", "10.0.0.5", "fd12::5", "0.0.0.0", "x",
                                 "100.101.1.2", "93.184.215.14", "2001:db8::7", "169.254.3.4"])
    assert certs.lan_addresses() == ["10.0.0.5", "100.101.1.2", "192.168.1.23", "fd12::5"]


def test_this_machines_addresses_are_in_the_certificate(tmp_path):
    """Found without the network: every non-loopback address `ip -j addr` lists is covered."""
    listed = [a for a in certs._from_ip_command() if certs._usable(a)]
    bundle = certs.ensure(tmp_path)
    assert set(listed) <= set(bundle.ips)
    assert {"127.0.0.1", "::1"} <= set(bundle.ips) and bundle.dns == ["localhost"]


def test_ca_route_only_over_https_when_https_is_on(tmp_path):
    from server.settings import Settings
    from server import create_app

    bundle = certs.ensure(tmp_path, lan=LAN)

    def client_with(https: str):
        settings = Settings.from_env({"DATARAILROAD_CERTS": str(tmp_path), "DATARAILROAD_HTTPS": https})
        return create_app({"TESTING": True, "MODELS_DIR": tmp_path / "none"}, settings).test_client()

    assert client_with("").get("/ca.crt", base_url="https://localhost").status_code == 404
    client = client_with("1")
    assert client.get("/ca.crt").status_code == 404  # plain http
    answer = client.get("/ca.crt", base_url="https://localhost")
    assert answer.status_code == 200
    assert answer.mimetype == "application/x-x509-ca-cert"
    assert answer.data == bundle.ca.read_bytes()
    assert b"PRIVATE KEY" not in answer.data


# ---------------------------------------------------------------------------- the front

class HttpsServer(ProductionServer):
    """The front as `make run HTTPS=1` starts it (TLS ends at HAProxy), one worker, on a
    loopback port."""

    def __init__(self, models_dir: Path, certs_dir: Path, port: int):
        self.certs_dir = certs_dir
        super().__init__(models_dir, 1, port=port, ca=certs_dir / "ca.crt", log="https_front.log",
                         env={"DATARAILROAD_HTTPS": "1", "DATARAILROAD_CERTS": str(certs_dir),
                              "DATARAILROAD_HOST": "127.0.0.1", "DATARAILROAD_PORT": str(port),
                              "DATARAILROAD_IDLE_TIMEOUT": str(IDLE), "DATARAILROAD_SEND_TIMEOUT": str(IDLE)})

    def get(self, path: str, host: str = "127.0.0.1"):
        return self.request("GET", path, timeout=30, host=host)

    def tls_socket(self) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        return self.client_context().wrap_socket(raw, server_hostname="127.0.0.1")


@pytest.fixture(scope="module")
def models(built_model) -> Path:
    """The models folder the servers serve: yolov5n, efficientnet-lite0, handpose (one per page)."""
    if not YOLOV5N_WEIGHTS.is_file():
        pytest.skip("shared yolov5n.pt is absent")
    built_model("efficientnet-lite0")
    built_model("handpose")
    return built_model("yolov5n", weights=str(YOLOV5N_WEIGHTS)).parent


@pytest.fixture(scope="module")
def https_server(models, tmp_path_factory):
    server = HttpsServer(models, tmp_path_factory.mktemp("certs"), HTTPS_PORT)
    yield server
    server.stop()


def read_all(sock) -> bytes:
    out = b""
    while chunk := sock.recv(65536):
        out += chunk
    return out


def test_the_front_serves_https_with_the_local_ca_and_keeps_its_timeouts(https_server):
    for host in ("127.0.0.1", "localhost"):
        status, _, body = https_server.get("/healthz", host)
        assert status == 200 and json.loads(body)["status"] == "ok"
    status, ctype, body = https_server.get("/ca.crt")
    assert status == 200 and ctype == "application/x-x509-ca-cert"
    assert body == (https_server.certs_dir / "ca.crt").read_bytes()

    # Issue 11's limits hold under TLS: a client that never starts the handshake, one that
    # sends no request after it, and a stalled upload are all cut off after the idle timeout
    # (the send timeout, here the same, for the handshake and the body).
    opened = time.monotonic()
    silent_tcp = socket.create_connection(("127.0.0.1", https_server.port), timeout=30)
    silent_tls = https_server.tls_socket()
    stalled = https_server.tls_socket()
    stalled.sendall(b"POST /api/v1/detect?model=yolov5n HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                    b"Content-Length: 100000\r\n\r\n\xff\xd8\xff")
    try:
        # Meanwhile the server answers others at once.
        assert https_server.get("/healthz")[0] == 200
        assert read_all(silent_tcp) == b""
        assert read_all(silent_tls) == b""
        head, _, body = read_all(stalled).partition(b"\r\n\r\n")
        waited = time.monotonic() - opened
    finally:
        for s in (silent_tcp, silent_tls, stalled):
            s.close()
    assert head.split()[1] == b"408" and json.loads(body)["error"]["code"] == "request_timeout"
    assert IDLE - 0.5 < waited < IDLE + 10, waited

    # A client that does not trust the CA fails its handshake; the server goes on serving.
    with pytest.raises(ssl.SSLCertVerificationError):
        ssl.create_default_context().wrap_socket(
            socket.create_connection(("127.0.0.1", https_server.port), timeout=30), server_hostname="127.0.0.1")
    assert https_server.get("/healthz")[0] == 200
    assert "Traceback" not in https_server.log_path.read_text()


# ---------------------------------------------------------------------------- Chromium

browser_only = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium is not installed")


def spki_hash(cert_path: Path) -> str:
    """Chromium's --ignore-certificate-errors-spki-list form: base64 SHA-256 of the key's SPKI."""
    spki = load(cert_path).public_key().public_bytes(serialization.Encoding.DER,
                                                      serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def detections(page) -> list[str]:
    return page.eval_on_selector_all("#results li", "items => items.map(li => li.dataset.label)")


# A camera that fails as named (what a missing or busy camera gives the page).
FAIL_CAMERA = """name => {
  navigator.mediaDevices.getUserMedia = () => Promise.reject(new DOMException('simulated', name));
  document.getElementById('camera-button').click();
}"""


@browser_only
def test_camera_works_on_https_with_the_certificate_pinned(pw, https_server, tmp_path):
    y4m = write_y4m(tmp_path / "bus.y4m", letterbox_rgb(load_photo("bus.jpg")))
    pin = spki_hash(https_server.certs_dir / "server.crt")
    browser = launch(pw, fake_camera_flags(y4m) + [f"--ignore-certificate-errors-spki-list={pin}"])
    try:
        context = browser.new_context()
        page, log = open_page(context, f"https://127.0.0.1:{https_server.port}/detect?model=yolov5n&backend=wasm")
        assert page.evaluate("() => window.isSecureContext") is True
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        wait_frames(page, 2)
        labels = detections(page)
        assert page.is_hidden("#camera-message")
        screenshot(page, "https_detect_camera")

        messages = {}
        for name in ("NotFoundError", "OverconstrainedError", "NotReadableError", "AbortError"):
            # The page may be showing another message (on a loaded machine, the offer of the
            # faster server backend): cleared first, so the one read is the camera's.
            page.eval_on_selector("#camera-message", "el => { el.hidden = true; el.textContent = ''; }")
            page.evaluate(FAIL_CAMERA, name)
            page.wait_for_function("() => !document.getElementById('camera-message').hidden")
            messages[name] = page.inner_text("#camera-message")
        context.close()
    finally:
        browser.close()
    assert labels.count("bus") >= 1 and labels.count("person") >= 3, labels
    assert log.outside_requests == [] and log.console_errors == []
    assert "No camera" in messages["NotFoundError"] and "No camera" in messages["OverconstrainedError"]
    assert "busy" in messages["NotReadableError"] and "Close" in messages["AbortError"]


@pytest.fixture(scope="module")
def http_server(models):
    """The app over plain http on a loopback port (as `make run` without HTTPS)."""
    from werkzeug.serving import make_server

    from server import create_app

    server = make_server("127.0.0.1", HTTP_PORT, create_app({"MODELS_DIR": models}), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    thread.join(timeout=5)


def open_on_demo_test(context, url: str):
    """Like harness.browser.open_page, with demo.test (mapped to 127.0.0.1) counted as local."""
    outside, errors = [], []
    page = context.new_page()

    def guard(route):
        if urlparse(route.request.url).hostname in ("demo.test", "127.0.0.1") \
                or route.request.url.startswith(("data:", "blob:")):
            route.fallback()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(url)
    return page, outside, errors


@browser_only
def test_http_origin_that_is_not_localhost_explains_the_insecure_context_and_denial(pw, http_server):
    rules = "MAP demo.test 127.0.0.1, MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"
    # A camera, and no fake "allow" answer: a camera request from a secure page is denied.
    browser = launch(pw, ["--use-fake-device-for-media-stream", f"--host-resolver-rules={rules}"])
    origin = f"http://demo.test:{HTTP_PORT}"
    try:
        context = browser.new_context()
        page, outside, errors = open_on_demo_test(context, f"{origin}/detect?model=yolov5n&backend=wasm")
        assert page.evaluate("() => window.isSecureContext") is False
        page.wait_for_selector("#camera-message:not([hidden])", timeout=300_000)
        detect_message = page.inner_text("#camera-message")
        screenshot(page, "http_demo_test_insecure_camera")

        page.goto(f"{origin}/classify?model=efficientnet-lite0&backend=wasm")
        page.wait_for_selector("#model-status[data-state='ready']", timeout=300_000)
        page.click("#camera-button")  # the classify page's camera snapshot
        page.wait_for_selector("#camera-message:not([hidden])", timeout=60_000)
        classify_message = page.inner_text("#camera-message")

        page.goto(f"{origin}/hands?backend=wasm")
        page.wait_for_selector("#camera-message:not([hidden])", timeout=300_000)
        hands_message = page.inner_text("#camera-message")

        page.goto(f"http://127.0.0.1:{HTTP_PORT}/detect?model=yolov5n&backend=wasm")  # secure: loopback
        page.wait_for_selector("#camera-message:not([hidden])", timeout=300_000)
        denied_message = page.inner_text("#camera-message")
        context.close()
    finally:
        browser.close()
    assert "secure page" in detect_message
    assert f"https://demo.test:{HTTP_PORT}/detect?model=yolov5n&backend=wasm" in detect_message
    assert f"http://localhost:{HTTP_PORT}/detect" in detect_message
    assert f"https://demo.test:{HTTP_PORT}/classify?model=efficientnet-lite0" in classify_message
    assert f"https://demo.test:{HTTP_PORT}/hands?backend=wasm" in hands_message
    assert "denied" in denied_message and "Allow the camera" in denied_message
    assert outside == [] and errors == []
