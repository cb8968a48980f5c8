"""Opening an upstream: an MCP session over STDIO, SSE or Streamable HTTP, a REST tool server, or an
HTTP API an OpenAPI document describes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from toolmesh.contracts.headers import headers_problems
from toolmesh.egress.policy import EgressPolicy, rest_base_problem, url_problem
from toolmesh.sandbox.runner import Sandboxer
from toolmesh_session_worker.upstream.callbacks import ListChangedCallback, LostCallback, ToolsChangedCallback
from toolmesh_session_worker.upstream.client_side import ClientSide
from toolmesh_session_worker.upstream.errors import UpstreamError, UpstreamMisconfigured, UpstreamRefused
from toolmesh_session_worker.upstream.modern import ModernSession
from toolmesh_session_worker.upstream.openapi.session import open_openapi_session
from toolmesh_session_worker.upstream.rest import RestPolicy, open_rest_session
from toolmesh_session_worker.upstream.session import DISCOVER_TIMEOUT_SECONDS, UpstreamSession
from toolmesh_session_worker.upstream.surface import Upstream
from toolmesh_session_worker.upstream.transports import StreamableHttpTransport, build_transport


@dataclass(frozen=True)
class OpeningOptions:
    """How ``open_session`` connects an upstream and whom it tells about it.

    ``http_client`` is a shared pooled client for the HTTP transports (the config headers are still
    applied per session); without it each session pools its own. ``stdio_base_env`` is the environment
    a STDIO server inherits besides its config's ``env`` (see ``base_environment``); without it the
    server gets only its config's ``env``. ``stdio_sandbox`` wraps a STDIO server's process in the
    deployment's sandbox (``toolmesh.sandbox.runner``). ``rest_policy`` holds a REST tool server's retries.
    ``egress`` is where the server's HTTP connections may go (``toolmesh.egress.policy``; public addresses
    only when None); ``http_client`` must then be a client of the same policy.
    """

    connect_timeout: float
    on_tools_changed: ToolsChangedCallback | None = None
    on_lost: LostCallback | None = None
    http_client: httpx2.AsyncClient | None = None
    stdio_base_env: Mapping[str, str] | None = None
    stdio_sandbox: Sandboxer | None = None
    client_side: ClientSide | None = None
    on_list_changed: ListChangedCallback | None = None
    rest_policy: RestPolicy | None = None
    egress: EgressPolicy | None = None
    auth: httpx2.Auth | None = None
    """Authenticates a network server's requests, MCP, REST or OpenAPI (``BearerAuth`` for an OAuth server)."""


async def open_session(
    server_name: str, transport_type: str, config: Mapping[str, Any], options: OpeningOptions
) -> Upstream:
    """Connect to an upstream server and run the MCP handshake within ``options.connect_timeout`` seconds.

    ``transport_type`` is ``STDIO``, ``SSE`` or ``HTTP`` (Streamable HTTP), or ``REST`` for a REST
    tool server (connected by its ``/health``, with ``options.rest_policy``'s retries), or ``OPENAPI``
    (its document read, with ``options.rest_policy``'s timeout); ``config`` is validated and
    ``${VAR}``-expanded.

    Raises:
        UpstreamMisconfigured: the egress policy refuses the server's URL, or a header is not a valid
            HTTP field (both checked again here, after ``${VAR}`` expansion), or, at connect, the
            egress policy refuses the address the URL resolves to.
        UpstreamError: the server could not be started or reached, or the handshake failed.
    """
    kind = transport_type.upper()
    if kind != "STDIO":
        _refuse_unsafe_config(server_name, kind, config)
    if kind == "REST":
        return await open_rest_session(
            server_name,
            config,
            options.rest_policy or RestPolicy(),
            connect_timeout=options.connect_timeout,
            on_lost=options.on_lost,
            on_tools_changed=options.on_tools_changed,
            http_client=options.http_client,
            egress=options.egress,
            auth=options.auth,
        )
    if kind == "OPENAPI":
        return await open_openapi_session(
            server_name,
            config,
            options.rest_policy or RestPolicy(),
            connect_timeout=options.connect_timeout,
            http_client=options.http_client,
            egress=options.egress,
            auth=options.auth,
        )
    return await _open_mcp_session(server_name, transport_type, config, options)


_URL_FIELDS = {"HTTP": ("base_url",), "STREAMABLE_HTTP": ("base_url",), "OPENAPI": ("spec_url", "base_url")}


def _refuse_unsafe_config(server_name: str, kind: str, config: Mapping[str, Any]) -> None:
    """Raise ``UpstreamMisconfigured`` when the egress policy refuses a network server's URL or a
    header is not a valid HTTP field."""
    for field in _URL_FIELDS.get(kind, ("url",)):
        url = config.get(field)
        if url is None and kind == "OPENAPI":
            continue  # an inline document, or the document's own servers (checked when it is read)
        if problem := url_problem(str(url)) or (kind == "REST" and rest_base_problem(str(url))):
            words = f"{server_name}: connect failed: refused by the egress policy: {problem}"
            raise UpstreamMisconfigured(words, summary=words)
    headers = config.get("headers")
    if isinstance(headers, Mapping) and (problems := headers_problems(headers)):
        # A registration from before the header rule, or a ${VAR} that expanded to several lines: the
        # HTTP client would refuse the header, quoting its value (a credential) in its error.
        words = f"{server_name}: connect failed: {'; '.join(problems)}"
        raise UpstreamMisconfigured(words, summary=words)


async def _open_mcp_session(
    server_name: str, transport_type: str, config: Mapping[str, Any], options: OpeningOptions
) -> UpstreamSession | ModernSession:
    """Start an MCP session over the server's transport and run its handshake; a Streamable HTTP
    server that fails the handshake but speaks the 2026-07-28 era is reached in that era only."""
    transport = build_transport(
        server_name,
        transport_type,
        config,
        http_client=options.http_client,
        stdio_base_env=options.stdio_base_env,
        stdio_sandbox=options.stdio_sandbox,
        egress=options.egress,
        auth=options.auth,
    )
    told: dict[str, Any] = {
        "on_tools_changed": options.on_tools_changed,
        "on_lost": options.on_lost,
        "client_side": options.client_side,
        "on_list_changed": options.on_list_changed,
    }
    session = UpstreamSession(server_name, transport, **told)
    try:
        await session.start(options.connect_timeout)
    except (UpstreamRefused, UpstreamMisconfigured):
        raise
    except UpstreamError as handshake_failure:
        if not isinstance(transport, StreamableHttpTransport):
            raise
        modern = ModernSession(server_name, transport, **told)
        try:
            await modern.start(min(options.connect_timeout, DISCOVER_TIMEOUT_SECONDS))
        except UpstreamError:
            raise handshake_failure from None
        return modern
    return session
