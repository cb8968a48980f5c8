"""One key cannot take every ``/mcp`` session of its namespace, against real NATS and Postgres.

Attack: a ``user`` key looped ``initialize`` until its namespace's session limit was reached; then
the admin, owner and every other key of the namespace got 409 ``LIMIT_EXCEEDED`` at ``initialize``
for as long as those sessions lived. Now a key holds at most its own share (a quarter of the
namespace's by default): past it the key gets 409 ``LIMIT_EXCEEDED`` naming the key's limit, and
the namespace's other keys still open sessions.

Clients that never end their sessions (no ``DELETE``: a restarted local client, the conformance
suite's) used to lock their own key out for the sessions' TTL once they had opened its share. Now the
key's least recently used idle session makes way for the new one (it then answers 404, as an expired
one does); only a key whose every session is in use is refused, and never at another key's expense.
"""

from __future__ import annotations

import httpx
import mcp_types
import pytest

from tests.harness import System, eventually, running_system
from tests.mcp_client import mcp_session, mcp_url
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT
from tests.peers.launch import launch_peer

pytestmark = pytest.mark.integration


async def _key(system: System, name: str, role: str) -> str:
    return str((await system.create_key(name, role, namespace="team-a"))["token"])


async def test_a_key_looping_initialize_holds_its_share_and_another_key_still_opens_one(
    nats_url: str, database_url: str
) -> None:
    async with (
        running_system(nats_url, database_url, roles=["gateway", "projector"], namespace_max_mcp_sessions=8) as system,
        httpx.AsyncClient(timeout=30) as http,
    ):
        attacker, admin = await _key(system, "looper", "user"), await _key(system, "manager", "admin")
        looped = [await _open(http, system, attacker) for _ in range(8)]  # the namespace's every session
        assert [await _ping(http, system, h) for h in looped] == [404] * 6 + [200] * 2  # a quarter of 8
        async with mcp_session(system, token=admin) as session:  # the namespace's other keys still get in
            assert isinstance(await session.send_ping(), mcp_types.EmptyResult)


async def _open(http: httpx.AsyncClient, system: System, token: str) -> dict[str, str]:
    """Open a session by hand, as a client that never ends it; the headers its requests carry."""
    headers = {**MCP_ACCEPT, "Authorization": f"Bearer {token}"}
    opened = await http.post(mcp_url(system), json=INITIALIZE, headers=headers)
    assert opened.status_code == 200, opened.text
    headers |= {"mcp-session-id": opened.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
    initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert (await http.post(mcp_url(system), json=initialized, headers=headers)).status_code == 202
    return headers


async def _ping(http: httpx.AsyncClient, system: System, headers: dict[str, str]) -> int:
    ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
    return (await http.post(mcp_url(system), json=ping, headers=headers)).status_code


async def test_a_key_at_its_share_ends_its_least_recently_used_idle_session_and_never_another_keys(
    nats_url: str, database_url: str
) -> None:
    async with (
        running_system(nats_url, database_url, roles=["gateway", "projector"], namespace_max_mcp_sessions=8) as system,
        httpx.AsyncClient(timeout=30) as http,
    ):
        one, other = await _key(system, "laptop", "user"), await _key(system, "desktop", "user")
        others = [await _open(http, system, other) for _ in range(2)]  # idle, and used before any of one's
        first, second = await _open(http, system, one), await _open(http, system, one)  # one's share of 8
        assert await _ping(http, system, first) == 200  # second is now one's least recently used

        third = await _open(http, system, one)

        assert await _ping(http, system, second) == 404  # ended, as an expired session: clients re-initialize
        assert [await _ping(http, system, h) for h in (first, third, *others)] == [200] * 4
        fourth = await _open(http, system, one)  # first is now the least recently used of one's
        assert [await _ping(http, system, h) for h in (first, third, fourth)] == [404, 200, 200]


async def test_a_key_whose_every_session_is_in_use_is_refused(nats_url: str, database_url: str) -> None:
    """A session with a call in flight or an open GET stream is never ended for a new one."""
    async with (
        launch_peer("stdio") as peer,
        running_system(nats_url, database_url, namespace_max_mcp_sessions=8, mcp_json_wait_seconds=0.2) as system,
        httpx.AsyncClient(timeout=30) as http,
    ):
        await system.wait_connected(
            (await system.register("tools", peer.transport_type, peer.config, namespace="team-a"))["id"]
        )
        token = await _key(system, "laptop", "user")
        calling, listening = await _open(http, system, token), await _open(http, system, token)
        fresh = {**MCP_ACCEPT, "Authorization": f"Bearer {token}"}
        slow = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "tools__slow", "arguments": {"seconds": 60}},
        }
        async with (
            http.stream("POST", mcp_url(system), json=slow, headers=calling) as call,  # its SSE stream is open
            http.stream("GET", mcp_url(system), headers=listening) as stream,
        ):
            assert call.status_code == 200 and stream.status_code == 200
            refused = await http.post(mcp_url(system), json=INITIALIZE, headers=fresh)
            assert refused.status_code == 409, refused.text
            assert refused.json()["context"] == {"namespace": "team-a", "key_max_mcp_sessions": 2}

        async def opened() -> httpx.Response | None:  # both idle once the gateway sees their requests end
            reply = await http.post(mcp_url(system), json=INITIALIZE, headers=fresh)
            return reply if reply.status_code == 200 else None

        await eventually(opened, what="a session replacing the least recently used idle one")
        assert sorted([await _ping(http, system, h) for h in (calling, listening)]) == [200, 404]
