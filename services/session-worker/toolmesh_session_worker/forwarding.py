"""Verbs that forward MCP requests to an owned upstream as they are: ``request``, ``subscribe``,
``unsubscribe``, ``set_level`` and ``client_gone``."""

from __future__ import annotations

import asyncio
import json

from mcp_types import CONNECTION_CLOSED

from toolmesh.contracts.rpc import (
    ClientGoneRpc,
    ClientGoneRpcResult,
    SetLevelRpc,
    SetLevelRpcResult,
    SubscribeRpc,
    SubscribeRpcResult,
    UpstreamRequestRpc,
)
from toolmesh.errors import ExecutionFailed, ExecutionTimeout, ServerUnavailable, UpstreamAuthorizationRequired
from toolmesh.lifecycle import SERVING
from toolmesh_session_worker.clients import UpstreamClients
from toolmesh_session_worker.owned import OwnedServer
from toolmesh_session_worker.upstream import (
    ProgressCallback,
    Upstream,
    UpstreamError,
    UpstreamRefused,
    UpstreamScopeRequired,
    UpstreamTimeout,
)


def require_lease(server: OwnedServer) -> None:
    """``ServerUnavailable`` unless this worker's lease of the server is younger than its safety
    point: past it, another worker may soon own the server, so nothing more is executed here."""
    if not server.lease_valid():
        raise ServerUnavailable(
            f"Server unavailable: {server.name}: this worker's lease of it lapsed",
            server={"id": server.server_id, "name": server.name, "status": str(server.status)},
        )


def live_session(server: OwnedServer) -> Upstream:
    """The server's session when it can take requests; ``ServerUnavailable`` otherwise."""
    require_lease(server)
    session = server.session
    if session is None or not session.alive or server.draining or server.status not in SERVING:
        raise ServerUnavailable(
            f"Server unavailable: {server.name}",
            server={"id": server.server_id, "name": server.name, "status": str(server.status)},
        )
    return session


async def caller_session(server: OwnedServer, principal: str | None) -> tuple[Upstream, UpstreamClients]:
    """The session a caller's request goes to and the client side its server → client traffic goes
    through: the server's own, or for a server registered with ``auth.identity: per_user`` the
    caller's (opened now when it has none), whose traffic reaches only the caller's clients."""
    session = live_session(server)
    if server.principals is None:
        return session, server.clients
    held = await server.principals.session(principal)
    return held.session, held.clients


def scope_refusal(server: OwnedServer, exc: UpstreamScopeRequired) -> UpstreamAuthorizationRequired | ExecutionFailed:
    """An upstream's insufficient_scope answer in the error table's words: authorize again, the
    authorization asking for the wider scope (per-user identity: the caller; shared: an owner or
    admin), or, when the grant already asked for that scope, a failure no authorization would fix."""
    required = exc.required or "(a scope it did not name)"
    context = {"server_id": server.server_id, "server": server.name, "required_scope": exc.required}
    if exc.wanted is None:
        return ExecutionFailed(
            f"{server.name} refused the request for want of scope {required}, which its authorization already "
            "asked for: authorizing again would not help (the upstream account lacks that permission)",
            context,
        )
    per_user = server.principals is not None
    whose, who = ("your", "authorize again") if per_user else ("its shared", "an owner or admin authorizes it again")
    return UpstreamAuthorizationRequired(
        f"{server.name} requires scope {required} for this request, which {whose} authorization lacks: {who} with "
        f"POST /api/v1/aggregator/servers/{server.server_id}/authorize (it asks for {exc.wanted})",
        {**context, "scope": exc.wanted},
    )


async def grant_refused(
    server: OwnedServer, principal: str | None, exc: UpstreamRefused
) -> UpstreamAuthorizationRequired | ServerUnavailable:
    """The upstream refused the grant in the middle of a session (401, and no renewed token): a
    per-user server's caller loses its session and authorizes again; a shared server is unavailable
    (its own session finds out it needs an authorization when it reconnects)."""
    if server.principals is None or not principal:
        return ServerUnavailable(
            f"Server unavailable: {server.name}: {exc.summary}",
            server={"id": server.server_id, "name": server.name, "status": str(server.status)},
        )
    await server.principals.close(principal)
    return server.principals.required("the upstream refused your grant")


async def request_failure(
    server: OwnedServer, principal: str | None, what: str, exc: UpstreamError
) -> UpstreamAuthorizationRequired | ExecutionFailed | ServerUnavailable:
    """The error table's view of an upstream failure of a caller's request: a grant the upstream
    refused (``grant_refused``), else ``upstream_failure``."""
    if isinstance(exc, UpstreamRefused) and not isinstance(exc, UpstreamScopeRequired):
        return await grant_refused(server, principal, exc)
    return upstream_failure(server, what, exc)


