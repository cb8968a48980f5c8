"""An HTTP API an OpenAPI document describes, behind the upstream surface: each operation a tool.

* connect and every tool listing read the document (``spec_url``, or ``spec`` inline) again, so a
  refresh sees a changed API and pinning holds a changed operation like any changed tool;
* a call is the operation's HTTP request (``openapi.requests``) to the API's base URL, with the
  config's ``headers`` and the credentials its security requirement asks for (for a server registered
  with ``auth``, the grant's access token where the requirement names the grant's scheme, renewed by
  ``auth`` as for a REST server; a grant the API refuses is ``UpstreamRefused``); a 2xx answer is the
  result (its JSON object also as structured content when the operation declares an object answer),
  any other status a tool error quoting it;
* ping reads the document's URL (any answer below 500), or the base URL for an inline document.

Every request goes only where the server's egress policy allows, on the host of its URL (same-host
redirects only): the document from ``spec_url``'s host, calls to the base URL's host. Documents are
read up to ``DOCUMENT_MAX_BYTES``, answers up to ``RESPONSE_MAX_BYTES`` (past it the call is a tool
error saying so).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import httpx2
import mcp_types
from pydantic import ValidationError

from toolmesh.contracts.openapi_config import DOCUMENT_MAX_BYTES
from toolmesh.contracts.openapi_oauth import NoOAuthScheme, oauth_scheme
from toolmesh.contracts.upstream_auth import upstream_auth
from toolmesh.egress.http import egress_refused
from toolmesh.egress.policy import EgressPolicy
from toolmesh_session_worker.upstream.challenges import MET, GrantRefused, ScopeChallenge, refusal
from toolmesh_session_worker.upstream.errors import UpstreamError, UpstreamMisconfigured, UpstreamTimeout, describe
from toolmesh_session_worker.upstream.openapi.document import (
    DocumentProblem,
    TooLarge,
    api_base,
    parse_document,
    read_bounded,
)
from toolmesh_session_worker.upstream.openapi.operations import Operation, Selection, read_operations
from toolmesh_session_worker.upstream.openapi.requests import ArgumentProblem, HttpCall, build_call, security_schemes
from toolmesh_session_worker.upstream.rest import RestPolicy
from toolmesh_session_worker.upstream.tools_only import ToolsOnlySession
from toolmesh_session_worker.upstream.translation import MCPToolNotFoundError, as_error
from toolmesh_session_worker.upstream.transports import session_http_client
from toolmesh_session_worker.upstream.wire import ProgressCallback

RESPONSE_MAX_BYTES = 4 * 1024 * 1024
"""The longest answer of an API call toolmesh reads."""
ERROR_TEXT_CHARS = 2000
"""How much of a failed call's answer its tool error quotes."""
OPENAPI_VERSION = "1.0.0"


