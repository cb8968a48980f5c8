"""``toolmesh servers authorize NAME`` against a real ``toolmesh up`` and the OAuth-protected peer
(``tests/peers/oauth_server.py``): the command prints the authorization URL and waits; the URL is
followed headless (the authorization server's redirect, then the gateway's callback) and the command
exits 0 once the server connected. An agent's key is refused with one clear line. For a per-user
server every key authorizes for itself, and the command waits for that key's own grant."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.cli_up import START_SECONDS, TOOLMESH, Up, answering, wait_for
from toolmesh.platform import processes
from toolmesh.platform.polling import wait_until
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.e2e
PEER = Path(__file__).parents[1] / "peers" / "oauth_server.py"
COMMAND_SECONDS = 60.0


@contextlib.contextmanager
def oauth_peer(log: Path) -> Iterator[str]:
    """The OAuth-protected MCP peer on a free loopback port; yields its origin."""
    port = free_port()
    origin = f"http://127.0.0.1:{port}"
    with log.open("ab") as out:
        peer = processes.spawn([sys.executable, str(PEER), "--port", str(port)], stdout=out, stderr=out)
    try:

        def answers() -> bool:
            return httpx.get(f"{origin}/control/stats").status_code == 200

        assert wait_until(answers, START_SECONDS, interval=0.2, retry_on=(httpx.HTTPError,)), log.read_text()
        yield origin
    finally:
        processes.stop_sync(peer, signal.SIGKILL, 0)


@pytest.fixture
def up(tmp_path: Path) -> Iterator[Up]:
    with answering(tmp_path) as running:
        yield running


def _register(up: Up, origin: str, identity: str = "shared") -> dict[str, Any]:
    token = (up.data_dir / "admin-token").read_text().strip()
    body = {
        "name": "saas",
        "transport_type": "HTTP",
        "connection_config": {"base_url": f"{origin}/mcp", "auth": {"mode": "oauth", "identity": identity}},
    }
    response = httpx.post(
        f"{up.env['TOOLMESH_URL']}/api/v1/aggregator/servers", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def _needs_authorization(up: Up) -> bool:
    detail = up.cli_json("servers", "show", "saas")
    needs = detail["needs_authorization"] and "needs authorization:" in str(detail["error_message"])
    assert needs, (detail["status"], detail["error_message"])  # the last value when time runs out
    return True


def _follow_headless(url: str) -> None:
    """What a browser does: the authorization server redirects to the gateway's callback, which answers."""
    answer = httpx.get(url, follow_redirects=False)
    assert answer.status_code == 302, answer.text
    callback = httpx.get(answer.headers["location"], follow_redirects=False)
    assert callback.status_code == 200, callback.text


def test_authorize_prints_the_url_and_waits_until_connected(up: Up, tmp_path: Path) -> None:
    with oauth_peer(tmp_path / "peer.log") as origin:
        _register(up, origin)
        wait_for("the server to wait for an authorization", lambda: _needs_authorization(up), up, START_SECONDS)

        agent = up.cli_json("keys", "create", "robot", "--role", "agent")["token"]
        refused = up.cli("servers", "authorize", "saas", "--token", agent, "--no-wait", expect=1)
        assert refused.stderr.startswith("toolmesh: ") and "FORBIDDEN" in refused.stderr, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and not refused.stdout

        returncode, out, err = _authorized_by_following(up, "--timeout", str(COMMAND_SECONDS))
        assert returncode == 0, out + err
        assert "saas: CONNECTED" in out
        assert up.cli_json("servers", "show", "saas")["status"] == "CONNECTED"


def _authorizing(up: Up, *args: str) -> subprocess.Popen[str]:
    """``toolmesh servers authorize saas ARGS`` running."""
    return subprocess.Popen(
        [TOOLMESH, "servers", "authorize", "saas", *args],
        env=up.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _authorized_by_following(up: Up, *args: str) -> tuple[int, str, str]:
    """``toolmesh servers authorize saas ARGS``, its URL followed headless while it waits; its exit
    status and output."""
    command = _authorizing(up, *args)
    try:
        assert command.stdout is not None
        lines = [command.stdout.readline(), command.stdout.readline()]
        assert lines[0].startswith("Open this URL"), lines
        assert command.poll() is None  # it waits for the authorization
        _follow_headless(lines[1].strip())
        out, err = command.communicate(timeout=COMMAND_SECONDS + 30)
    finally:
        if command.poll() is None:
            command.kill()
    return command.returncode, out, err


def test_authorize_a_per_user_server_waits_for_the_keys_own_grant(up: Up, tmp_path: Path) -> None:
    with oauth_peer(tmp_path / "peer.log") as origin:
        _register(up, origin, "per_user")
        first = up.cli_json("keys", "create", "ann", "--role", "user")["token"]
        second = up.cli_json("keys", "create", "bob", "--role", "user")["token"]
        returncode, out, err = _authorized_by_following(up, "--token", first, "--timeout", str(COMMAND_SECONDS))
        assert returncode == 0, out + err
        assert "saas: CONNECTED" in out

        # The server is connected now, but not with the second key's grant: its command keeps waiting.
        waiting = _authorizing(up, "--token", second, "--timeout", "3")
        out, err = waiting.communicate(timeout=60)
        assert waiting.returncode == 1, out + err
        assert "not authorized after 3s" in err
