"""NATS security: the embedded server requires its generated credentials and listens on loopback;
roles connect with user/password, a token, or TLS from Settings; the NATS API answers through them.
The deploy config's per-role users are checked in test_nats_deploy_roles.py."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import json
import signal
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.harness import ADMIN_TOKEN, eventually, running_system
from toolmesh.errors import BackendUnavailable
from toolmesh.platform import processes
from toolmesh.platform.bus.connection import connect_nats, nats_options
from toolmesh.platform.config import Settings
from toolmesh_cli.embedded import EmbeddedNats, EmbeddedServerError, free_port
from toolmesh_cli.embedded.nats import nats_server_binary

pytestmark = pytest.mark.integration
REFUSED = r"(?i)authorization violation"
ONCE = {"allow_reconnect": False, "max_reconnect_attempts": 0}
"""Connect options for one attempt (a server not up yet is not waited for)."""


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_embedded_nats_requires_its_generated_credentials(tmp_path: Path) -> None:
    async with EmbeddedNats(tmp_path / "nats") as server:
        with pytest.raises(BackendUnavailable, match=REFUSED):
            await connect_nats(server.address, "anonymous", timeout=3, allow_reconnect=False)
        wrong = f"nats://toolmesh:not-the-password@127.0.0.1:{server.port}"
        with pytest.raises(BackendUnavailable, match=REFUSED) as refused:
            await connect_nats(wrong, "wrong-password", timeout=3, allow_reconnect=False)
        assert "not-the-password" not in str(refused.value)
        assert f"NATS at nats://***@127.0.0.1:{server.port} refused" in str(refused.value)  # as mask_url shows it
        with pytest.raises(BackendUnavailable, match="refused the credentials"):  # a role fails, never loops
            await asyncio.wait_for(connect_nats(server.address, "role-without-credentials"), 30)
        nc = await nats.connect(server.url, connect_timeout=5)
        await nc.close()
        assert _mode(server.credentials_path) == 0o600 and _mode(server.data_dir / "nats.conf") == 0o600
        password = json.loads(server.credentials_path.read_text())["password"]
        assert server.url == f"nats://toolmesh:{password}@127.0.0.1:{server.port}"
        await server.stop()
        await server.start()
        assert server.password == password  # clients configured once keep working after a restart


def test_embedded_nats_listens_on_loopback_only(tmp_path: Path) -> None:
    for host in ("0.0.0.0", "192.0.2.7", "::"):
        with pytest.raises(EmbeddedServerError, match="loopback"):
            EmbeddedNats(tmp_path, host=host)


async def test_every_role_connects_with_user_and_password_from_settings(
    embedded_nats: EmbeddedNats, database_url: str
) -> None:
    overrides = {"nats_user": embedded_nats.user, "nats_password": embedded_nats.password}
    async with running_system(embedded_nats.address, database_url, **overrides) as system:
        nc = await nats.connect(embedded_nats.url, connect_timeout=5)
        try:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            reply = await nc.request("toolmesh.api.v1.aggregator.state", b"{}", timeout=10, headers=headers)
            assert json.loads(reply.data)["ok"] is True
        finally:
            await nc.close()
        assert (await system.api.get("/readyz")).status_code == 200


def _certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (it is its own CA) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "toolmesh test")])
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
    cert_path, key_path = directory / "server.pem", directory / "server.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@contextlib.asynccontextmanager
async def token_tls_server(directory: Path, token: str) -> AsyncIterator[tuple[str, Path]]:
    """A nats-server that requires TLS and a token; yields its URL and the CA file."""
    cert, key = _certificate(directory)
    port = free_port()
    config = directory / "nats.conf"
    config.write_text(
        f'listen: "127.0.0.1:{port}"\n'
        f'authorization {{ token: "{token}" }}\n'
        f'tls {{ cert_file: "{cert}"\n key_file: "{key}" }}\n'
    )
    with (directory / "nats.log").open("ab") as log:
        process = processes.spawn([str(nats_server_binary()), "-c", str(config)], stdout=log, cwd=directory)
        try:
            url = f"nats://127.0.0.1:{port}"
            settings = Settings(nats_token=token, nats_tls_ca_file=cert)

            async def answers() -> bool:
                try:
                    nc = await connect_nats(url, "probe", timeout=2, **ONCE, **nats_options(settings))
                except BackendUnavailable:
                    return False
                await nc.close()
                return True

            await eventually(answers, timeout=15, what="the TLS nats-server")
            yield url, cert
        finally:
            await processes.stop(process, signal.SIGTERM, 10)


async def test_token_and_tls_from_settings(tmp_path: Path) -> None:
    async with token_tls_server(tmp_path, "s3cret-token") as (url, ca):
        good = Settings(nats_token="s3cret-token", nats_tls_ca_file=ca)
        nc = await connect_nats(url, "tls-client", timeout=5, **nats_options(good))
        assert nc.is_connected and nc.connected_url is not None
        await nc.close()
        wrong_token = nats_options(Settings(nats_token="wrong", nats_tls_ca_file=ca))
        with pytest.raises(BackendUnavailable, match=REFUSED):
            await connect_nats(url, "wrong-token", timeout=3, allow_reconnect=False, **wrong_token)
        unknown_ca = nats_options(Settings(nats_token="s3cret-token"))
        with pytest.raises(BackendUnavailable, match=r"(?i)certificate"):
            await connect_nats(url, "unknown-ca", timeout=3, allow_reconnect=False, **unknown_ca)
