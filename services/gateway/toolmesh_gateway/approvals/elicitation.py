"""Asking an MCP client's user whether a tool call may run, through elicitation.

The question travels as any upstream's server → client request does (``verbs.CLIENT_REQUEST`` to the
client's bus id, ``ClientRef.id``), so it reaches the gateway replica holding the client's session.
A handshake-era (2025) client gets an ``elicitation/create`` request on the call's own stream
(``PendingCall.call_id``) or the session's standalone stream; a 2026-07-28 client, whose call runs
in the ``InputBridge``, gets it as an input request of an ``InputRequiredResult`` and answers it
in its retry.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from toolmesh.contracts.approvals import ApprovalState
from toolmesh.contracts.clients import ClientNotification, ClientRequest
from toolmesh.contracts.rpc import ClientRef, RpcReply
from toolmesh.platform.bus import dispatch, verbs
from toolmesh.platform.bus.interface import Bus
from toolmesh_gateway.approval_requests import PendingCall

log = logging.getLogger("toolmesh.gateway.approvals")
SHOWN_VALUE_CHARS = 200
"""The most characters of one argument's value the question shows."""
SHOWN_ARGUMENTS_CHARS = 1500
"""The most characters of all the arguments the question shows."""
ANSWERS = {"accept": ApprovalState.APPROVED, "decline": ApprovalState.REJECTED, "cancel": ApprovalState.REJECTED}
"""The state each elicitation action decides."""


def summary(arguments: dict[str, Any]) -> str:
    """The arguments as the question shows them: each value cut to ``SHOWN_VALUE_CHARS``, the whole
    to ``SHOWN_ARGUMENTS_CHARS``."""
    parts = []
    for name, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if len(text) > SHOWN_VALUE_CHARS:
            text = text[:SHOWN_VALUE_CHARS] + "…"
        parts.append(f"{name}={text}")
    shown = ", ".join(parts) or "(no arguments)"
    return shown if len(shown) <= SHOWN_ARGUMENTS_CHARS else shown[:SHOWN_ARGUMENTS_CHARS] + "…"


def question(call: PendingCall) -> str:
    """What the client's user reads: what will run, with what, and why it needs a yes."""
    return (
        f"Allow {call.server_name}.{call.tool} to run?\n"
        f"Arguments: {summary(call.arguments)}\n"
        f"Why you are asked: {call.reason} (policy {call.policy})"
    )


async def ask(bus: Bus, client: ClientRef, call: PendingCall, timeout: float) -> ApprovalState | None:
    """The user's answer (``APPROVED`` or ``REJECTED``), or None when the client could not answer
    (gone, refused the request, or silent for ``timeout`` seconds): an approver decides then."""
    params = {"mode": "form", "message": question(call), "requestedSchema": {"type": "object", "properties": {}}}
    body = ClientRequest(
        server_id=call.server_id,
        server_name=call.server_name,
        method="elicitation/create",
        params=params,
        call_id=call.call_id,
        timeout_seconds=timeout,
        request_id=uuid.uuid4().hex,
    )
    try:
        data = await dispatch.request(bus, verbs.CLIENT_REQUEST, client.id, body, timeout=timeout + 1.0)
    except (NoRespondersError, NatsTimeout) as exc:
        log.info("approval question to client %s got no answer: %r", client.id, exc)
        return None
    except asyncio.CancelledError:  # decided elsewhere first, or the call went away: take the question back
        await asyncio.shield(_withdraw(bus, client, body))
        raise
    reply = RpcReply.model_validate_json(data)
    action = (reply.result or {}).get("action") if reply.ok else None
    if action not in ANSWERS:
        log.info("approval question to client %s not answered: %s", client.id, reply.error)
        return None
    return ANSWERS[str(action)]


async def _withdraw(bus: Bus, client: ClientRef, asked: ClientRequest) -> None:
    """Tell the client's replica the question is moot (``notifications/cancelled``): it stops waiting
    and the client is told."""
    body = ClientNotification(
        server_id=asked.server_id,
        server_name=asked.server_name,
        method="notifications/cancelled",
        params={"requestId": asked.request_id, "reason": "the approval was decided or withdrawn"},
    )
    try:
        await dispatch.publish(bus, verbs.CLIENT_NOTIFY, client.id, body)
    except Exception as exc:  # best effort: the question's own timeout ends it too
        log.debug("could not withdraw an approval question: %s", exc)
