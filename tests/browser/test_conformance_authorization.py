"""The official MCP conformance suite's authorization-server scenarios against the gateway's own
authorization server (issue 26): ``authorization-server-metadata-endpoint`` and
``authorization-code-grant``, whose browser step — the suite prints an authorization URL and waits
for its loopback callback — is a person in headless Chromium signing the console's consent page with
an API key and allowing. Every check of both scenarios must be SUCCESS (no warnings either)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import BrowserContext

from tests.browser.console import Toolmesh, start_toolmesh, stop_toolmesh
from tests.browser.sdk_client import ConsentBrowser, chromium_context
from tests.conformance.kit import Kit, prepare
from tests.peers.launch import free_port
from toolmesh.platform import processes

pytestmark = [pytest.mark.browser, pytest.mark.conformance]
SCENARIOS = ("authorization-server-metadata-endpoint", "authorization-code-grant")
PROMPT_SECONDS = 60
SUITE_SECONDS = 120


@pytest.fixture(scope="module")
def kit() -> Kit:
    return prepare()


@pytest.fixture
def toolmesh(tmp_path: Path) -> Iterator[Toolmesh]:
    running = start_toolmesh(tmp_path / "data", tmp_path / "up.log")
    try:
        yield running
    finally:
        stop_toolmesh(running)


def register(toolmesh: Toolmesh, redirect_uri: str) -> str:
    """A public client (no secret) whose redirect URI is the suite's callback; its id."""
    body = {"redirect_uris": [redirect_uri], "token_endpoint_auth_method": "none", "client_name": "MCP conformance"}
    response = httpx.post(f"{toolmesh.url}/register", json=body, timeout=30)
    assert response.status_code == 201, response.text
    client_id: str = response.json()["client_id"]
    return client_id


def checks_of(output: Path, scenario: str) -> list[dict[str, Any]]:
    """The checks the suite wrote for ``scenario`` (one ``checks.json`` per scenario run)."""
    [found] = output.glob(f"authorization-server-{scenario}-*/checks.json")
    checks: list[dict[str, Any]] = json.loads(found.read_text())
    return checks


async def authorization_url(stream: asyncio.StreamReader, issuer: str, seen: list[str]) -> str:
    """The authorization URL the suite prints for the person to open (every line read goes to ``seen``)."""
    async with asyncio.timeout(PROMPT_SECONDS):
        while line := (await stream.readline()).decode(errors="replace"):
            seen.append(line)
            if line.startswith(f"{issuer}/authorize?"):
                return line.strip()
    raise AssertionError("the suite printed no authorization URL:\n" + "".join(seen))


async def test_the_authorization_server_scenarios_pass_with_consent_in_the_browser(
    kit: Kit, toolmesh: Toolmesh, chromium: Path, tmp_path: Path
) -> None:
    port = free_port()
    client_id = register(toolmesh, f"http://127.0.0.1:{port}/callback")
    output = tmp_path / "results"
    process = await processes.spawn_piped(
        kit.authorization_argv(toolmesh.url, client_id, port, output),
        env={**os.environ, "NO_COLOR": "1"},
        stderr=asyncio.subprocess.STDOUT,
    )
    seen: list[str] = []
    try:
        assert process.stdout is not None
        url = await authorization_url(process.stdout, toolmesh.url, seen)
        context: BrowserContext
        async with chromium_context(chromium, tmp_path / "chromium-profile") as context:
            person = ConsentBrowser(context, toolmesh.token)
            await person.allow(url)
        rest, _ = await asyncio.wait_for(process.communicate(), SUITE_SECONDS)
    finally:
        await processes.stop(process, signal.SIGKILL, 0)
    text = "".join(seen) + rest.decode(errors="replace")
    assert process.returncode == 0, text
    assert person.errors == [], person.errors
    for scenario in SCENARIOS:
        checks = checks_of(output, scenario)
        assert checks, text
        assert {c["id"]: c["status"] for c in checks if c["status"] != "SUCCESS"} == {}, text
    assert {c["id"] for s in SCENARIOS for c in checks_of(output, s)} == {
        "authorization-server-metadata",
        "authorization-server-metadata-cimd",
        "authorization-code-grant",
    }
