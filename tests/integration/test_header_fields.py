"""Header names and values of a registration are valid HTTP fields, and a header value never
reaches the log.

Attack (issue 23): ``{"headers": {"X-Api-Key": "plainLiteralSecret77\\r\\n"}}`` was accepted (201); at
connect the HTTP client refused to send it (``LocalProtocolError: Illegal header value
b'plainLiteralSecret77\\r\\n'``) and the worker logged that text, the secret in clear: the redactor
knew the value, not its escaped spelling. Now a registration (HTTP API and NATS API) carrying such a
header is refused with 422 ``VALIDATION_ERROR`` naming the field and not echoing the value, and a
registration stored before that rule fails to connect with nothing of the value in the log.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.harness import ADMIN_TOKEN, System, running_system
from tests.integration.test_legacy_private_network import publish_legacy_registration
from tests.integration.test_upstream_text_redaction import log_output  # noqa: F401 (a fixture)
from tests.peers.launch import launch_peer, launch_rest_peer
from toolmesh.client import ToolmeshClient
from toolmesh.contracts.connection_config import TransportType
from toolmesh.contracts.servers import RegisterServerRequest
from toolmesh.errors import ValidationFailed

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
SECRETS = ("plainLiteralSecret77\r\n", "Bearer crlfSECRET42\r\nX-Inj: 1")


def spellings(value: str) -> set[str]:
    """``value`` and the escaped forms a log line or a JSON body may show it in."""
    escaped = {value, repr(value)[1:-1], repr(value.encode())[2:-1], json.dumps(value)[1:-1]}
    return escaped | {part for part in value.replace("\r", "\n").split("\n") if len(part) >= 6}


def shows(text: str, value: str) -> bool:
    return any(spelling in text for spelling in spellings(value))


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url, roles=["gateway", "projector", "session-worker"]) as running:
        yield running


def _body(transport: str, headers: dict[str, str]) -> dict[str, Any]:
    key = "base_url" if transport == "HTTP" else "url"
    config = {key: "http://127.0.0.1:18190/mcp", "headers": headers}
    return {"name": "crlf", "transport_type": transport, "connection_config": config, "auto_connect": False}


@pytest.mark.parametrize("transport", ["HTTP", "SSE", "REST"])
@pytest.mark.parametrize("value", [*SECRETS, "plainLiteralSecret77\x00", "tab\x0bSecret77", "trailingSecret77 "])
async def test_a_header_value_that_is_no_http_field_is_refused_without_echoing_it(
    system: System, transport: str, value: str
) -> None:
    response = await system.api.post(SERVERS, json=_body(transport, {"X-Api-Key": value}))
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error_code"] == "VALIDATION_ERROR"
    assert {tuple(e["loc"]) for e in body["detail"]} == {("body", "connection_config", "headers")}
    assert "X-Api-Key" in body["detail"][0]["msg"]
    assert not shows(response.text, value)
    assert (await system.api.get(SERVERS)).json()["total"] == 0


async def test_the_nats_api_refuses_the_same_header_value(system: System) -> None:
    body = {**_body("HTTP", {"X-Api-Key": SECRETS[1]}), "transport_type": TransportType.HTTP}
    request = RegisterServerRequest.model_construct(**body)
    async with await ToolmeshClient.over_nats(system.settings.nats_url or "", ADMIN_TOKEN) as mesh:
        with pytest.raises(ValidationFailed) as refused:
            await mesh.register(request)
    reply = json.dumps(refused.value.body())
    assert "headers" in reply and not shows(reply, SECRETS[1])
    assert (await system.api.get(SERVERS)).json()["total"] == 0


@contextlib.asynccontextmanager
async def running_peer(transport: str) -> AsyncIterator[tuple[TransportType, dict[str, object]]]:
    """A real upstream of ``transport`` (``http``, ``sse`` or ``rest``): its type and connection config."""
    if transport == "rest":
        async with launch_rest_peer() as url:
            yield TransportType.REST, {"url": url}
    else:
        async with launch_peer(transport) as peer:
            yield TransportType(peer.transport_type), peer.config


def assert_failed_cleanly(detail: dict[str, Any], logs: str, header: str, values: tuple[str, ...]) -> None:
    """The server is in ERROR naming ``header``, not retried, and neither it nor the log shows ``values``."""
    assert f"the value of {header!r} contains a control character" in detail["error_message"]
    assert detail["next_retry_at"] is None  # a config error: connecting again cannot help
    assert detail["name"] in logs  # the failure was logged
    for value in values:
        assert not shows(logs, value), f"{value!r} is in the log"
        assert not shows(json.dumps(detail), value)


@pytest.mark.parametrize("transport", ["http", "sse", "rest"])
async def test_a_stored_registration_with_a_crlf_header_fails_cleanly_and_logs_no_value(
    system: System,
    log_output: io.StringIO,  # noqa: F811 (the imported fixture)
    transport: str,
) -> None:
    async with running_peer(transport) as (kind, config):
        headers = {"X-Api-Key": SECRETS[0], "Authorization": SECRETS[1]}
        server_id = await publish_legacy_registration(system, "admin", "default", kind, {**config, "headers": headers})
        response = await system.api.post(f"{SERVERS}/{server_id}/connect", json={})
        assert response.status_code in (200, 202), response.text
        detail = await system.wait_status(server_id, "ERROR")
    assert_failed_cleanly(detail, log_output.getvalue(), "X-Api-Key", SECRETS)


async def test_a_variable_that_expands_to_several_lines_fails_cleanly_and_logs_no_value(
    nats_url: str,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    log_output: io.StringIO,  # noqa: F811 (the imported fixture)
) -> None:
    value = "envSecret42\r\nX-Inj: 1"
    monkeypatch.setenv("CRLF_PEER_TOKEN", value)
    roles = ["gateway", "projector", "session-worker"]
    async with (
        running_system(nats_url, database_url, roles=roles, expandable_variables=("CRLF_PEER_*",)) as system,
        launch_peer("http") as peer,
    ):
        config = {**peer.config, "headers": {"Authorization": "Bearer ${CRLF_PEER_TOKEN}"}}
        created = await system.register("expands", "HTTP", config)  # the variable's value is not known here
        detail = await system.wait_status(created["id"], "ERROR")
    assert_failed_cleanly(detail, log_output.getvalue(), "Authorization", (value,))
