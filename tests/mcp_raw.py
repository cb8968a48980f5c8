"""Raw JSON-RPC over HTTP to ``/mcp``, for tests that check the door itself (before any session) or send
what the SDK client would refuse to send."""

from __future__ import annotations

from typing import Any

import httpx
import mcp_types

MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
"""The ``Accept`` header Streamable HTTP asks of every POST."""

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
"""A client's ``initialize`` request: the first message of a session."""


MODERN = "2026-07-28"
"""The stateless protocol version."""
_NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


async def modern_post(
    url: str,
    method: str,
    params: dict[str, Any],
    *,
    token: str,
    capabilities: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    timeout: float = 60,
) -> httpx.Response:
    """One stateless 2026-07-28 request to ``url`` as a client of that era sends it: the envelope in
    ``_meta`` (its ``capabilities``, none by default), ``MCP-Protocol-Version``, ``Mcp-Method`` and, for a
    named request (a tool, prompt, resource, task), ``Mcp-Name``; ``headers`` add to or replace those."""
    meta = {mcp_types.PROTOCOL_VERSION_META_KEY: MODERN, mcp_types.CLIENT_CAPABILITIES_META_KEY: capabilities or {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta}}
    sent = {
        "Authorization": f"Bearer {token}",
        **MCP_ACCEPT,
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    named = params.get(_NAMED.get(method, "taskId"))
    if isinstance(named, str):
        sent["Mcp-Name"] = named
    async with httpx.AsyncClient(timeout=timeout) as http:
        return await http.post(url, json=body, headers={**sent, **(headers or {})})


async def modern_call(url: str, method: str, params: dict[str, Any], **options: Any) -> dict[str, Any]:
    """``modern_post``'s JSON-RPC answer."""
    answer: dict[str, Any] = (await modern_post(url, method, params, **options)).json()
    return answer