class OpenApiSession(ToolsOnlySession):
    """An OpenAPI-described API in use. Build it with ``open_openapi_session``."""

    def __init__(
        self,
        server_name: str,
        config: Mapping[str, Any],
        policy: RestPolicy,
        *,
        http_client: httpx2.AsyncClient | None = None,
        egress: EgressPolicy | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        super().__init__(server_name, "an OpenAPI server", "OpenAPI", OPENAPI_VERSION)
        self._spec_url = str(config["spec_url"]) if "spec_url" in config else None
        self._inline = config.get("spec") if isinstance(config.get("spec"), dict) else None
        self._base_url = str(config["base_url"]) if "base_url" in config else None
        self._headers = {
            "Accept": "application/json",
            **{str(k): str(v) for k, v in (config.get("headers") or {}).items()},
        }
        self._credentials = {str(k): str(v) for k, v in (config.get("credentials") or {}).items()}
        self._credentialed = bool(config.get("credentials") or config.get("headers"))
        self._selection = Selection(dict(config.get("include") or {}), dict(config.get("exclude") or {}))
        self._timeout = policy.timeout_seconds
        self._shared = http_client
        self._egress = egress or EgressPolicy()
        self._document_client = self._client(self._spec_url) if self._spec_url is not None else None
        self._api_client: httpx2.AsyncClient | None = None
        self._retired: list[httpx2.AsyncClient] = []
        self._base = ""
        self._operations: dict[str, Operation] = {}
        self._schemes: dict[str, Any] = {}
        self._auth = auth
        oauth = upstream_auth(dict(config)) if auth is not None else None
        self._oauth_named = oauth.scheme if oauth is not None else None
        self._oauth: str | None = None

    async def connect(self, connect_timeout: float) -> None:
        """Read the document and its operations within ``connect_timeout``."""
        await self._load(min(connect_timeout, self._timeout))
        self._alive = True

    async def list_tools(self, *, timeout: float = 60.0) -> list[mcp_types.Tool]:
        """The document's operations (read again) as tools."""
        await self._load(timeout)
        try:
            return [mcp_types.Tool.model_validate(op.definition) for op in self._operations.values()]
        except ValidationError as exc:
            words = f"{self.server_name}: protocol error: an operation is no valid tool"
            raise UpstreamError(f"{words}: {exc}", summary=words) from exc

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
        call_id: str | None = None,
    ) -> mcp_types.CallToolResult:
        """The operation's HTTP request; a non-2xx answer or an unusable call is ``is_error``.

        Raises:
            ToolNotFound: the document has no such operation (as of its last reading).
            UpstreamTimeout: no answer within ``timeout``.
            UpstreamError: the API could not be reached; ``UpstreamMisconfigured`` when the egress
                policy refused the request.
        """
        operation = self._operations.get(name)
        if operation is None or self._api_client is None:
            raise as_error(MCPToolNotFoundError(name, list(self._operations)), self.server_name, name)
        try:
            call = build_call(operation, arguments, self._base, self._schemes, self._credentials, self._oauth)
        except ArgumentProblem as exc:
            return _failure(str(exc))
        self._pending += 1
        try:
            return await self._send(self._api_client, operation, call, timeout)
        finally:
            self._pending -= 1

    async def ping(self, *, timeout: float) -> None:
        """The document's URL (or, inline, the base URL) answers below 500 within ``timeout``."""
        client = self._document_client or self._api_client
        url = self._spec_url or self._base
        if client is None:
            raise UpstreamError(f"{self.server_name}: not connected", summary="not connected")
        status, _ = await self._exchange(client, "GET", url, timeout, "checking health", 0)
        if status >= 500:
            words = f"{self.server_name}: the health check answered HTTP {status}"
            raise UpstreamError(words, summary=words)

    async def _answer_call(self, name: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        result = await self.call_tool(name, arguments, timeout=timeout)
        return result.model_dump(by_alias=True, mode="json", exclude_none=True)

    async def close(self) -> None:
        """Stop using the API and close the connection pools. Idempotent."""
        self._alive = False
        for client in (self._document_client, self._api_client):
            if client is not None:
                await client.aclose()
        await self._close_retired()

    # -- internals ---------------------------------------------------------------------------

    def _client(self, upstream: str) -> httpx2.AsyncClient:
        return session_http_client(
            self._headers, self._shared, httpx2.Timeout(self._timeout), upstream=upstream, egress=self._egress
        )

    async def _close_retired(self) -> None:
        """Close the clients of base URLs the document no longer names."""
        while self._retired:
            await self._retired.pop().aclose()

    async def _load(self, timeout: float) -> None:
        """Read the document, its operations and its base URL (a new base URL gets a client of its own;
        the old one is closed once no call is in flight)."""
        document = self._inline if self._inline is not None else await self._fetch(timeout)
        try:
            base = api_base(document, self._base_url, self._spec_url, credentialed=self._credentialed)
            operations = read_operations(document, self._selection)
            oauth = oauth_scheme(document, self._oauth_named)[0] if self._auth is not None else None
        except (DocumentProblem, NoOAuthScheme) as exc:
            words = f"{self.server_name}: unusable OpenAPI document: {exc}"
            raise UpstreamMisconfigured(words, summary=words) from exc
        if base != self._base or self._api_client is None:
            if self._api_client is not None:
                self._retired.append(self._api_client)  # calls in flight may still use it
            self._api_client, self._base = self._client(base), base
        if self._pending == 0:
            await self._close_retired()
        self._schemes = security_schemes(document)
        self._oauth = oauth
        self._operations = {op.tool: op for op in operations}

    async def _fetch(self, timeout: float) -> dict[str, Any]:
        assert self._document_client is not None and self._spec_url is not None
        what = "reading the document"
        status, raw = await self._exchange(
            self._document_client, "GET", self._spec_url, timeout, what, DOCUMENT_MAX_BYTES
        )
        if status != 200:
            words = f"{self.server_name}: reading the OpenAPI document answered HTTP {status}"
            raise UpstreamError(words, summary=words)
        if raw is None:
            words = f"{self.server_name}: the OpenAPI document is longer than {DOCUMENT_MAX_BYTES} bytes"
            raise UpstreamMisconfigured(words, summary=words)
        try:
            return parse_document(raw)
        except DocumentProblem as exc:
            words = f"{self.server_name}: unusable OpenAPI document: {exc}"
            raise UpstreamMisconfigured(words, summary=words) from exc

    async def _send(
        self, client: httpx2.AsyncClient, operation: Operation, call: HttpCall, timeout: float
    ) -> mcp_types.CallToolResult:
        options: dict[str, Any] = {"params": call.params, "headers": call.headers}
        if call.has_body:
            options["json"] = call.body
        if call.bearer and self._auth is not None:
            options["auth"] = self._auth
        what = f"calling {operation.tool}"
        met: list[ScopeChallenge | GrantRefused] = []  # what the grant met (``BearerAuth`` notes it)
        listening = MET.set(met)
        try:
            status, raw = await self._exchange(
                client, call.method, call.url, timeout, what, RESPONSE_MAX_BYTES, **options
            )
        finally:
            MET.reset(listening)
        if (refused := refusal(self.server_name, what, met)) is not None:
            raise refused
        where = f"{operation.method} {operation.path}"
        if raw is None:
            return _failure(f"{where}: the answer is longer than {RESPONSE_MAX_BYTES} bytes and was cut off")
        text = raw.decode("utf-8", errors="replace")
        if not 200 <= status < 300:
            return _failure(f"{where} answered HTTP {status}: {text[:ERROR_TEXT_CHARS]}")
        structured = None
        if "outputSchema" in operation.definition:
            try:
                parsed = json.loads(raw)
            except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
                parsed = None
            structured = parsed if isinstance(parsed, dict) else None
        content: list[mcp_types.ContentBlock] = [mcp_types.TextContent(type="text", text=text)]
        return mcp_types.CallToolResult(content=content, structured_content=structured, is_error=False)

    async def _exchange(
        self, client: httpx2.AsyncClient, method: str, url: str, timeout: float, what: str, limit: int, **options: Any
    ) -> tuple[int, bytes | None]:
        """One request within ``timeout`` in all: its status and its body read up to ``limit`` bytes
        (None past it); its failures as upstream errors (the egress policy's refusal ``UpstreamMisconfigured``)."""
        try:
            async with asyncio.timeout(timeout), client.stream(method, url, timeout=timeout, **options) as answer:
                try:
                    return answer.status_code, await read_bounded(answer, limit)
                except TooLarge:
                    return answer.status_code, None
        except (TimeoutError, httpx2.TimeoutException) as exc:
            words = f"{self.server_name}: timed out after {timeout:g}s while {what}"
            raise UpstreamTimeout(words, summary=words) from exc
        except httpx2.HTTPError as exc:
            if (refused := egress_refused(exc)) is not None:
                words = f"{self.server_name}: refused by the egress policy while {what}"
                raise UpstreamMisconfigured(f"{words}: {refused}", summary=words) from exc
            words = f"{self.server_name}: cannot reach the API while {what}"
            raise UpstreamError(f"{words}: {describe(exc)}", reason=describe(exc), summary=words) from exc


def _failure(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


async def open_openapi_session(
    server_name: str,
    config: Mapping[str, Any],
    policy: RestPolicy,
    *,
    connect_timeout: float,
    http_client: httpx2.AsyncClient | None = None,
    egress: EgressPolicy | None = None,
    auth: httpx2.Auth | None = None,
) -> OpenApiSession:
    """Connect to an OpenAPI server (``config`` validated and ``${VAR}``-expanded): read its document.

    Raises:
        UpstreamMisconfigured: the egress policy refuses a URL, or the document is unusable or too large.
        UpstreamError: the document could not be read.
    """
    session = OpenApiSession(server_name, config, policy, http_client=http_client, egress=egress, auth=auth)
    try:
        await session.connect(connect_timeout)
    except BaseException:
        await session.close()
        raise
    return session
