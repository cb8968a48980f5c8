"""Who may register what, on every path that registers (REST, NATS API, idempotent replays, the CLI).

The attack of issue 23: an ``agent`` key registers a STDIO server whose command is ``/bin/sh -c ...``
and so runs a command on the session-worker's host. Running a command is an operator's decision:
the registration is refused (403) and nothing runs. ``${VAR}`` is deny-by-default: a config naming a
variable the deployment does not allow is refused (422), toolmesh's own variables in any spelling
even when the deployment allows ``*``, and a canary upstream never receives the worker's values.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.peers.launch import launch_rest_peer

pytestmark = pytest.mark.integration
SERVERS = "/api/v1/aggregator/servers"
REGISTER_SUBJECT = json.loads((Path(__file__).parents[2] / "docs" / "asyncapi.json").read_text())["channels"][
    "servers.register"
]["address"]
WORKER_VALUE = "worker-only-value-5f1c"


def shell_server(name: str, canary: Path) -> dict[str, Any]:
    """The attacker's registration: a STDIO server whose command would create ``canary``."""
    return {
        "name": name,
        "transport_type": "STDIO",
        "connection_config": {"command": "/bin/sh", "args": ["-c", f"touch {canary}"]},
    }


async def names_registered(system: System) -> set[str]:
    listed = (await system.api.get(SERVERS)).json()["servers"]
    return {s["name"] for s in listed}


async def nothing_ran(system: System, canary: Path) -> None:
    """A server the owner registers after the refusals connects (the worker is alive and had every
    chance to run earlier commands), and the canary file was never created."""
    async with launch_rest_peer() as url:
        later = await system.register("later", "REST", {"url": url})
        await system.wait_connected(later["id"])
    assert not await asyncio.to_thread(canary.exists)
    assert await names_registered(system) == {"later"}


def assert_forbidden(body: dict[str, Any], role: str) -> None:
    assert body["error_code"] == "FORBIDDEN"
    assert body["context"] == {"role": role, "action": "register STDIO servers"}


