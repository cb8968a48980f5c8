"""Upstream hygiene through the real system: a STDIO server's environment, TLS for remote upstreams."""

from __future__ import annotations

import json
import sys

import pytest

from tests.harness import RoleProcess, running_system, settings_env
from tests.peers.everything import everything_command

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"


async def test_stdio_server_gets_its_config_env_and_no_toolmesh_variables(nats_url: str, database_url: str) -> None:
    spec = everything_command("stdio")
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        # The session-worker as a deployment runs it: every toolmesh setting and secret in its environment.
        worker = RoleProcess("session-worker", system.settings)
        worker_env = settings_env(system.settings)
        try:
            config = {"command": spec.command, "args": spec.args, "env": {**spec.env, "GIVEN_BY_CONFIG": "visible"}}
            created = await system.register("everything", "STDIO", config)
            await system.wait_connected(created["id"])
            response = await system.api.post("/api/v1/tools/call", json={"name": "everything.get-env"})
            assert response.status_code == 200, response.text
            text = response.json()["content"][0]["text"]
        finally:
            assert worker.terminate() == 0, worker.stderr_text()[-3000:]
    seen = json.loads(text)
    assert seen["GIVEN_BY_CONFIG"] == "visible"
    assert seen["NODE_OPTIONS"] == spec.env["NODE_OPTIONS"]
    assert "PATH" in seen
    leaked = sorted(k for k in seen if k.startswith(("TOOLMESH_", "MCP_")))
    assert leaked == []
    secrets = [v for k, v in worker_env.items() if k.endswith(("_URL", "_TOKEN", "_KEY")) and v]
    assert len(secrets) == 4  # NATS URL, database URL, admin token, credential key
    for secret in secrets:
        assert secret not in text


async def test_plain_http_upstreams_need_loopback_or_allow_insecure(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        remote = {"name": "remote", "transport_type": "SSE", "connection_config": {"url": "http://mcp.example.com/sse"}}
        refused = await system.api.post(SERVERS, json=remote)
        assert refused.status_code == 422
        body = refused.json()
        assert body["error_code"] == "VALIDATION_ERROR"
        (error,) = body["detail"]
        assert error["loc"] == ["body", "connection_config", "url"]
        assert "https://" in error["msg"] and "allow_insecure" in error["msg"]

        health = {**remote, "connection_config": {"url": "https://mcp.example.com/sse"}}
        refused = await system.api.post(SERVERS, json={**health, "health_check_url": "http://mcp.example.com/health"})
        assert refused.status_code == 422
        assert [e["loc"] for e in refused.json()["detail"]] == [["body", "health_check_url"]]

        allowed = {**remote, "auto_connect": False, "allow_insecure": True}
        accepted = await system.api.post(SERVERS, json=allowed)
        assert accepted.status_code == 201, accepted.text
        loopback = {"name": "local", "transport_type": "HTTP", "auto_connect": False}
        local = await system.api.post(
            SERVERS, json={**loopback, "connection_config": {"base_url": "http://127.0.0.1:9/"}}
        )
        assert local.status_code == 201, local.text


async def test_nul_an_upstream_writes_cannot_stop_the_projection(nats_url: str, database_url: str) -> None:
    """A STDIO server that writes NUL on stderr and exits: its error is recorded (its stderr only in the log)."""
    script = "import sys; sys.stderr.write('bad\\x00byte\\n'); sys.exit(3)"
    async with running_system(nats_url, database_url, roles=["gateway", "projector", "session-worker"]) as system:
        created = await system.register("nul-stderr", "STDIO", {"command": sys.executable, "args": ["-c", script]})
        detail = await system.wait_status(created["id"], "ERROR")
        assert "process exited with code 3" in detail["error_message"]
        assert "bad" not in detail["error_message"]
        after = await system.register("after", "STDIO", {"command": "srv"}, auto_connect=False)
        assert (await system.server(after["id"]))["status"] == "DISCONNECTED"
