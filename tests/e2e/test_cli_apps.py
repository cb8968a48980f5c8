"""``toolmesh keys apps`` and ``toolmesh keys disconnect`` against a real ``toolmesh up``: an MCP client
signs in through the gateway's own authorization server (``/register``, ``/authorize``, the consent
page's decision as a user's API key, ``/token`` with the PKCE verifier), the CLI lists it as a
connected app, disconnects it, and its access token is refused at ``/mcp`` from then on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cli_up import Up, answering
from tests.oauth_client_flow import connected, status_at

pytestmark = pytest.mark.e2e
HEADERS = ["CLIENT", "KEY", "NAMESPACE", "ENDPOINT", "CREATED", "REFRESHED", "ID"]


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with answering(tmp_path) as running:
        yield running


async def test_keys_apps_lists_a_signed_in_client_and_disconnect_revokes_it(up: Up) -> None:
    url = up.env["TOOLMESH_URL"]
    user = up.cli_json("keys", "create", "ide-user", "--role", "user")
    client, tokens = await connected(url, user["token"], client_name="Zed")
    assert await status_at(url, tokens.access) == 200

    listed = up.cli("keys", "apps").stdout.splitlines()
    assert listed[0].split() == HEADERS
    (row,) = [line.split() for line in listed[1:]]
    (shown,) = up.cli_json("keys", "apps")
    assert row[:4] == ["Zed", "ide-user", "default", "/mcp"] and row[6:] == ["-", shown["id"]]
    assert (shown["client_id"], shown["key_id"], shown["resource"]) == (client.client_id, user["id"], f"{url}/mcp")
    as_user = up.cli_json("keys", "apps", "--token", user["token"])  # a user sees its own apps
    assert [a["id"] for a in as_user] == [shown["id"]]

    done = up.cli("keys", "disconnect", shown["id"])
    assert done.stdout.strip() == f"disconnected app {shown['id']}"
    assert await status_at(url, tokens.access) == 401
    assert up.cli_json("keys", "apps") == []
    assert [line.split() for line in up.cli("keys", "apps").stdout.splitlines()] == [HEADERS]

    again = up.cli("keys", "disconnect", shown["id"], expect=1)
    assert again.stdout == ""
    assert again.stderr.strip() == f"toolmesh: Connected app not found: {shown['id']} (APP_NOT_FOUND)"
