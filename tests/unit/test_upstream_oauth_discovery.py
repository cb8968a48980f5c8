"""OAuth discovery on the gateway goes through the server's egress policy (issue 25): a metadata or
link-local address is refused before any connection, and says so."""

from __future__ import annotations

import httpx2
import pytest

from toolmesh.egress.http import guarded_client
from toolmesh.egress.policy import EgressPolicy
from toolmesh.errors import ServerConnectionFailed
from toolmesh_gateway.upstream_oauth.discovery import discover


@pytest.mark.parametrize("url", ["http://169.254.169.254/mcp", "http://[fe80::1]/mcp", "http://127.0.0.1:9/mcp"])
async def test_discovery_refuses_what_the_egress_policy_refuses(url: str) -> None:
    limits = httpx2.Limits(max_connections=1)
    async with guarded_client(EgressPolicy(), limits, follow_redirects=False) as client:  # public targets only
        with pytest.raises(ServerConnectionFailed, match="egress policy"):
            await discover(client, url, sse=False, scopes=None)
