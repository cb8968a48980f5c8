"""Requests to the session-worker that owns a server: ``toolmesh.rpc.<server_id>.<verb>``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from toolmesh.lifecycle import ServerStatus

RPC_PREFIX = "toolmesh.rpc"
PROGRESS_PREFIX = "toolmesh.progress"


def progress_subject(call_id: str) -> str:
    """Where the owner publishes ``ToolProgress`` of the call ``call_id`` (asked with ``progress``)."""
    return f"{PROGRESS_PREFIX}.{call_id}"


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


class RefreshRpcResult(BaseModel):
    """The owner started discovery again."""

    status: str


class CallToolRpc(BaseModel):
    """Verb ``call``: call one upstream tool by its original name.

    The reply's ``result`` is the upstream ``CallToolResult`` as the MCP wire spells it
    (``content``, ``isError``, ``structuredContent``). ``call_id`` names the call for ``cancel``.
    With ``progress`` (and a ``call_id``) the owner asks the upstream for progress notifications
    and publishes each as a ``ToolProgress`` on ``progress_subject(call_id)`` while the call runs.
    """

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds: float
    call_id: str | None = None
    progress: bool = False
    client: ClientRef | None = None
    principal: str | None = None
    """The caller's key id: a server registered with ``auth.identity: per_user`` is called as this
    principal's own upstream identity."""


class ToolProgress(BaseModel):
    """One upstream ``notifications/progress`` of a call, as published on ``progress_subject``."""

    progress: float
    total: float | None = None
    message: str | None = None


class CancelCallRpc(BaseModel):
    """Verb ``cancel``: abandon the call named ``call_id`` (the upstream gets notifications/cancelled).

    Sent without a reply subject by a caller that gave up (timeout, client gone); answered when asked.
    """

    call_id: str


class CancelCallRpcResult(BaseModel):
    """Whether the call was still running (and is now cancelled)."""

    cancelled: bool


class PingRpc(BaseModel):
    """Verb ``ping``: an MCP ping on the live session."""

    timeout_seconds: float = 5.0


class PingRpcResult(BaseModel):
    """How long the upstream took to answer the ping."""

    response_time_ms: float


class HealthVerdictRpc(BaseModel):
    """Verb ``health``: the health-worker's BR-006 verdict, applied by the owner of the session.

    ``status`` DEGRADED or CONNECTED (history ``DEGRADED`` / ``RECOVERED``) is published as is;
    ``reconnect`` (status ERROR) makes the owner close the session and reconnect with the EC-001
    backoff, ending CONNECTED or, after the last attempt, ERROR.
    """

    status: ServerStatus
    history: str
    error: str | None = None
    consecutive_failures: int = 0
    reconnect: bool = False


class HealthVerdictResult(BaseModel):
    """What the owner did with a verdict: the status it now reports, and the event's sequence."""

    status: ServerStatus
    reconnecting: bool = False
    seq: int | None = None


class ClientRef(BaseModel):
    """The MCP client session a request comes from, so the owner can send it server → client traffic.

    ``id`` names the session on the bus (``toolmesh.platform.bus.verbs.CLIENT``); the flags
    are what the client declared at initialize, so a request it cannot answer is refused upstream
    at once with a JSON-RPC error instead of timing out.
    """

    id: str
    sampling: bool = False
    elicitation: bool = False
    roots: bool = False


class UpstreamRequestRpc(BaseModel):
    """Verb ``request``: one MCP request forwarded to the upstream as is (``method`` + raw ``params``).

    The reply's ``result`` is the upstream's raw result; a JSON-RPC error of the upstream comes back
    as ``EXECUTION_FAILED`` with ``upstream_error`` (``code``, ``message``, ``data``). ``call_id``
    names it for ``cancel``; with ``progress`` the owner publishes ``ToolProgress`` on
    ``progress_subject(call_id)``. Server → client requests the upstream makes while it runs go to
    ``client``.
    """

    method: str
    params: dict[str, Any] | None = None
    timeout_seconds: float
    call_id: str | None = None
    progress: bool = False
    client: ClientRef | None = None
    principal: str | None = None
    """The caller's key id: a server registered with ``auth.identity: per_user`` is called as this
    principal's own upstream identity."""
    envelope: dict[str, Any] | None = None
    """A 2026-07-28 client's request envelope (its ``_meta`` protocol version, capabilities, log
    level): the request goes upstream in that era, with ``inputResponses`` and ``requestState`` as
    ``params`` carry them, when the upstream speaks it; its ``InputRequiredResult`` comes back as is."""


class SubscribeRpc(BaseModel):
    """Verbs ``subscribe`` / ``unsubscribe``: a client's interest in one resource URI.

    The owner keeps one upstream subscription per URI however many clients hold it
    (reference-counted) and sends ``notifications/resources/updated`` to every holder.
    """

    uri: str
    client: ClientRef
    principal: str | None = None
    """The client's key id: a server registered with ``auth.identity: per_user`` subscribes on this
    principal's own upstream session."""


class SubscribeRpcResult(BaseModel):
    """How many clients hold the URI now."""

    holders: int


class SetLevelRpc(BaseModel):
    """Verb ``set_level``: the log level a client asked for; the upstream gets the most verbose one."""

    level: str
    client: ClientRef
    principal: str | None = None
    """The client's key id: a server registered with ``auth.identity: per_user`` sets the level on this
    principal's own upstream session."""


class SetLevelRpcResult(BaseModel):
    """The level the upstream now logs at (the most verbose any client asked for)."""

    upstream_level: str


class ClientGoneRpc(BaseModel):
    """Verb ``client_gone``: a client session ended; drop its subscriptions and log level."""

    client: ClientRef


class ClientGoneRpcResult(BaseModel):
    """Nothing to report: the client's subscriptions and level are gone."""


CallToolRpc.model_rebuild()
