"""Clients for small documents (OAuth metadata, client registration, token answers): an answer
larger than a bound is cut off with an error instead of read whole into memory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2

from toolmesh.egress.http import GuardedTransport
from toolmesh.egress.policy import EgressPolicy

DOCUMENT_MAX_BYTES = 1 << 20
"""The largest answer an OAuth party may send toolmesh (its documents are a few kilobytes)."""


class TooLarge(httpx2.ReadError):
    """An answer longer than the client's bound."""


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, request: httpx2.Request, max_bytes: int) -> None:
        self._inner = inner
        self._request = request
        self._max = max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._max:
                raise TooLarge(f"answer longer than {self._max} bytes", request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner`` whose answers end in ``TooLarge`` past ``max_bytes``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int) -> None:
        self._inner = inner
        self._max = max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """The inner transport's answer, its body bounded."""
        response = await self._inner.handle_async_request(request)
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_BoundedStream(stream, request, self._max),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


def bounded_client(
    policy: EgressPolicy, limits: httpx2.Limits, max_bytes: int = DOCUMENT_MAX_BYTES, **options: Any
) -> httpx2.AsyncClient:
    """A client like ``guarded_client`` whose every answer is at most ``max_bytes`` long."""
    transport = BoundedTransport(GuardedTransport(policy, limits), max_bytes)
    return httpx2.AsyncClient(transport=transport, trust_env=False, **options)
