"""The three upstream transports behind one small interface.

Each transport is an async context manager factory (``connect()``) yielding the SDK's
``(read, write)`` stream pair, plus ``failure_hint()`` to explain a failed connect and ``refused()``
to tell refused credentials (HTTP 401/403) from other failures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from toolmesh.egress.http import REDIRECT_OPTIONS, OriginLock, guarded_client
from toolmesh.egress.policy import EgressPolicy
from toolmesh.sandbox.runner import Sandboxer, SandboxError
from toolmesh_session_worker.upstream.errors import REFUSED, UpstreamMisconfigured
from toolmesh_session_worker.upstream.stdio import MAX_MESSAGE_BYTES, StdioProcess
from toolmesh_session_worker.upstream.streams import TransportStreams

HTTP_CONNECT_TIMEOUT = 30.0
HTTP_READ_TIMEOUT = 3600.0
"""Idle read bound of a response stream; calls are bounded by their own timeout, not by this."""
HTTP_POOL_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=60.0)
SHARED_POOL_LIMITS = httpx2.Limits(max_connections=None, max_keepalive_connections=256, keepalive_expiry=60.0)
"""The pool every session of a worker shares: no cap on open connections (each Streamable HTTP or
SSE session may hold a response stream open for its whole life), idle ones kept for reuse."""


class UpstreamTransport(Protocol):
    """How to reach one upstream server."""

    def connect(self) -> AbstractAsyncContextManager[TransportStreams]:
        """Open the connection; the streams live until the context exits."""
        ...

    def failure_hint(self) -> str:
        """Extra words explaining why a connect failed ("" when there is nothing to add)."""
        ...

    def refused(self) -> int | None:
        """The HTTP 401 or 403 the upstream last answered with, if it did (credentials refused)."""
        ...

    @property
    def pid(self) -> int | None:
        """The local process serving the upstream (STDIO), else None."""
        ...


class _SharedClientTransport(httpx2.AsyncBaseTransport):
    """Sends every request through a shared pooled client; closing it leaves that client open."""

    def __init__(self, client: httpx2.AsyncClient) -> None:
        self._client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return await self._client.send(request, stream=True)

    async def aclose(self) -> None:
        """The shared client belongs to whoever injected it."""


class RefusalWatch:
    """Remembers an HTTP 401/403 answer of the upstream: the SDK turns it into a generic error."""

    def __init__(self) -> None:
        self.status: int | None = None

    async def __call__(self, response: httpx2.Response) -> None:
        if response.status_code in REFUSED:
            self.status = response.status_code


def session_http_client(
    headers: Mapping[str, str],
    shared: httpx2.AsyncClient | None,
    timeout: httpx2.Timeout | None = None,
    *,
    upstream: str,
    egress: EgressPolicy,
    watch: RefusalWatch | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """A client for one session of the server at ``upstream``: its own default headers, connections
    from ``shared`` if given (a client of the same ``egress`` policy), else from a pool of its own
    that follows ``egress``; redirects followed on ``upstream``'s host only; every answer shown to
    ``watch`` if given; every request authenticated by ``auth`` if given (OAuth's bearer token)."""
    timeout = timeout or httpx2.Timeout(HTTP_CONNECT_TIMEOUT, read=HTTP_READ_TIMEOUT)
    hooks: dict[str, list[Callable[..., Any]]] = {
        "request": [OriginLock(upstream)],
        "response": [watch] if watch is not None else [],
    }
    if shared is None:
        return guarded_client(
            egress,
            HTTP_POOL_LIMITS,
            headers=dict(headers),
            timeout=timeout,
            event_hooks=hooks,
            auth=auth,
            **REDIRECT_OPTIONS,
        )
    return httpx2.AsyncClient(
        headers=dict(headers),
        timeout=timeout,
        auth=auth,
        transport=_SharedClientTransport(shared),
        event_hooks=hooks,
        **REDIRECT_OPTIONS,
    )


class _RemoteTransport:
    """What the two HTTP transports share: their URL, headers, HTTP client and egress policy, and
    the refusal their responses showed."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        http_client: httpx2.AsyncClient | None,
        egress: EgressPolicy,
        auth: httpx2.Auth | None = None,
    ) -> None:
        self.url = url
        self._auth = auth
        self._headers = dict(headers)
        self._shared = http_client
        self._egress = egress
        self._refusal = RefusalWatch()

    def failure_hint(self) -> str:
        """Nothing beyond the exception itself."""
        return ""

    def refused(self) -> int | None:
        """The HTTP 401 or 403 the upstream last answered with, if it did."""
        return self._refusal.status

    @property
    def pid(self) -> None:
        """Remote servers have no local process."""
        return None


class StreamableHttpTransport(_RemoteTransport):
    """Streamable HTTP (config: ``base_url``, ``headers``)."""

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """Open the Streamable HTTP session; terminates it (DELETE) on a clean exit."""
        async with session_http_client(
            self._headers, self._shared, upstream=self.url, egress=self._egress, watch=self._refusal, auth=self._auth
        ) as client:
            async with streamable_http_client(
                self.url, http_client=client, max_sse_event_size=MAX_MESSAGE_BYTES
            ) as streams:
                yield streams

    def stateless_client(self) -> httpx2.AsyncClient:
        """A client for the server's 2026-07-28-era requests (each a POST of its own), set up like the
        session's: its headers, auth, egress policy and redirect rule."""
        return session_http_client(
            self._headers, self._shared, upstream=self.url, egress=self._egress, watch=self._refusal, auth=self._auth
        )


class SseTransport(_RemoteTransport):
    """Legacy HTTP+SSE (config: ``url``, ``headers``)."""

    def _client_factory(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        # sse_client enters and closes whatever this returns, so a shared client is wrapped.
        return session_http_client(
            self._headers,
            self._shared,
            timeout,
            upstream=self.url,
            egress=self._egress,
            watch=self._refusal,
            auth=self._auth,
        )

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[TransportStreams]:
        """Open the SSE stream and wait for the server's endpoint event."""
        async with sse_client(
            self.url,
            timeout=HTTP_CONNECT_TIMEOUT,
            sse_read_timeout=HTTP_READ_TIMEOUT,
            httpx_client_factory=self._client_factory,
        ) as streams:
            yield streams


def build_transport(
    server_name: str,
    transport_type: str,
    config: Mapping[str, Any],
    *,
    http_client: httpx2.AsyncClient | None = None,
    stdio_base_env: Mapping[str, str] | None = None,
    stdio_sandbox: Sandboxer | None = None,
    egress: EgressPolicy | None = None,
    auth: httpx2.Auth | None = None,
) -> UpstreamTransport:
    """The transport for a validated, already ``${VAR}``-expanded connection config.

    ``egress`` is where an SSE or Streamable HTTP server's connections may go (public addresses
    only when None; ``http_client`` must be a client of the same policy).

    ``auth`` authenticates an SSE or Streamable HTTP server's requests (OAuth's bearer token).

    ``stdio_base_env`` is what a STDIO server inherits besides its config's ``env`` (nothing when None);
    ``stdio_sandbox`` wraps a STDIO child in the deployment's sandbox (unconfined when None).

    Raises:
        UpstreamMisconfigured: the STDIO child cannot be started sandboxed (see ``toolmesh.sandbox.runner``).
    """
    kind = transport_type.upper()
    if kind == "STDIO" and stdio_sandbox is not None:
        return sandboxed_process(server_name, config, stdio_sandbox, stdio_base_env or {})
    if kind == "STDIO":
        return StdioProcess(
            server_name,
            command=str(config["command"]),
            args=[str(a) for a in config.get("args") or []],
            env={str(k): str(v) for k, v in (config.get("env") or {}).items()},
            cwd=config.get("cwd"),
            base_env=stdio_base_env,
        )
    headers = {str(k): str(v) for k, v in (config.get("headers") or {}).items()}
    if kind == "SSE":
        return SseTransport(str(config["url"]), headers, http_client, egress or EgressPolicy(), auth)
    if kind in ("HTTP", "STREAMABLE_HTTP"):
        return StreamableHttpTransport(str(config["base_url"]), headers, http_client, egress or EgressPolicy(), auth)
    raise ValueError(f"unknown transport type {transport_type!r}")


class SandboxRefused(UpstreamMisconfigured):
    """A STDIO child that cannot run sandboxed as configured; its words are toolmesh's own, safe to show."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.summary = message


def sandboxed_process(
    server_name: str, config: Mapping[str, Any], sandbox: Sandboxer, base_env: Mapping[str, str]
) -> StdioProcess:
    """A STDIO server's process inside ``sandbox``, or ``UpstreamMisconfigured`` saying why it cannot run."""
    env = {**base_env, **{str(k): str(v) for k, v in (config.get("env") or {}).items()}}
    try:
        launch = sandbox.launch(
            str(config["command"]),
            [str(a) for a in config.get("args") or []],
            env,
            config.get("cwd"),
            config.get("sandbox"),
        )
    except SandboxError as exc:
        raise SandboxRefused(f"{server_name}: connect failed: {exc}") from None
    return StdioProcess(
        server_name,
        launch.argv[0],
        launch.argv[1:],
        launch.env,
        cwd=launch.cwd,
        rlimits=launch.rlimits,
        pass_fds=launch.fds,
    )
