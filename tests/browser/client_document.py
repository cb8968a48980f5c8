"""A Client ID Metadata Document served over HTTPS from 127.0.0.1, for the browser tests: a CA and a
server certificate made on the spot with ``cryptography`` (the gateway trusts the CA through
``TOOLMESH_EGRESS_CA_FILE``), and a server answering the document at one path."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

DOCUMENT_PATH = "/oauth/client.json"


@dataclass(frozen=True)
class Authority:
    """Files of a CA and of a certificate it signed for 127.0.0.1."""

    ca: Path
    cert: Path
    key: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def make_authority(folder: Path) -> Authority:
    """A new CA and a server certificate for ``127.0.0.1`` signed by it, written under ``folder``."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("toolmesh test CA"))
        .issuer_name(_name("toolmesh test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("127.0.0.1"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    folder.mkdir(parents=True, exist_ok=True)
    found = Authority(folder / "ca.pem", folder / "server.pem", folder / "server-key.pem")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return found


@dataclass
class DocumentServer:
    """The HTTPS server of one document: its URL (the client's id) and how often it was fetched."""

    url: str
    document: dict[str, Any] = field(default_factory=dict)
    fetches: int = 0


@contextlib.contextmanager
def serving_document(authority: Authority) -> Iterator[DocumentServer]:
    """An HTTPS server on a free port of 127.0.0.1 answering ``served.document`` at ``DOCUMENT_PATH``
    (set the document before the gateway fetches it)."""
    holder: list[DocumentServer] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != DOCUMENT_PATH:
                self.send_error(404)
                return
            holder[0].fetches += 1
            body = json.dumps(holder[0].document).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(authority.cert, authority.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    holder.append(DocumentServer(f"https://127.0.0.1:{server.server_port}{DOCUMENT_PATH}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
