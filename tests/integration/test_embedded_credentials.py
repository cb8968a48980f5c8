"""The embedded Postgres and NATS are private: a local process without the generated credentials
is refused (over TCP and the unix socket), the secrets are 0600 files in 0700 directories, and a
cluster made with ``trust`` authentication is given a password on its next start, data kept."""

from __future__ import annotations

import stat
from pathlib import Path

import asyncpg
import nats
import pytest
from nats.errors import Error as NatsError

from toolmesh_cli.embedded import EmbeddedNats, EmbeddedPostgres

pytestmark = pytest.mark.integration
TRUST_HBA = "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _refused_without_password(postgres: EmbeddedPostgres) -> None:
    """Every way in without the password fails authentication (not a timeout, not a refused socket)."""
    attempts = [
        {"host": "127.0.0.1", "port": postgres.port, "user": "postgres"},
        {"host": "127.0.0.1", "port": postgres.port, "user": "postgres", "password": "guess"},
        {"host": str(postgres.socket_dir), "port": postgres.port, "user": "postgres"},
    ]
    for attempt in attempts:
        with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError, match="password authentication failed"):
            await asyncpg.connect(database="postgres", timeout=10, **attempt)


async def test_embedded_postgres_refuses_a_local_process_without_the_password(tmp_path: Path) -> None:
    async with EmbeddedPostgres(tmp_path / "pg") as postgres:
        await _refused_without_password(postgres)
        conn = await asyncpg.connect(postgres.url, timeout=10)
        try:
            assert await conn.fetchval("SELECT current_user") == "postgres"
            hba = await conn.fetch("SELECT type, auth_method FROM pg_hba_file_rules")
        finally:
            await conn.close()
        assert {row["auth_method"] for row in hba} == {"scram-sha-256"}
        assert {row["type"] for row in hba} == {"local", "host"}
        assert postgres.password is not None and postgres.password in postgres.url
        assert postgres.password not in postgres.address
        assert postgres.password_path.read_text().strip() == postgres.password
        assert _mode(postgres.password_path) == 0o600 and _mode(postgres.data_dir) == 0o700
        assert postgres.password not in postgres.log_path.read_text()


async def test_a_trust_cluster_gets_a_password_on_start_and_keeps_its_data(tmp_path: Path) -> None:
    data_dir = tmp_path / "pg"
    async with EmbeddedPostgres(data_dir) as postgres:
        conn = await asyncpg.connect(postgres.url, timeout=10)
        try:
            await conn.execute("CREATE TABLE kept (value text); INSERT INTO kept VALUES ('before')")
            await conn.execute("ALTER ROLE postgres PASSWORD NULL")  # as `initdb --auth=trust` left it
        finally:
            await conn.close()
    (data_dir / "pg_hba.conf").write_text(TRUST_HBA)
    (data_dir / "superuser.password").unlink()

    async with EmbeddedPostgres(data_dir) as upgraded:
        await _refused_without_password(upgraded)
        conn = await asyncpg.connect(upgraded.url, timeout=10)
        try:
            assert await conn.fetchval("SELECT value FROM kept") == "before"
        finally:
            await conn.close()
        assert _mode(upgraded.password_path) == 0o600
        password = upgraded.password
    async with EmbeddedPostgres(data_dir) as restarted:
        assert restarted.password == password  # a URL handed out once keeps working after a restart
        conn = await asyncpg.connect(restarted.url, timeout=10)
        await conn.close()


async def test_embedded_nats_refuses_a_client_without_credentials_and_keeps_them_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "nats"
    data_dir.mkdir(mode=0o755)
    async with EmbeddedNats(data_dir) as server:
        with pytest.raises(NatsError, match=r"(?i)authorization violation"):
            await nats.connect(server.address, connect_timeout=3, allow_reconnect=False)
        assert _mode(server.data_dir) == 0o700  # tightened even when it existed before
        assert _mode(server.credentials_path) == 0o600 and _mode(server.data_dir / "nats.conf") == 0o600


CANARIES = {
    "TOOLMESH_ADMIN_TOKEN": "canary-owner-token-6b1f0e",
    "MCP_CREDENTIAL_KEY": "canary-credential-key-9d2c4a",
    "GITHUB_TOKEN": "canary-upstream-secret-3e7a51",  # an upstream secret kept for ${VAR}
}


def _environment_of(pid: int) -> str:
    return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")


async def test_embedded_servers_inherit_no_secret_of_toolmesh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded Postgres (its own system user as root) and NATS start with a minimal environment:
    the Postgres superuser (``COPY ... FROM PROGRAM``) or a compromised server learns neither the owner
    token, nor the credential keys, nor an upstream secret of the process that started it."""
    for name, value in CANARIES.items():
        monkeypatch.setenv(name, value)
    async with EmbeddedPostgres(tmp_path / "pg") as postgres, EmbeddedNats(tmp_path / "nats") as server:
        conn = await asyncpg.connect(postgres.url, timeout=10)
        try:
            await conn.execute("CREATE TEMP TABLE seen (line text); COPY seen FROM PROGRAM 'env'")
            lines = [row["line"] for row in await conn.fetch("SELECT line FROM seen")]
        finally:
            await conn.close()
        assert server.pid is not None
        seen = "\n".join(lines) + _environment_of(server.pid)
    assert lines, "the Postgres environment could not be read"
    assert not [value for value in CANARIES.values() if value in seen]
