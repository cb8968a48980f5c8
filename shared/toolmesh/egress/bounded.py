"""Clients for small documents (OAuth metadata, client registration, token answers): an answer
larger than a bound, or slower than a deadline (a server dripping a byte at a time never trips a
per-read timeout), is cut off with an error instead of read whole or waited for without end."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import httpx2

from toolmesh.egress.http import GuardedTransport
from toolmesh.egress.policy import EgressPolicy

DOCUMENT_MAX_BYTES = 1 << 20
"""The largest answer an OAuth party may send toolmesh (its documents are a few kilobytes)."""
DOCUMENT_DEADLINE_SECONDS = 30.0
"""How long one request may take, from sending it to the last byte of its answer."""


class TooLarge(httpx2.ReadError):
    """An answer longer than the client's bound."""


class _BoundedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, request: httpx2.Request, max_bytes: int, deadline: float) -> None:
        self._inner = inner
        self._request = request
        self._max = max_bytes
        self._deadline = deadline

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        chunks = aiter(self._inner)
        while True:
            try:
                async with asyncio.timeout_at(self._deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx2.ReadTimeout("answer slower than its deadline", request=self._request) from None
            seen += len(chunk)
            if seen > self._max:
                raise TooLarge(f"answer longer than {self._max} bytes", request=self._request)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner`` whose answers end in ``TooLarge`` past ``max_bytes`` and in ``ReadTimeout`` when the
    whole exchange takes longer than ``seconds``."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, max_bytes: int, seconds: float) -> None:
        self._inner = inner
        self._max = max_bytes
        self._seconds = seconds

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """The inner transport's answer, its body bounded."""
        deadline = asyncio.get_running_loop().time() + self._seconds
        try:
            async with asyncio.timeout_at(deadline):
                response = await self._inner.handle_async_request(request)
        except TimeoutError:
            raise httpx2.ReadTimeout("answer slower than its deadline", request=request) from None
        stream = response.stream
        assert isinstance(stream, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_BoundedStream(stream, request, self._max, deadline),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        """Close the inner transport."""
        await self._inner.aclose()


def bounded_client(
    policy: EgressPolicy,
    limits: httpx2.Limits,
    max_bytes: int = DOCUMENT_MAX_BYTES,
    seconds: float = DOCUMENT_DEADLINE_SECONDS,
    context: ssl.SSLContext | None = None,
    **options: Any,
) -> httpx2.AsyncClient:
    """A client like ``guarded_client`` whose every answer is at most ``max_bytes`` long and done
    within ``seconds`` (``context``: TLS trust other than the system's)."""
    transport = BoundedTransport(GuardedTransport(policy, limits, context), max_bytes, seconds)
    return httpx2.AsyncClient(transport=transport, trust_env=False, **options)
