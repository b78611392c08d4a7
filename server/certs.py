"""The certificates of `make run HTTPS=1` (docs/phones-offline.md).

Browsers give the camera only to secure pages: https, or http on localhost. A phone on the
LAN reaches this machine by its address, so it needs https there, with a certificate it
trusts. On first use we make a small certificate authority (the phone installs its ``ca.crt``
once) and a server certificate it signs for localhost, 127.0.0.1, ::1 and this machine's LAN
addresses. Both are kept in a git-ignored folder (DATARAILROAD_CERTS, default ./certs) and
reused; the server certificate is made again when the addresses change or it nears its end,
the CA is kept (so the phone's trust stays valid).

The crypto is the ``cryptography`` package's (EC P-256 keys, its x509 builder): nothing here
is hand-rolled. ``python -m server.certs`` makes or refreshes them and says how to trust the CA.
"""
from __future__ import annotations

import argparse
import datetime as dt
import ipaddress
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from flask import Blueprint, abort, request, send_file

from . import config
from .settings import load

CA_DAYS = 3650       # the CA a phone trusts: long-lived, so it is installed once
SERVER_DAYS = 365    # under Apple's 825-day limit for TLS server certificates
RENEW_DAYS = 30      # made again this long before its end
FILES = ("ca.crt", "ca.key", "server.crt", "server.key")
# All the CA may ever sign for (X.509 name constraints, checked by TLS clients): localhost and
# private networks. A phone that trusts it then trusts nothing public, even if ca.key leaked.
PERMITTED_NETWORKS = tuple(ipaddress.ip_network(n) for n in (
    "127.0.0.0/8", "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10",  # 100.64/10: CGNAT, VPNs
    "::1/128", "fc00::/7"))


# ---------------------------------------------------------------------------- names

def _usable(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """A LAN address a phone can put in a URL and the CA may sign for: private, not loopback
    (listed apart), not link-local (a certificate cannot hold its %zone)."""
    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return None
    if ip.is_loopback or not any(ip in net for net in PERMITTED_NETWORKS):
        return None
    return ip


def _from_hostname() -> list[str]:
    try:
        return [info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None)]
    except OSError:
        return []


def _from_ip_command() -> list[str]:
    """Interface addresses from iproute2 (`ip -j addr`), where there is one: getaddrinfo
    only knows what /etc/hosts or DNS say about the hostname."""
    try:
        out = subprocess.run(["ip", "-j", "addr"], capture_output=True, text=True, timeout=5, check=True).stdout
        return [a["local"] for link in json.loads(out) for a in link.get("addr_info", []) if "local" in a]
    except (OSError, subprocess.SubprocessError, ValueError, KeyError, TypeError):
        return []


def lan_addresses() -> list[str]:
    """This machine's own addresses a LAN client can reach, found without the network."""
    found = {ip for a in _from_hostname() + _from_ip_command() if (ip := _usable(a))}
    return [str(ip) for ip in sorted(found, key=lambda ip: (ip.version, ip))]


def wanted_names(lan: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) the server certificate must hold."""
    lan = lan_addresses() if lan is None else lan
    ips = ["127.0.0.1", "::1"] + [a for a in lan if a not in ("127.0.0.1", "::1")]
    return ["localhost"], ips


def names_of(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    """(DNS names, IP addresses) in a certificate's subjectAltName."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return [], []
    return (san.get_values_for_type(x509.DNSName),
            [str(ip) for ip in san.get_values_for_type(x509.IPAddress)])


def _same(a: tuple[list[str], list[str]], b: tuple[list[str], list[str]]) -> bool:
    return (set(a[0]), {ipaddress.ip_address(i) for i in a[1]}) == \
           (set(b[0]), {ipaddress.ip_address(i) for i in b[1]})


# ---------------------------------------------------------------------------- making

def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def make_ca(now: dt.datetime | None = None) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    now, key = now or _now(), _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "DataRailroad"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"DataRailroad local CA ({socket.gethostname()})")])
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.NameConstraints(
                permitted_subtrees=[x509.DNSName("localhost")] + [x509.IPAddress(n) for n in PERMITTED_NETWORKS],
                excluded_subtrees=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_server(ca: x509.Certificate, ca_key, dns: list[str], ips: list[str],
                now: dt.datetime | None = None) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    now, key = now or _now(), _new_key()
    alt = [x509.DNSName(d) for d in dns] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    ca_ski = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"DataRailroad on {socket.gethostname()}")]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1)).not_valid_after(now + dt.timedelta(days=SERVER_DAYS))
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


# ---------------------------------------------------------------------------- files

