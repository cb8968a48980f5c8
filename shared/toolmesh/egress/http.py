"""The egress policy on the wire: resolve names, check every address, connect only to checked ones.

``GuardedBackend`` is the network backend of every HTTP connection toolmesh opens to an upstream
(MCP over SSE and Streamable HTTP, REST tool servers, health check URLs): it resolves the host
itself, refuses the connection when any address it resolves to breaks the server's
``EgressPolicy``, and connects to the address it checked (the resolution is pinned: a name that
rebinds to loopback or a metadata address between two lookups gains nothing). TLS still verifies
the URL's host name. Clients built here ignore ``HTTP(S)_PROXY`` (a proxy would connect where the
policy cannot look). ``OriginLock`` refuses any request to another host than the upstream's own,
so redirects are followed on the same host only.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import anyio
import httpcore2
import httpx2

from toolmesh.egress.policy import (
    MAX_REDIRECTS,
    EgressPolicy,
    EgressRefused,
    IPAddress,
    Reach,
    parse_address,
    redirect_problem,
)

RESOLVE_TIMEOUT_SECONDS = 5.0
"""How long a resolution may take when the caller gives no bound of its own."""


class RefusedConnect(httpcore2.ConnectError, EgressRefused):
    """A connection the egress policy refused (an ``httpx2.ConnectError`` to the client, whose
    ``__cause__`` is this)."""

    def __init__(self, refused: EgressRefused) -> None:
        EgressRefused.__init__(self, f"refused by the egress policy: {refused}", refused.reach)


async def resolve(host: str, port: int, timeout: float = RESOLVE_TIMEOUT_SECONDS) -> list[IPAddress]:
    """The addresses ``host`` stands for: itself when it spells an address (any notation), else what
    the system resolver answers (in its order, without repeats).

    Raises:
        EgressRefused: ``host`` looks like an address but is none.
        OSError: the name does not resolve (``socket.gaierror``) or not within ``timeout``.
    """
    literal = parse_address(host)
    if literal is not None:
        return [literal]
    try:
        async with asyncio.timeout(timeout):
            answers = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except TimeoutError as exc:
        raise OSError(f"resolving {host} took longer than {timeout:g}s") from exc
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in answers:
        address = parse_address(str(sockaddr[0]))
        if address is not None and address not in found:
            found.append(address)
    return found


async def check_host(
    host: str, port: int, policy: EgressPolicy, timeout: float = RESOLVE_TIMEOUT_SECONDS
) -> list[IPAddress]:
    """Every address ``host`` resolves to (within ``timeout``), when the policy allows them all.

    Raises:
        EgressRefused: one of them is not allowed.
        OSError: the name does not resolve.
    """
    addresses = await resolve(host, port, timeout)
    for address in addresses:
        policy.check(host, address)
    return addresses


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """Connects only to addresses the policy allows, and to exactly those it checked."""

    def __init__(self, policy: EgressPolicy) -> None:
        self.policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await check_host(host, port, self.policy, timeout or RESOLVE_TIMEOUT_SECONDS)
        except EgressRefused as exc:
            raise RefusedConnect(exc) from exc
        except OSError as exc:
            raise httpcore2.ConnectError(f"cannot resolve {host}: {exc}") from exc
        failure: Exception = httpcore2.ConnectError(f"{host} resolves to no address")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(str(address), port, timeout, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not upstream addresses")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def verifying_context() -> ssl.SSLContext:
    """The one TLS context (system CA bundle, certificates verified) of every guarded connection:
    loading the bundle takes tens of milliseconds, too much to pay for each client (an OAuth token
    refresh builds one)."""
    return httpx2.create_ssl_context(trust_env=False)


@functools.cache
def trusting_context(ca_file: str) -> ssl.SSLContext:
    """A verifying context that also trusts the certificate authorities in ``ca_file`` (an operator's
    internal CA, ``TOOLMESH_EGRESS_CA_FILE``)."""
    context = httpx2.create_ssl_context(trust_env=False)
    context.load_verify_locations(cafile=ca_file)
    return context


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx2's transport over a connection pool whose every connect goes through ``GuardedBackend``.

    httpx2 takes no network backend, so the pool its constructor built is replaced by one that uses
    ours (``handle_async_request`` and ``aclose`` only use that pool).
    """

    def __init__(self, policy: EgressPolicy, limits: httpx2.Limits, context: ssl.SSLContext | None = None) -> None:
        context = context or verifying_context()
        super().__init__(verify=context, limits=limits, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(policy),
        )


def guarded_client(policy: EgressPolicy, limits: httpx2.Limits, **options: Any) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose connections follow ``policy`` (``options`` as for the client)."""
    return httpx2.AsyncClient(transport=GuardedTransport(policy, limits), trust_env=False, **options)


def egress_refused(exc: BaseException) -> EgressRefused | None:
    """The ``EgressRefused`` behind ``exc`` (itself, a cause or a context), if there is one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, EgressRefused):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class OriginLock:
    """A request hook: every request of a client goes to the host of ``url`` (a redirect to another
    host, another port or down to http is refused before it is sent)."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def __call__(self, request: httpx2.Request) -> None:
        problem = redirect_problem(self.url, str(request.url))
        if problem is not None:
            refused = EgressRefused(f"{problem}: {request.url.scheme}://{request.url.host}", Reach.FORBIDDEN)
            raise httpx2.ConnectError(f"refused by the egress policy: {refused}", request=request) from refused


REDIRECT_OPTIONS: dict[str, Any] = {"follow_redirects": True, "max_redirects": MAX_REDIRECTS}
"""Client options for upstream sessions: same-host redirects (``OriginLock``) within a small limit."""


class EgressClients:
    """One pooled client per egress policy (a connection opened for one policy never serves another),
    made on first use and closed together."""

    def __init__(self, limits: httpx2.Limits) -> None:
        self._limits = limits
        self._clients: dict[EgressPolicy, httpx2.AsyncClient] = {}

    def client(self, policy: EgressPolicy) -> httpx2.AsyncClient:
        """The pooled client of ``policy``."""
        if policy not in self._clients:
            self._clients[policy] = guarded_client(policy, self._limits)
        return self._clients[policy]

    async def aclose(self) -> None:
        """Close every client."""
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await client.aclose()

    async def __aenter__(self) -> EgressClients:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
