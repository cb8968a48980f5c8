"""Credentials: sealed at rest, expanded only at connect time, never in a response, event or log."""

from __future__ import annotations

import io
import logging
import os

import pytest

from tests.harness import running_system
from tests.peers.launch import launch_peer
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.contracts.rpc import CallToolRpc
from toolmesh.platform.bus.requests import ask_owner
from toolmesh.platform.telemetry import configure_logging

pytestmark = pytest.mark.integration
LITERAL = "literal-secret-9f8e7d"
EXPANDED = "expanded-secret-1a2b3c"


async def _stream_bytes(js) -> bytes:  # type: ignore[no-untyped-def]
    info = await js.stream_info(EVENTS_STREAM)
    chunks = []
    for seq in range(info.state.first_seq, info.state.last_seq + 1):
        msg = await js.get_msg(EVENTS_STREAM, seq)
        chunks.append(msg.data or b"")
        chunks.append(repr(msg.headers).encode())
    return b"\n".join(chunks)


async def test_secrets_never_leave_the_session_worker(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TM_TEST_SECRET", EXPANDED)
    log_output = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("DEBUG", stream=log_output)  # the handler every toolmesh process installs
    bodies: list[str] = []
    async with running_system(nats_url, database_url, expandable_variables=("TM_TEST_*",)) as system:
        async with launch_peer("stdio") as stdio, launch_peer("http") as http:
            config = {**stdio.config, "env": {"DEMO_TOKEN": "${TM_TEST_SECRET}", "OTHER": LITERAL}}
            first = await system.register("secret-stdio", "STDIO", config)
            second = await system.register(
                "secret-http",
                "HTTP",
                {"base_url": f"{http.url}?token={LITERAL}", "headers": {"Authorization": f"Bearer {LITERAL}"}},
            )
            for created in (first, second):
                bodies.append(repr(created))
                await system.wait_connected(created["id"])
                response = await system.api.get(f"/api/v1/aggregator/servers/{created['id']}")
                bodies.append(response.text)
            detail = (await system.api.get(f"/api/v1/aggregator/servers/{first['id']}")).json()
            assert detail["connection_config"]["env"] == {"DEMO_TOKEN": "***", "OTHER": "***"}
            bodies.append((await system.api.get("/api/v1/aggregator/servers", params={"include_tools": True})).text)

            # ${VAR} was expanded for the upstream process, from the worker's environment.
            result = await ask_owner(
                system.backends.bus,
                first["id"],
                "call",
                CallToolRpc(tool="getenv", arguments={"name": "DEMO_TOKEN"}, timeout_seconds=10),
                timeout=15,
            )
            assert result["content"][0]["text"] == EXPANDED

            stored = await system.backends.db.fetchval(
                "SELECT string_agg(connection_config::text, ' ') FROM mcp.external_servers"
            )
            events = await _stream_bytes(system.backends.js)
    root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    logs = log_output.getvalue()
    assert "Connecting to StreamableHTTP endpoint" in logs  # library DEBUG lines were captured, masked
    for secret in (LITERAL, EXPANDED):
        for where, text in (("responses", "\n".join(bodies)), ("database", stored), ("logs", logs)):
            assert secret not in text, f"{secret} leaked into {where}"
        assert secret.encode() not in events, f"{secret} leaked into events"
    assert "${TM_TEST_SECRET}" not in stored  # even the reference is sealed
    assert os.environ["TM_TEST_SECRET"] == EXPANDED


ARG_SECRET = "arg-secret-5c4b3a"
SHORT_SECRET = "k!z"  # shorter than any value masked anywhere; not in base64, so absent from sealed configs


async def test_secrets_in_stdio_args_never_leave_the_session_worker(nats_url: str, database_url: str) -> None:
    log_output = io.StringIO()
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    configure_logging("DEBUG", stream=log_output)
    bodies: list[str] = []
    async with running_system(nats_url, database_url) as system:
        async with launch_peer("stdio", name="long") as long_peer, launch_peer("stdio", name="short") as short_peer:
            configs = {
                "args-long": {**long_peer.config, "args": [*long_peer.args, f"--api-key={ARG_SECRET}"]},
                "args-short": {**short_peer.config, "args": [*short_peer.args, "--api-key", SHORT_SECRET]},
            }
            created = [await system.register(name, "STDIO", config) for name, config in configs.items()]
            for server in created:
                bodies.append(repr(server))
                await system.wait_connected(server["id"])
                bodies.append((await system.api.get(f"/api/v1/aggregator/servers/{server['id']}")).text)
            details = [(await system.api.get(f"/api/v1/aggregator/servers/{s['id']}")).json() for s in created]
            assert details[0]["connection_config"]["args"][-1] == "--api-key=***"
            assert details[1]["connection_config"]["args"][-2:] == ["--api-key", "***"]
            bodies.append((await system.api.get("/api/v1/aggregator/servers")).text)
            events = await _stream_bytes(system.backends.js)
    root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    logs = log_output.getvalue()
    assert "started with --api-key ***" in logs  # the servers' stderr was logged, masked
    for secret in (ARG_SECRET, SHORT_SECRET):
        assert secret not in "\n".join(bodies), f"{secret} leaked into responses"
        assert secret not in logs, f"{secret} leaked into logs"
        assert secret.encode() not in events, f"{secret} leaked into events"
