"""One key cannot take every ``/mcp`` session of its namespace, against real NATS and Postgres.

Attack: a ``user`` key looped ``initialize`` until its namespace's session limit was reached; then
the admin, owner and every other key of the namespace got 409 ``LIMIT_EXCEEDED`` at ``initialize``
for as long as those sessions lived. Now a key holds at most its own share (a quarter of the
namespace's by default): past it the key gets 409 ``LIMIT_EXCEEDED`` naming the key's limit, and
the namespace's other keys still open sessions.
"""

from __future__ import annotations

import contextlib

import httpx
import mcp_types
import pytest
from mcp.shared.exceptions import MCPError

from tests.harness import System, running_system
from tests.mcp_client import mcp_session, mcp_url
from tests.mcp_raw import INITIALIZE, MCP_ACCEPT

pytestmark = pytest.mark.integration


async def _key(system: System, name: str, role: str) -> str:
    return str((await system.create_key(name, role, namespace="team-a"))["token"])


async def test_a_key_at_its_session_share_is_refused_and_another_key_still_opens_one(
    nats_url: str, database_url: str
) -> None:
    async with (
        running_system(nats_url, database_url, roles=["gateway", "projector"], namespace_max_mcp_sessions=8) as system,
        contextlib.AsyncExitStack() as held,
    ):
        attacker, admin = await _key(system, "looper", "user"), await _key(system, "manager", "admin")
        for _ in range(2):  # a quarter of the namespace's 8
            await held.enter_async_context(mcp_session(system, token=attacker))
        with pytest.RaisesGroup(MCPError, flatten_subgroups=True):  # the SDK's initialize is refused
            async with mcp_session(system, token=attacker):
                pass
        async with httpx.AsyncClient(timeout=30) as http:
            headers = {**MCP_ACCEPT, "Authorization": f"Bearer {attacker}"}
            refused = await http.post(mcp_url(system), json=INITIALIZE, headers=headers)
        assert refused.status_code == 409, refused.text
        assert refused.json()["error_code"] == "LIMIT_EXCEEDED"
        assert refused.json()["context"] == {"namespace": "team-a", "key_max_mcp_sessions": 2}

        async with mcp_session(system, token=admin) as session:  # the namespace's other keys still get in
            assert isinstance(await session.send_ping(), mcp_types.EmptyResult)
