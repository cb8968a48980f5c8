"""``toolmesh servers authorize``: when its wait ends, and how (the e2e test follows a real authorization)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from toolmesh_cli.authorize_command import servers_authorize
from toolmesh_cli.client import ApiClient
from toolmesh_cli.errors import CliError

pytestmark = pytest.mark.unit

WAITING = {
    "status": "ERROR",
    "error_message": "Connection failed: needs authorization: grant missing",
    "needs_authorization": True,
}


class Api:
    """The calls the command makes, answering each ``server`` with the next of ``states``."""

    def __init__(self, *states: dict[str, Any], exchanged: bool = False) -> None:
        self.states = list(states)
        self.authorized: list[str] = []
        self.exchanged = exchanged  # the caller's token is exchanged: no URL to open

    def resolve(self, name: str) -> str:
        return f"id-{name}"

    def authorization(self, server_id: str) -> dict[str, Any]:
        """No grant before the URL is asked for; the new one once it was."""
        if not self.authorized:
            return {"server_id": server_id, "authorized": False, "authorized_at": None}
        return {"server_id": server_id, "authorized": True, "authorized_at": "2026-11-26T11:00:00Z"}

    def authorize(self, server_id: str) -> dict[str, Any]:
        self.authorized.append(server_id)
        if self.exchanged:
            return {"server_id": server_id, "authorized": True, "authorization_url": None, "expires_in": 0}
        url = "https://as.test/authorize?x=1"
        return {"server_id": server_id, "authorized": False, "authorization_url": url, "expires_in": 600}

    def server(self, server_id: str) -> dict[str, Any]:
        return {
            "next_retry_at": None,
            "tool_count": 0,
            **(self.states.pop(0) if len(self.states) > 1 else self.states[0]),
        }


def run(api: Api, **options: Any) -> int:
    args = argparse.Namespace(**{"server": "saas", "json": False, "no_wait": False, "timeout": None, **options})
    fake: Any = api
    client: ApiClient = fake
    return servers_authorize(args, client)


def test_prints_the_url_and_returns_once_connected(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolmesh_cli.authorize_command.POLL_SECONDS", 0.01)
    api = Api(WAITING, {"status": "CONNECTING", "error_message": None}, {"status": "CONNECTED", "tool_count": 2})
    assert run(api) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "https://as.test/authorize?x=1" and out[-1] == "saas: CONNECTED, 2 tools"
    assert api.authorized == ["id-saas"] and api.states == [{"status": "CONNECTED", "tool_count": 2}]


def test_no_wait_only_prints_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(Api(WAITING), no_wait=True) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "https://as.test/authorize?x=1"


def test_an_error_for_another_reason_that_nobody_retries_fails_at_once() -> None:
    api = Api({"status": "ERROR", "error_message": "Connection failed: token endpoint refused the code"})
    with pytest.raises(CliError, match="saas did not connect: Connection failed: token endpoint refused"):
        run(api, timeout=600.0)


def test_still_waiting_when_time_runs_out_says_so() -> None:
    with pytest.raises(
        CliError, match=r"not connected after 0s \(status ERROR: Connection failed: needs authorization"
    ):
        run(Api(WAITING), timeout=0.0)


def test_a_disconnected_server_is_not_waited_for(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing connects a server a person disconnected after its callback: the wait ran the URL's 600 s
    and failed with "not connected" although the authorization had worked."""
    api = Api({"status": "DISCONNECTED", "error_message": None})
    assert run(api, timeout=600.0) == 0
    out = capsys.readouterr().out
    assert "https://as.test/authorize?x=1" in out
    assert "saas is DISCONNECTED" in out and "toolmesh servers connect saas" in out


def test_an_exchanged_token_needs_no_url_and_no_wait(capsys: pytest.CaptureFixture[str]) -> None:
    api = Api(WAITING, exchanged=True)
    assert run(api, timeout=600.0) == 0
    out = capsys.readouterr().out
    assert out == "saas: authorized by exchanging your token (no browser needed)\n"
    assert api.states == [WAITING]  # nothing was waited for
