"""Requests to the session-worker that owns a server: ``toolmesh.rpc.<server_id>.<verb>``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

RPC_PREFIX = "toolmesh.rpc"


def rpc_subject(server_id: str, verb: str) -> str:
    """The request subject of one verb of one server's owner."""
    return f"{RPC_PREFIX}.{server_id}.{verb}"


def rpc_wildcard(server_id: str) -> str:
    """What an owner subscribes to for one server."""
    return f"{RPC_PREFIX}.{server_id}.*"


class RpcReply(BaseModel):
    """Envelope of every reply: ``ok`` with a result, or an error body of the error table."""

    ok: bool
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class DisconnectRpc(BaseModel):
    """Verb ``disconnect``: close the session, draining (or cancelling) pending calls."""

    force: bool = False
    actor: str | None = None


class DisconnectRpcResult(BaseModel):
    """What the owner did: ``DISCONNECTED``, or ``DISCONNECTING`` while calls drain."""

    status: str
    pending_requests: int
    seq: int | None = None


class RefreshRpc(BaseModel):
    """Verb ``refresh``: run ``tools/list`` again and publish the snapshot."""

    actor: str | None = None


class CallToolRpc(BaseModel):
    """Verb ``call``: call one upstream tool by its original name."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds: float


class PingRpc(BaseModel):
    """Verb ``ping``: an MCP ping on the live session."""

    timeout_seconds: float = 5.0
