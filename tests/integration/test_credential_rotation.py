"""Credentials at rest: no plaintext secret in the read model, and a credential-key rotation that
re-encrypts every row with nothing lost (the server reconnects with its secret under the new key)."""

from __future__ import annotations

import json

import pytest

from tests.harness import System, eventually, running_system
from tests.peers.launch import launch_peer
from toolmesh.credentials import CredentialBox

pytestmark = pytest.mark.integration
SECRET = "vault-token-7f3a9c"
OLD_KEY, NEW_KEY = "the old credential key", "the new credential key"


async def secret_seen_by_peer(system: System, name: str) -> str | None:
    """What the peer's process sees in $VAULT, or None while the call is not served (yet)."""
    response = await system.api.post(
        "/api/v1/tools/call", json={"name": f"{name}.getenv", "arguments": {"name": "VAULT"}}
    )
    return str(response.json()["content"][0]["text"]) if response.status_code == 200 else None


async def test_rotation_reseals_every_config_and_nothing_is_lost(nats_url: str, database_url: str) -> None:
    async with launch_peer("stdio") as peer:
        config = {**peer.config, "env": {"VAULT": SECRET}}
        async with running_system(nats_url, database_url, credential_key=OLD_KEY) as system:
            created = await system.register("vault", "STDIO", config)
            await system.wait_connected(created["id"])
            assert await secret_seen_by_peer(system, "vault") == SECRET
            rows = await system.backends.db.fetch("SELECT * FROM mcp.external_servers")
            raw = json.dumps([dict(r) for r in rows], default=str)
            assert SECRET not in raw and "VAULT" in raw  # the masked copy names the variable, never its value
            events = await system.backends.db.fetch("SELECT details::text AS d FROM mcp.audit_log")
            assert all(SECRET not in e["d"] for e in events)
            old_sealed = rows[0]["connection_config"]["sealed"]
            assert old_sealed.startswith(CredentialBox(OLD_KEY).key_id + ":")

        async with running_system(
            nats_url, database_url, credential_key=NEW_KEY, credential_previous_keys=OLD_KEY
        ) as system:
            report = await system.api.post("/api/v1/aggregator/credentials/reseal")
            assert report.status_code == 200 and report.json() == {
                "resealed": 1,
                "total": 1,
                "grants_resealed": 0,
                "grants_total": 0,
                "key_id": CredentialBox(NEW_KEY).key_id,
            }
            again = (await system.api.post("/api/v1/aggregator/credentials/reseal")).json()
            assert again["resealed"] == 0
            sealed = await system.backends.db.fetchval("SELECT connection_config->>'sealed' FROM mcp.external_servers")
            assert sealed.startswith(CredentialBox(NEW_KEY).key_id + ":") and SECRET not in sealed
            history = await system.api.get("/api/v1/audit", params={"event": "server.config_resealed"})
            assert history.json()["entries"][0]["server_name"] == "vault"

        async with running_system(nats_url, database_url, credential_key=NEW_KEY) as system:  # the old key is gone
            await system.wait_connected(created["id"])

            async def reconnected_with_secret() -> bool:
                return await secret_seen_by_peer(system, "vault") == SECRET

            assert await eventually(reconnected_with_secret, timeout=30, what="the peer to see its secret")


async def test_only_the_owner_may_reseal(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url) as system:
        key = await system.create_key("ops", "admin", namespace="default")
        denied = await system.api.post(
            "/api/v1/aggregator/credentials/reseal", headers={"Authorization": f"Bearer {key['token']}"}
        )
        assert denied.status_code == 403 and denied.json()["error_code"] == "FORBIDDEN"
