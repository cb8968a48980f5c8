"""The console's import of an MCP Registry ``server.json`` in a real headless Chromium: paste the
entry, read it, fill its (secret) input, import, and watch the server reach CONNECTED."""

from __future__ import annotations

import json
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Playwright, expect, sync_playwright

from tests.browser.console import Console, Toolmesh, launch_chromium, start_toolmesh, stop_toolmesh
from tests.peers.launch import demo_args, free_port
from toolmesh.platform import processes
from toolmesh.platform.polling import wait_until

pytestmark = pytest.mark.browser
WAIT_MS = 60_000
TOKEN = "console-registry-token"


@pytest.fixture(scope="module")
def toolmesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Toolmesh]:
    work = tmp_path_factory.mktemp("console-import")
    running = start_toolmesh(work / "data", work / "up.log")
    try:
        yield running
    finally:
        stop_toolmesh(running)


@pytest.fixture(scope="module")
def browser(chromium: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    with sync_playwright() as driver:
        context = _context(driver, chromium, tmp_path_factory.mktemp("chromium-profile"))
        try:
            yield context
        finally:
            context.close()


def _context(driver: Playwright, chromium: Path, profile: Path) -> BrowserContext:
    context = launch_chromium(driver, chromium, profile)
    context.set_default_timeout(WAIT_MS)
    return context


@pytest.fixture
def console(browser: BrowserContext, toolmesh: Toolmesh) -> Iterator[Console]:
    tab = Console(browser.new_page(), toolmesh)
    try:
        yield tab
    finally:
        assert tab.errors == [], tab.errors
        tab.page.close()


@pytest.fixture
def http_peer() -> Iterator[str]:
    """The demo server over Streamable HTTP, answering only ``Authorization: Bearer TOKEN``."""
    port = free_port()
    process = processes.spawn([sys.executable, *demo_args("http", name="remote", token=TOKEN), "--port", str(port)])
    try:
        assert wait_until(lambda: _listening(port), 30.0, interval=0.2), "the demo peer did not listen"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        processes.stop_sync(process, signal.SIGTERM, 10.0)


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def test_paste_a_server_json_fill_its_secret_input_and_import(console: Console, http_peer: str) -> None:
    page = console.page
    console.sign_in(console.toolmesh.token)
    auth = {
        "name": "Authorization",
        "value": "Bearer {token}",
        "variables": {"token": {"description": "API token", "isRequired": True, "isSecret": True}},
    }
    entry = {
        "name": "io.github.example/pasted",
        "description": "A remote demo server",
        "version": "1.0.0",
        "remotes": [{"type": "streamable-http", "url": http_peer, "headers": [auth]}],
        "packages": [
            {"registryType": "mcpb", "identifier": "https://example.com/x.mcpb", "transport": {"type": "stdio"}}
        ],
    }
    toggle = page.get_by_role("button", name="Import from the registry")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    document = page.get_by_label("server.json")
    expect(document).to_be_focused()
    document.fill("{not json")
    page.get_by_role("button", name="Read entry").click()
    expect(page.locator("#imp-document-error")).to_contain_text("Not valid JSON")

    document.fill(json.dumps(entry))
    page.get_by_role("button", name="Read entry").click()
    token = page.get_by_label("token", exact=True)
    expect(token).to_have_attribute("type", "password")
    expect(page.locator("#imp-input-0-hint")).to_contain_text("secret")
    option = page.get_by_label("Run or connect to")
    expect(option.locator("option[disabled]")).to_contain_text("MCP bundles (mcpb) are not supported")
    expect(page.get_by_label("Server name")).to_have_attribute("placeholder", "pasted")
    console.shot("servers-import-registry")

    page.get_by_role("button", name="Import", exact=True).click()  # the token is missing
    expect(token).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#import-panel .form-errors")).to_contain_text("needs a value for token")

    token.fill(TOKEN)
    page.get_by_role("button", name="Import", exact=True).click()
    row = page.locator("tr[data-name='pasted']")
    expect(row.locator("td.status .badge")).to_have_text("CONNECTED", timeout=WAIT_MS)
    assert console.unlabelled() == []
