"""Raw JSON-RPC over HTTP to ``/mcp``, for tests that check the door itself (before any session) or send
what the SDK client would refuse to send."""

from __future__ import annotations

from typing import Any

MCP_ACCEPT = {"Accept": "application/json, text/event-stream"}
"""The ``Accept`` header Streamable HTTP asks of every POST."""

INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
"""A client's ``initialize`` request: the first message of a session."""