async def test_an_agent_cannot_run_a_command_on_the_host_over_rest(system: System, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    agent = (await system.create_key("intruder", "agent"))["token"]
    async with system.client_as(agent) as api:
        refused = await api.post(SERVERS, json=shell_server("evil", canary))
        assert refused.status_code == 403
        assert_forbidden(refused.json(), "agent")
        key = {"Idempotency-Key": str(uuid.uuid4())}
        first = await api.post(SERVERS, json=shell_server("evil-2", canary), headers=key)
        replayed = await api.post(SERVERS, json=shell_server("evil-2", canary), headers=key)
        assert first.status_code == replayed.status_code == 403
        assert_forbidden(replayed.json(), "agent")
        # An agent still registers remote servers: only running a command is withheld.
        remote = {"name": "remote", "transport_type": "HTTP", "connection_config": {"base_url": "https://h.test/mcp"}}
        allowed = await api.post(SERVERS, json={**remote, "auto_connect": False})
        assert allowed.status_code == 201, allowed.text
        assert (await api.delete(f"{SERVERS}/{allowed.json()['id']}")).status_code == 204
    user = (await system.create_key("reader", "user"))["token"]
    async with system.client_as(user) as api:
        assert (await api.post(SERVERS, json=shell_server("evil-3", canary))).status_code == 403
    await nothing_ran(system, canary)


async def test_an_agent_cannot_run_a_command_on_the_host_over_the_nats_api(system: System, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    agent = (await system.create_key("intruder", "agent"))["token"]
    nc = await nats.connect(system.settings.nats_url or "", connect_timeout=10)
    try:
        headers = {"Authorization": f"Bearer {agent}", "Idempotency-Key": str(uuid.uuid4())}
        payload = json.dumps(shell_server("evil", canary)).encode()
        for _ in range(2):  # the first request and its replay
            reply = json.loads((await nc.request(REGISTER_SUBJECT, payload, timeout=30, headers=headers)).data)
            assert reply["ok"] is False
            assert_forbidden(reply["error"], "agent")
    finally:
        await nc.close()
    await nothing_ran(system, canary)


async def test_an_agent_cannot_run_a_command_through_the_cli_import(system: System, tmp_path: Path) -> None:
    canary = tmp_path / "canary"
    agent = (await system.create_key("intruder", "agent"))["token"]
    config = tmp_path / "claude_desktop_config.json"
    evil = shell_server("evil", canary)["connection_config"]
    config.write_text(json.dumps({"mcpServers": {"evil": evil}}))
    argv = [sys.executable, "-m", "toolmesh_cli.main", "import", str(config), "--json", "--wait", "0"]
    argv += ["--url", str(system.api.base_url), "--token", agent]
    done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FORBIDDEN" in done.stdout or "403" in done.stdout, done.stdout
    await nothing_ran(system, canary)


async def test_an_operator_list_of_commands_refuses_others_naming_the_field(
    nats_url: str, database_url: str, tmp_path: Path
) -> None:
    canary = tmp_path / "canary"
    async with running_system(nats_url, database_url, stdio_commands=(sys.executable, "npx")) as system:
        refused = await system.api.post(SERVERS, json=shell_server("evil", canary))
        assert refused.status_code == 422 and refused.json()["error_code"] == "VALIDATION_ERROR"
        assert [e["loc"] for e in refused.json()["context"]["errors"]] == [["connection_config", "command"]]
        await nothing_ran(system, canary)


def canary_config(url: str, header: str) -> dict[str, Any]:
    return {
        "name": "canary",
        "transport_type": "REST",
        "connection_config": {"url": url, "headers": {"X-Canary": header}},
    }


async def headers_seen(url: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=10) as client:
        seen: list[dict[str, Any]] = (await client.get(f"{url}/headers")).json()
        return seen


async def canary_values(url: str) -> set[str | None]:
    """The ``X-Canary`` header of every request the REST peer received."""
    return {h["headers"].get("x-canary") for h in await headers_seen(url)}


async def connect_canary(system: System, url: str, header: str) -> None:
    """Register the canary server (its ``X-Canary`` header ``header``) and wait until it is connected."""
    created = await system.register("canary", "REST", canary_config(url, header)["connection_config"])
    await system.wait_connected(created["id"])


async def test_variables_are_denied_unless_the_deployment_allows_them(
    system: System, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_WORKER_VAR", WORKER_VALUE)
    async with launch_rest_peer() as url:
        refused = await system.api.post(SERVERS, json=canary_config(url, "v=${SOME_WORKER_VAR}"))
        assert refused.status_code == 422 and refused.json()["error_code"] == "VALIDATION_ERROR"
        (error,) = refused.json()["context"]["errors"]
        assert error["loc"] == ["connection_config", "headers"] and "SOME_WORKER_VAR" in error["msg"]
        assert await names_registered(system) == set()
        assert await headers_seen(url) == []  # the canary was never reached


@pytest.mark.parametrize(
    "variable",
    ["MCP_CREDENTIAL_KEY_PREVIOUS", "mcp_credential_key_previous", "toolmesh_admin_token", "Mcp_Credential_Key"],
)
async def test_toolmesh_variables_are_refused_in_every_spelling_even_when_all_are_allowed(
    nats_url: str, database_url: str, variable: str
) -> None:
    async with running_system(nats_url, database_url, expandable_variables=("*",)) as system:
        body = canary_config("https://h.test", f"${{{variable}}}")
        refused = await system.api.post(SERVERS, json={**body, "auto_connect": False})
        assert refused.status_code == 422, refused.text
        assert refused.json()["error_code"] == "VALIDATION_ERROR" and variable in refused.text
        assert await names_registered(system) == set()


async def test_a_copy_of_a_worker_secret_never_reaches_an_upstream(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOME_WORKER_VAR", f"prefix-{ADMIN_TOKEN}")  # the owner's token under another name
    monkeypatch.setenv("PLAIN_WORKER_VAR", WORKER_VALUE)
    async with (
        running_system(nats_url, database_url, expandable_variables=("*",)) as system,
        launch_rest_peer() as url,
    ):
        await connect_canary(system, url, "${SOME_WORKER_VAR}|${PLAIN_WORKER_VAR}")
        assert await canary_values(url) == {f"|{WORKER_VALUE}"}


async def test_the_worker_expands_only_what_its_own_deployment_allows(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config that names a variable the worker does not allow (registered through a gateway that
    allowed it, or before deny-by-default) reaches the upstream with the reference empty."""
    monkeypatch.setenv("SOME_WORKER_VAR", WORKER_VALUE)
    async with (
        running_system(nats_url, database_url, ["gateway", "projector"], expandable_variables=("*",)) as system,
        running_system(nats_url, database_url, ["session-worker"]),
        launch_rest_peer() as url,
    ):
        await connect_canary(system, url, "v=${SOME_WORKER_VAR}")
        assert await canary_values(url) == {"v="}


async def test_a_namespace_allow_list_holds_only_in_its_namespace(
    nats_url: str, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JIRA_TOKEN", WORKER_VALUE)
    by_namespace = {"team-a": ("JIRA_*",)}
    async with (
        running_system(nats_url, database_url, expandable_variables_by_namespace=by_namespace) as system,
        launch_rest_peer() as url,
    ):
        body = {**canary_config(url, "${JIRA_TOKEN}"), "auto_connect": False}
        for namespace, status in (("team-a", 201), ("team-b", 422)):
            response = await system.api.post(SERVERS, json={**body, "namespace": namespace})
            assert response.status_code == status, (namespace, response.text)

        async def connected() -> bool:
            listed = (await system.api.get(SERVERS)).json()["servers"]
            return any(s["status"] == "CONNECTED" for s in listed)

        server_id = (await system.api.get(SERVERS)).json()["servers"][0]["id"]
        assert (await system.api.post(f"{SERVERS}/{server_id}/connect")).status_code == 200
        await eventually(connected, what="team-a's canary to connect")
        assert await canary_values(url) == {WORKER_VALUE}
