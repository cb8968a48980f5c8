"""Requests to one REST tool server (``upstream.rest``): each bounded in time, sent only where the
egress policy allows, and its failures told apart — unreachable, refused by the egress policy, our
credentials refused, a scope the grant lacks, a protocol error."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx2

from toolmesh.egress.http import egress_refused
from toolmesh.egress.policy import EgressRefused, rest_endpoint
from toolmesh.secret_text import mask_url
from toolmesh_session_worker.upstream.challenges import MET, GrantRefused, ScopeChallenge
from toolmesh_session_worker.upstream.errors import (
    REFUSED,
    UpstreamError,
    UpstreamMisconfigured,
    UpstreamRefused,
    UpstreamScopeRequired,
    UpstreamTimeout,
    describe,
    summarize,
)
from toolmesh_session_worker.upstream.rest_answers import answer_json
from toolmesh_session_worker.upstream.translation import MCPProtocolError


class RestExchange:
    """The HTTP side of a ``RestSession``: ``on_unreachable`` runs when a request (not a probe) could
    not reach the server."""

    def __init__(
        self, server_name: str, base: str, client: httpx2.AsyncClient, on_unreachable: Callable[[], None]
    ) -> None:
        self.server_name = server_name
        self._base = base
        self._client = client
        self._on_unreachable = on_unreachable

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    def refuse_credentials(self, response: httpx2.Response, what: str, statuses: tuple[int, ...] = REFUSED) -> None:
        """``UpstreamRefused`` when the server refused our credentials (``statuses``, after the bearer
        auth's one retry with a renewed token): trying again cannot help. A call answered a plain 403
        is the application forbidding it, not our credentials (callers pass 401 alone)."""
        if response.status_code in statuses:
            words = f"{self.server_name}: {what} refused our credentials (HTTP {response.status_code})"
            raise UpstreamRefused(words, summary=words)

    async def answer(self, method: str, path: str, *, timeout: float, what: str) -> Any:
        """The JSON of a 200 answer; ``UpstreamError`` (a protocol error) for anything else."""
        response = await self.send(method, path, timeout, what)
        self.refuse_credentials(response, f"{method} {path}")
        if response.status_code != 200:
            words = f"{self.server_name}: protocol error: {method} {path} answered HTTP {response.status_code}"
            raise UpstreamError(words, summary=words)
        try:
            return answer_json(response)
        except MCPProtocolError as exc:
            raise UpstreamError(
                f"{self.server_name}: protocol error: {method} {path}: {exc}",
                summary=f"{self.server_name}: protocol error: {method} {path}: the answer is not JSON",
            ) from exc

    async def send(
        self, method: str, path: str, timeout: float, what: str, *, probe: bool = True, body: Any = None
    ) -> httpx2.Response:
        """One request within ``timeout`` in all; an unreachable server is ``UpstreamError`` (and a probe),
        one the egress policy refuses (another path, a refused address or redirect) ``UpstreamMisconfigured``,
        one whose grant was refused with no renewed token ``UpstreamRefused``, and a scope challenge the grant
        cannot meet ``UpstreamScopeRequired`` (``BearerAuth`` notes both, as for MCP sessions)."""
        met: list[ScopeChallenge | GrantRefused] = []  # what this request's grant met (see ``challenges``)
        listening = MET.set(met)
        try:
            url = rest_endpoint(self._base, path)
            async with asyncio.timeout(timeout):
                response = await self._client.request(method, url, json=body, timeout=timeout)
        except EgressRefused as exc:
            words = f"{self.server_name}: refused by the egress policy while {what}"
            raise UpstreamMisconfigured(f"{words}: {exc}", summary=words) from exc
        except (TimeoutError, httpx2.TimeoutException) as exc:
            words = f"{self.server_name}: timed out after {timeout:g}s while {what}"
            raise UpstreamTimeout(words, summary=words) from exc
        except httpx2.HTTPError as exc:
            if (refused := egress_refused(exc)) is not None:  # the details may quote a redirect: log only
                words = f"{self.server_name}: refused by the egress policy while {what}"
                raise UpstreamMisconfigured(f"{words}: {refused}", summary=words) from exc
            reason = describe(exc)
            if probe:
                self._on_unreachable()
            raise UpstreamError(
                f"{self.server_name}: cannot reach {mask_url(self._base)} while {what}: {reason}",
                reason=reason,
                summary=f"{self.server_name}: cannot reach the server while {what}: {summarize(exc)}",
            ) from exc
        finally:
            MET.reset(listening)
        challenge = met[-1] if met else None
        if isinstance(challenge, GrantRefused):  # the summary without the name, as an MCP session's
            words = f"the upstream refused the grant while {what}"
            raise UpstreamRefused(f"{self.server_name}: {words}", summary=words)
        if challenge is not None:
            words = f"the upstream requires a scope the grant lacks while {what}"
            raise UpstreamScopeRequired(
                f"{self.server_name}: {words}", required=challenge.required, wanted=challenge.wanted
            )
        return response