def upstream_failure(
    server: OwnedServer, what: str, exc: UpstreamError
) -> ExecutionFailed | ServerUnavailable | UpstreamAuthorizationRequired:
    """The error table's view of an upstream failure; a JSON-RPC error keeps its code and data."""
    if isinstance(exc, UpstreamScopeRequired):
        return scope_refusal(server, exc)
    if exc.code is not None and exc.code != CONNECTION_CLOSED:
        upstream_error = {"code": exc.code, "message": exc.reason, "data": exc.data}
        return ExecutionFailed(
            f"{what} failed upstream: {exc}",
            {"server": server.name, "upstream_code": exc.code},
            upstream_error=upstream_error,
        )
    return ServerUnavailable(
        f"Server unavailable: {server.name}: {exc.summary}",
        server={"id": server.server_id, "name": server.name, "status": str(server.status)},
    )


async def forward(server: OwnedServer, body: UpstreamRequestRpc, progress: ProgressCallback | None) -> bytes:
    """Send the request upstream; its raw result, the JSON the upstream answered, for the reply."""
    session, clients = await caller_session(server, body.principal)
    if body.call_id:
        server.calls[body.call_id] = asyncio.current_task()  # type: ignore[assignment]
    clients.begin(body.call_id, body.client)
    try:
        require_lease(server)  # right before it is sent: opening a caller's session may have taken long
        result = await session.request(
            body.method,
            body.params,
            timeout=body.timeout_seconds,
            call_id=body.call_id,
            progress=progress,
            envelope=body.envelope,
        )
    except UpstreamTimeout as exc:
        raise ExecutionTimeout(
            f"{body.method} on {server.name} timed out after {body.timeout_seconds:g}s; it was cancelled",
            {"server": server.name, "method": body.method, "timeout_seconds": body.timeout_seconds},
        ) from exc
    except UpstreamError as exc:
        raise await request_failure(server, body.principal, f"{body.method} on {server.name}", exc) from exc
    finally:
        clients.end(body.call_id)
        if body.call_id:
            server.calls.pop(body.call_id, None)
    return json.dumps(result, separators=(",", ":")).encode()


def held_session(server: OwnedServer, principal: str | None) -> tuple[Upstream | None, UpstreamClients | None]:
    """The session (open or not) and client side a caller's earlier requests went to, without opening
    one: the server's own, or a per-user server's session of ``principal`` (None, None: it has none)."""
    if server.principals is None:
        return server.session, server.clients
    held = server.principals.held(principal)
    return (held.session, held.clients) if held is not None else (None, None)


async def subscribe(server: OwnedServer, body: SubscribeRpc) -> SubscribeRpcResult:
    """Reference-counted ``resources/subscribe`` (a per-user server's on the caller's own session)."""
    session, clients = await caller_session(server, body.principal)
    try:
        await clients.subscribe(session, body.uri, body.client)
    except UpstreamError as exc:
        raise await request_failure(server, body.principal, f"resources/subscribe on {server.name}", exc) from exc
    return SubscribeRpcResult(holders=len(clients.subscriptions.get(body.uri, {})))


async def unsubscribe(server: OwnedServer, body: SubscribeRpc) -> SubscribeRpcResult:
    """Reference-counted ``resources/unsubscribe``."""
    session, clients = held_session(server, body.principal)
    if clients is None:
        return SubscribeRpcResult(holders=0)
    try:
        await clients.unsubscribe(session, body.uri, body.client)
    except UpstreamError as exc:
        raise await request_failure(server, body.principal, f"resources/unsubscribe on {server.name}", exc) from exc
    return SubscribeRpcResult(holders=len(clients.subscriptions.get(body.uri, {})))


async def set_level(server: OwnedServer, body: SetLevelRpc) -> SetLevelRpcResult:
    """A client's ``logging/setLevel``: the upstream gets the most verbose level of its clients (a
    per-user server's session of the caller: of the caller's clients)."""
    session, clients = await caller_session(server, body.principal)
    try:
        await clients.set_level(session, body.level, body.client)
    except UpstreamError as exc:
        raise await request_failure(server, body.principal, f"logging/setLevel on {server.name}", exc) from exc
    return SetLevelRpcResult(upstream_level=clients.upstream_level())


async def client_gone(server: OwnedServer, body: ClientGoneRpc) -> ClientGoneRpcResult:
    """Release what a finished client session held on this upstream (on a per-user server, on the
    session of whichever principal it belonged to)."""
    held = [(server.session, server.clients)]
    if server.principals is not None:
        held += server.principals.every_session()
    try:
        for session, clients in held:
            await clients.forget(session, body.client)
    except UpstreamError as exc:
        raise upstream_failure(server, f"releasing a client of {server.name}", exc) from exc
    return ClientGoneRpcResult()
