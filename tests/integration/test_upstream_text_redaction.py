"""Upstream stderr and exception text never reach API-visible fields; the log masks every secret
of the deployment.

Attack (issue 23, "agent → owner"): a STDIO child printed what it read (the owner token, the
credential keys) on stderr; the failed connect carried its last stderr lines into
``error_message``, which ``GET /servers/{id}`` returned, and the owner token was in the log
unmasked. Now every API-visible field carries toolmesh's own summary ("process exited with
code 1"), the stderr goes to the log only, and the log masks the owner token, every API key token
(by form: this process never saw the key's value), the credential keys and the backends' passwords.
"""

from __future__ import annotations

import base64
import io
import secrets
import uuid
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlsplit

import httpx
import pytest

from tests.harness import ADMIN_TOKEN, CREDENTIAL_KEY, System, running_system
from tests.integration.test_secrets import _stream_bytes
from tests.leaks import captured_logs

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
LEAKER = 'for b in "$@"; do printf "leaked: %s\\n" "$(printf %s "$b" | base64 -d)" >&2; done; exit 1'
"""A STDIO child that prints its arguments, base64-decoded, on stderr (as a hostile one prints what it
read) and exits: the values themselves are in no config, so only what the child printed can leak them."""


@pytest.fixture
def log_output() -> Iterator[io.StringIO]:
    """What the process logs, through the handler every toolmesh process installs."""
    with captured_logs("INFO") as output:
        yield output


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    previous_key = secrets.token_urlsafe(32)
    async with running_system(
        nats_url, database_url, roles=["gateway", "projector", "session-worker"], credential_previous_keys=previous_key
    ) as system:
        yield system


async def _token(system: System, name: str, role: str) -> str:
    return str((await system.create_key(name, role, namespace="team-a"))["token"])


async def _leaking_server(system: System, lines: list[str]) -> str:
    """Team A's STDIO server that prints ``lines`` on stderr and exits 1; its id once it is in ERROR."""
    encoded = [base64.b64encode(line.encode()).decode() for line in lines]
    config = {"command": "/bin/sh", "args": ["-c", LEAKER, "leaker", *encoded]}
    body = {
        "name": f"leaker-{uuid.uuid4().hex[:6]}",
        "transport_type": "STDIO",
        "connection_config": config,
        "namespace": "team-a",
    }
    created = await system.api.post(SERVERS, json=body)
    assert created.status_code == 201, created.text
    server_id = str(created.json()["id"])
    await system.wait_status(server_id, "ERROR", timeout=60)
    return server_id


async def _what_a_key_reads(system: System, token: str, server_id: str) -> str:
    """Everything the key can read about the server: detail, list, history."""
    base = str(system.api.base_url)
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
        pages = [
            await api.get(f"{SERVERS}/{server_id}"),
            await api.get(SERVERS),
            await api.get(f"{SERVERS}/{server_id}/history"),
        ]
    assert all(page.status_code == 200 for page in pages), [page.text for page in pages]
    return "\n".join(page.text for page in pages)


async def test_stderr_of_a_failed_stdio_server_reaches_no_api_field(system: System, log_output: io.StringIO) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    server_id = await _leaking_server(system, [canary, "/proc/1/environ: MCP_CREDENTIAL_KEY=stolen"])
    detail = (await system.api.get(f"{SERVERS}/{server_id}")).json()
    assert "process exited with code 1" in detail["error_message"]  # still says why it failed

    tokens = {"owner": ADMIN_TOKEN}
    for role in ("admin", "agent", "user"):
        tokens[role] = await _token(system, f"{role}-{uuid.uuid4().hex[:6]}", role)
    for role, token in tokens.items():
        seen = await _what_a_key_reads(system, token, server_id)
        assert canary not in seen and "stolen" not in seen, f"stderr reached the {role} key"
    assert canary.encode() not in await _stream_bytes(system.backends.js)  # nor any event
    assert canary in log_output.getvalue()  # the operator still finds it in the log


async def test_the_log_never_shows_the_deployments_secrets(
    system: System, log_output: io.StringIO, database_url: str
) -> None:
    key_token = await _token(system, f"victim-{uuid.uuid4().hex[:6]}", "agent")
    settings = system.settings
    house = {
        "owner token": ADMIN_TOKEN,
        "API key token": key_token,
        "MCP_CREDENTIAL_KEY": CREDENTIAL_KEY,
        "MCP_CREDENTIAL_KEY_PREVIOUS": settings.credential_previous_keys or "",
    }
    password = urlsplit(database_url).password
    if password:
        house["database password"] = password
    canary = f"canary-{uuid.uuid4().hex}"
    await _leaking_server(system, [canary, *house.values()])
    logs = log_output.getvalue()
    assert canary in logs  # the child's stderr was logged
    for what, value in house.items():
        assert value not in logs, f"the {what} is in the log"
