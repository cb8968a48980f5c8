"""Clients named by the URL of a Client ID Metadata Document: the gateway fetches it under the egress
rules (no private address unless the operator opens one; refused before connecting), keeps only a
small, prompt, self-naming document of a public client, and signs such a client in end to end."""

from __future__ import annotations

import datetime
import ipaddress
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.harness import running_system
from tests.oauth_client_flow import REDIRECT, Client, authorize, consented_code, exchange, mcp_status, tokens_of

pytestmark = pytest.mark.integration
SLOW_SECONDS = 12.0
"""How long the slow document takes: well past the gateway's 5 s bound."""


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that is its own CA (the test's ``TOOLMESH_EGRESS_CA_FILE``), and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolmesh test documents")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "documents.pem", directory / "documents.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@dataclass
class Documents:
    """An HTTPS server on 127.0.0.1 serving client documents; it records every path it was asked for."""

    base: str
    ca_file: Path
    seen: list[str] = field(default_factory=list)
    connections: int = 0

    def url(self, name: str) -> str:
        return f"{self.base}/clients/{name}.json"

    def body(self, name: str) -> bytes | None:
        url = self.url(name)
        good = {"client_id": url, "client_name": f"{name} app", "redirect_uris": [REDIRECT]}
        documents = {
            "good": good,
            "nameless": {**good, "client_id": f"{self.base}/clients/other.json"},
            "private": {**good, "token_endpoint_auth_method": "client_secret_basic"},
            "secretive": {**good, "client_secret": "s3cret"},
            "large": {**good, "client_uri": "https://app.example/" + "x" * 6000},
            "open_redirect": {**good, "redirect_uris": ["http://evil.example/cb"]},
            "slow": good,
        }
        document = documents.get(name)
        return json.dumps(document).encode() if document is not None else None


@pytest.fixture
def documents(tmp_path: Path) -> Iterator[Documents]:
    cert, key = _certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    holder: list[Documents] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served = holder[0]
            served.seen.append(self.path)
            name = self.path.removeprefix("/clients/").removesuffix(".json")
            body = served.body(name)
            if name == "slow":
                time.sleep(SLOW_SECONDS)
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    class Server(ThreadingHTTPServer):
        def get_request(self) -> tuple[socket.socket, object]:
            holder[0].connections += 1
            return super().get_request()

    server = Server(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    holder.append(Documents(f"https://127.0.0.1:{server.server_address[1]}", cert))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()


def _refused(response: httpx.Response) -> None:
    assert response.status_code == 400 and "location" not in response.headers, response.text


async def test_a_document_on_a_private_address_is_not_even_fetched(
    nats_url: str, database_url: str, documents: Documents
) -> None:
    async with (
        running_system(nats_url, database_url, egress_ca_file=documents.ca_file) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        for host in ("127.0.0.1", "localhost"):
            url = documents.url("good").replace("127.0.0.1", host)
            _refused(await authorize(http, Client(url)))
        assert documents.seen == [] and documents.connections == 0


async def test_an_allowed_document_signs_its_client_in_and_bad_ones_are_refused(
    nats_url: str, database_url: str, documents: Documents
) -> None:
    async with (
        running_system(
            nats_url,
            database_url,
            egress_ca_file=documents.ca_file,
            upstream_private_networks=("127.0.0.0/8",),
        ) as system,
        httpx.AsyncClient(base_url=str(system.api.base_url), timeout=30) as http,
    ):
        client = Client(documents.url("good"))
        code = await consented_code(http, client, system.settings.admin_token or "")
        tokens = tokens_of(await exchange(http, client, code))
        assert await mcp_status(http, tokens.access) == 200
        assert documents.connections > 0
        apps = (await system.api.get("/api/v1/auth/apps")).json()["apps"]
        assert [(a["client_id"], a["client_name"]) for a in apps] == [(client.client_id, "good app")]
        _refused(await authorize(http, client, redirect_uri="http://127.0.0.1:33418/elsewhere"))

        for name in ("nameless", "private", "secretive", "large", "open_redirect", "missing"):
            _refused(await authorize(http, Client(documents.url(name))))
            assert f"/clients/{name}.json" in documents.seen, name

        started = time.monotonic()
        _refused(await authorize(http, Client(documents.url("slow"))))
        assert time.monotonic() - started < SLOW_SECONDS - 2
