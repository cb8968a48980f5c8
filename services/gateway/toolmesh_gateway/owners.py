"""Requests to the session-worker that owns a server (``toolmesh.rpc.<server_id>.<verb>``)."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import BaseModel

from toolmesh.contracts.rpc import RpcReply, rpc_subject
from toolmesh.errors import SessionNotFound, error_from_body
from toolmesh.telemetry import outgoing_headers


class NoOwner(SessionNotFound):
    """Nobody holds a session for the server (NATS "no responders")."""


async def ask_owner(nc: NATS, server_id: str, verb: str, body: BaseModel, *, timeout: float) -> dict[str, Any]:
    """Send one request to the owner and return its result, or raise the error it answered."""
    try:
        msg = await nc.request(
            rpc_subject(server_id, verb),
            body.model_dump_json().encode(),
            timeout=timeout,
            headers=outgoing_headers(),
        )
    except NoRespondersError as exc:
        raise NoOwner(f"No active session for server {server_id}", {"server_id": server_id}) from exc
    except NatsTimeout as exc:
        raise SessionNotFound(
            f"The session of server {server_id} did not answer within {timeout:.0f}s",
            {"server_id": server_id, "verb": verb},
        ) from exc
    reply = RpcReply.model_validate_json(msg.data)
    if not reply.ok:
        raise error_from_body(reply.error or {})
    return reply.result or {}
