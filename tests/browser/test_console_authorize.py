"""The console's "Connect account" for a server behind OAuth (issue 25), in a real headless Chromium
against ``toolmesh up`` and the OAuth-protected peer: the row says "needs authorization", the button
opens the authorization server in a new tab, which comes back to the gateway's callback, and the
row turns CONNECTED without a reload; for a per-user server a user's own account is shown and
connected from the server's page."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, expect, sync_playwright

from tests.browser.console import Console, Toolmesh, launch_chromium, start_toolmesh, stop_toolmesh
from tests.e2e.test_cli_authorize import oauth_peer

pytestmark = pytest.mark.browser
WAIT_MS = 60_000


@pytest.fixture
def toolmesh(tmp_path: Path) -> Iterator[Toolmesh]:
    running = start_toolmesh(tmp_path / "data", tmp_path / "up.log")
    try:
        yield running
    finally:
        stop_toolmesh(running)


@pytest.fixture
def browser(chromium: Path, tmp_path: Path) -> Iterator[BrowserContext]:
    with sync_playwright() as driver:
        context = launch_chromium(driver, chromium, tmp_path / "chromium-profile")
        context.set_default_timeout(WAIT_MS)
        try:
            yield context
        finally:
            context.close()


def test_connect_account_opens_the_authorization_and_the_server_connects(
    browser: BrowserContext, toolmesh: Toolmesh, tmp_path: Path
) -> None:
    console = Console(browser.new_page(), toolmesh)
    page = console.page
    with oauth_peer(tmp_path / "peer.log") as origin:
        config = {"base_url": f"{origin}/mcp", "auth": {"mode": "oauth", "identity": "shared"}}
        toolmesh.register({"name": "saas", "transport_type": "HTTP", "connection_config": config})
        console.sign_in(toolmesh.token)
        row = page.locator("tr[data-name='saas']")
        expect(row.locator("td.status .why")).to_have_text("needs authorization")
        button = row.get_by_role("button", name="Connect account saas")
        expect(button).to_be_visible()
        expect(row.get_by_role("button", name="Connect saas", exact=True)).to_have_count(0)
        console.shot("servers-needs-authorization")

        with browser.expect_page() as opened:
            button.click()
        tab = opened.value
        expect(tab.locator("body")).to_contain_text("Authorized")
        assert tab.url.startswith(f"{toolmesh.url}/oauth/callback")
        expect(row.locator("td.status .badge")).to_have_text("CONNECTED")
        expect(row.get_by_role("button", name="Connect account saas")).to_have_count(0)
        assert console.errors == [], console.errors


def test_a_user_connects_its_own_account_of_a_per_user_server(
    browser: BrowserContext, toolmesh: Toolmesh, tmp_path: Path
) -> None:
    console = Console(browser.new_page(), toolmesh)
    page = console.page
    with oauth_peer(tmp_path / "peer.log") as origin:
        config = {"base_url": f"{origin}/mcp", "auth": {"mode": "oauth", "identity": "per_user"}}
        created = toolmesh.register({"name": "mine", "transport_type": "HTTP", "connection_config": config})
        with toolmesh.api() as api:
            created_key = api.post("/api/v1/auth/keys", json={"name": "ann", "role": "user"})
        assert created_key.status_code == 201, created_key.text
        console.sign_in(created_key.json()["token"])
        console.go(f"servers/{created['id']}")
        account = page.locator("#your-account")
        expect(account.locator(".badge")).to_have_text("not connected")
        console.shot("server-your-account-not-connected")

        with browser.expect_page() as opened:
            account.get_by_role("button", name="Connect your account").click()
        tab = opened.value
        expect(tab.locator("body")).to_contain_text("Authorized")
        expect(account.locator(".badge")).to_have_text("connected")
        expect(account.get_by_role("button", name="Connect again")).to_be_visible()
        assert console.errors == [], console.errors
