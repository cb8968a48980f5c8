"""Requests to the session-worker that owns a server (``toolmesh.rpc.<server_id>.<verb>``)."""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from opentelemetry.trace import SpanKind
from pydantic import BaseModel

from toolmesh.contracts.rpc import RpcReply, rpc_subject
from toolmesh.errors import SessionNotFound, error_from_body
from toolmesh.telemetry import mark_error, outgoing_headers, span


class NoOwner(SessionNotFound):
    """Nobody holds a session for the server (NATS "no responders")."""


async def ask_owner(nc: NATS, server_id: str, verb: str, body: BaseModel, *, timeout: float) -> dict[str, Any]:
    """Send one request to the owner and return its result, or raise the error it answered."""
    subject = rpc_subject(server_id, verb)
    attributes = {"messaging.system": "nats", "messaging.destination.name": subject, "toolmesh.server_id": server_id}
    with span(f"nats request {verb}", kind=SpanKind.CLIENT, attributes=attributes) as current:
        try:
            msg = await nc.request(
                subject, body.model_dump_json().encode(), timeout=timeout, headers=outgoing_headers()
            )
        except NoRespondersError as exc:
            mark_error(current, "no responders")
            raise NoOwner(f"No active session for server {server_id}", {"server_id": server_id}) from exc
        except NatsTimeout as exc:
            mark_error(current, "timeout")
            raise SessionNotFound(
                f"The session of server {server_id} did not answer within {timeout:.0f}s",
                {"server_id": server_id, "verb": verb},
            ) from exc
        reply = RpcReply.model_validate_json(msg.data)
        if not reply.ok:
            mark_error(current, str((reply.error or {}).get("error_code", "error")))
            raise error_from_body(reply.error or {})
        return reply.result or {}