def _write(path: Path, data: bytes, mode: int) -> None:
    """Whole or not at all (a server starting meanwhile never reads half a file); a key is
    created 0600 from the start, never readable by others even for a moment."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, mode)  # the umask may have narrowed a certificate's 0644
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _save(folder: Path, stem: str, cert: x509.Certificate, key) -> None:
    _write(folder / f"{stem}.key", key.private_bytes(serialization.Encoding.PEM,
                                                     serialization.PrivateFormat.PKCS8,
                                                     serialization.NoEncryption()), 0o600)
    _write(folder / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM), 0o644)


def _load(folder: Path, stem: str):
    """(certificate, key) of a pair that loads and matches, else None."""
    try:
        cert = x509.load_pem_x509_certificate((folder / f"{stem}.crt").read_bytes())
        key = serialization.load_pem_private_key((folder / f"{stem}.key").read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        return None
    return cert, key


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
        return True
    except (ValueError, TypeError, InvalidSignature):
        return False


def _fresh(cert: x509.Certificate, now: dt.datetime) -> bool:
    return cert.not_valid_after_utc - now > dt.timedelta(days=RENEW_DAYS)


@dataclass(frozen=True)
class Bundle:
    ca: Path            # what a phone installs (PEM)
    cert: Path          # gunicorn's certfile
    key: Path           # gunicorn's keyfile
    dns: list[str]
    ips: list[str]
    made_ca: bool
    made_server: bool


def ensure(folder: Path | None = None, lan: list[str] | None = None, now: dt.datetime | None = None) -> Bundle:
    """The CA and the server certificate in ``folder``: reused when still good, else made.
    The server certificate is made again when its names differ from this machine's now, when
    it ends within RENEW_DAYS, or when it is not the current CA's."""
    folder, now = folder or load().certs, now or _now()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    dns, ips = wanted_names(lan)
    made_ca = made_server = False
    ca = _load(folder, "ca")
    if ca is None or not _fresh(ca[0], now):
        ca = make_ca(now)
        _save(folder, "ca", *ca)
        made_ca = True
    server = _load(folder, "server")
    if (server is None or not _fresh(server[0], now) or not _same(names_of(server[0]), (dns, ips))
            or not _signed_by(server[0], ca[0])):
        server = make_server(*ca, dns, ips, now)
        _save(folder, "server", *server)
        made_server = True
    return Bundle(folder / "ca.crt", folder / "server.crt", folder / "server.key", dns, ips, made_ca, made_server)


def ca_fingerprint(path: Path) -> str:
    """SHA-256 of the CA certificate, as phones show it, to check the one installed is ours."""
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    return cert.fingerprint(hashes.SHA256()).hex(":").upper()


# ---------------------------------------------------------------------------- route

bp = Blueprint("certs", __name__)


@bp.get("/ca.crt")
def ca_certificate():
    """The CA for a phone to install, only while the server runs with its certificate
    (the app's settings: DATARAILROAD_HTTPS=1; an https request). The MIME type makes iOS
    offer the profile."""
    settings = config.settings()
    path = settings.certs / "ca.crt"
    if not settings.https or not request.is_secure or not path.is_file():
        abort(404)
    return send_file(path, mimetype="application/x-x509-ca-cert", download_name="datarailroad-ca.crt", max_age=0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.certs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="where the files live (default: DATARAILROAD_CERTS or ./certs)")
    parser.add_argument("--host", default="0.0.0.0", help="the address the server will listen on (for the advice printed)")
    parser.add_argument("--port", default=load().port, help="for the URLs printed (default: DATARAILROAD_PORT)")
    args = parser.parse_args(argv)
    bundle = ensure(args.dir)
    said = {True: "made", False: "reused"}
    print(f"HTTPS certificates in {bundle.cert.parent}: CA {said[bundle.made_ca]}, "
          f"server certificate {said[bundle.made_server]} for {', '.join(bundle.dns + bundle.ips)}")
    print(f"CA to trust on a phone (README \"Phones on the LAN\"): {bundle.ca}\n"
          f"  SHA-256 {ca_fingerprint(bundle.ca)}")
    lan = [ip for ip in bundle.ips if ip not in ("127.0.0.1", "::1")]
    reachable = lan if args.host in ("0.0.0.0", "::") else [ip for ip in lan if ip == args.host]
    if not lan:
        print("  no private LAN address found: the certificate covers this computer only")
    elif not reachable:
        print(f"  the server listens on {args.host}, not on the LAN: run with HOST=0.0.0.0 for phones")
    for ip in reachable:
        host = f"[{ip}]" if ":" in ip else ip
        print(f"  from a phone: https://{host}:{args.port}/  (the CA: https://{host}:{args.port}/ca.crt)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
