"""MCP client sessions shared by the gateway replicas: the record each keeps in the sessions bucket
(keyed by ``mcp-session-id``) and the announcement that one ended.

Any replica can serve a request of a session it did not open: it rebuilds the SDK's connection
state from the record (the negotiated protocol version, the client's ``initialize`` params) and
checks that the request comes from the key, namespace and path that opened it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

SESSION_ENDED_SUBJECT = "toolmesh.mcp.session.ended"
"""Where a replica announces that a session ended (HTTP DELETE), so every replica drops its copy."""


class McpSessionRecord(BaseModel):
    """What a replica needs to serve a session it did not open."""

    path: str
    """The endpoint that opened it (``/mcp`` or ``/mcp/{name}``): the only one it works at."""
    key_id: str
    namespace: str | None
    protocol_version: str
    client_params: dict[str, Any]
    """The client's ``initialize`` params (capabilities, client info), as sent."""
    touched_at: float
    """Unix time of the last write: the record's idle TTL counts from there."""

    def belongs_to(self, path: str, key_id: str, namespace: str | None) -> bool:
        """Whether a request at ``path`` by ``key_id`` in ``namespace`` may use the session."""
        return (self.path, self.key_id, self.namespace) == (path, key_id, namespace)


class McpSessionEnded(BaseModel):
    """A session ended: replicas holding a copy of it terminate it."""

    session_id: str
