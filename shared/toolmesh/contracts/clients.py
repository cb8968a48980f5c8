"""Server → client traffic: from the session-worker owning an upstream to the gateway holding a client.

Each MCP client session has one subject, ``toolmesh.client.<replica>.<session>.<kind>``: the gateway
replica holding the session subscribes to ``toolmesh.client.<replica>.>`` once and finds the session
by id. ``request`` (sampling, elicitation, roots) is NATS request/reply; ``notify`` (log messages,
progress, resource updates) is a plain publish; ``answer`` carries a client's answer to one replica's
request from the replica its POST reached (a load balancer without stickiness picks any).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

CLIENT_PREFIX = "toolmesh.client"

FORWARDED_REQUESTS = frozenset({"sampling/createMessage", "elicitation/create", "roots/list"})
"""Server → client requests toolmesh carries to a client."""

NO_CLIENT = -32601
"""JSON-RPC code the upstream gets when no client can take its request (Method not found: the
aggregated session has no client for it, like a client that declared no such capability)."""


def client_id(replica: str, session: str) -> str:
    """The bus id of a client session: its replica and its own id, dot-separated (two subject tokens)."""
    return f"{replica}.{session}"


EVERY_REPLICA = "any"
"""The replica token of a client subject every gateway replica listens on (a replica's own id is 12 hex
digits): a notification for a session's standalone stream that the replica holding the client's link
does not hold goes there, and the replica holding that stream delivers it."""

_ASKED_BY = re.compile(r"tm-([0-9a-f]{12})-[0-9]+")


def asking_id(replica: str, number: int) -> str:
    """The JSON-RPC id of a request a gateway replica sends a client: it names the replica, so the
    client's answer, whichever replica it reaches, finds the one whose call waits for it."""
    return f"tm-{replica}-{number}"


def asked_by(request_id: object) -> str | None:
    """The replica that sent the request a client's answer is for (None: not one of ``asking_id``'s)."""
    found = _ASKED_BY.fullmatch(request_id) if isinstance(request_id, str) else None
    return found.group(1) if found else None


class ClientRequest(BaseModel):
    """An upstream's request for a client (``sampling/createMessage``, ``elicitation/create``, ``roots/list``).

    ``call_id`` is the client's request in flight it belongs to, when known: the gateway sends it on
    that request's stream (Streamable HTTP), else on the session's standalone stream.
    The reply is an ``RpcReply``: ``result`` is the client's result, or ``error`` a JSON-RPC error
    (``code``, ``message``, ``data``).
    """

    server_id: str
    server_name: str
    method: str
    params: dict[str, Any] | None = None
    call_id: str | None = None
    timeout_seconds: float
    request_id: str


class ClientAnswer(BaseModel):
    """A client's answer (a JSON-RPC response or error) to a request of another replica, relayed by the
    replica the client's POST reached to the one that asked (``toolmesh.client.<replica>.<session>.answer``)."""

    message: dict[str, Any]


class ResumeInput(BaseModel):
    """A 2026-07-28 retry (``requestState`` with ``inputResponses``) that reached another replica than
    the one whose upstream request waits for it (``toolmesh.client.<replica>.<parked id>.resume``):
    who presented it and for which request (checked against the parked request as a local retry is),
    and the client's answers. The reply is an ``RpcReply``: ``result`` is ``{"result": ...}`` (the
    upstream's result) or ``{"input_required": ...}`` (another round); ``error`` is a JSON-RPC error, or
    the error table's body of the upstream call's toolmesh error."""

    starter: str
    request: str
    input_responses: dict[str, Any]


class ResumeWithdrawn(BaseModel):
    """The client gave up a retry that another replica relayed (``toolmesh.client.<replica>.<parked
    id>.withdraw``): the replica completing it cancels the upstream call, as the end of a local retry
    would. Only the retry's own ``starter`` withdraws it."""

    starter: str


class ClientNotification(BaseModel):
    """An upstream's notification for a client (``notifications/message``, ``.../resources/updated``, ...).

    ``notifications/cancelled`` with ``{"requestId": <ClientRequest.request_id>}`` withdraws a request
    the upstream gave up on.
    """

    server_id: str
    server_name: str
    method: str
    params: dict[str, Any] | None = None
    call_id: str | None = None
