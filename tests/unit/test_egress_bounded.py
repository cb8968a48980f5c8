"""Bounded clients for OAuth documents: an answer too long or too slow ends in an error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx2
import pytest

from toolmesh.egress.bounded import BoundedTransport, TooLarge


def _answering(body: AsyncIterator[bytes]) -> httpx2.AsyncClient:
    inner = httpx2.MockTransport(lambda request: httpx2.Response(200, content=body))
    return httpx2.AsyncClient(transport=BoundedTransport(inner, max_bytes=1000, seconds=0.5))


async def test_an_answer_past_the_bound_is_cut_off() -> None:
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield b" " * 100

    async with _answering(endless()) as client, asyncio.timeout(30):
        with pytest.raises(TooLarge):
            await client.get("http://upstream.test/prm")


async def test_an_answer_dripping_past_the_deadline_ends() -> None:
    async def dripping() -> AsyncIterator[bytes]:
        yield b"{"
        await asyncio.Event().wait()  # the next byte never comes, each read would wait its timeout anew
        yield b"}"

    async with _answering(dripping()) as client, asyncio.timeout(30):
        with pytest.raises(httpx2.ReadTimeout):
            await client.get("http://upstream.test/token")


async def test_an_answer_within_both_bounds_is_read_whole() -> None:
    async def small() -> AsyncIterator[bytes]:
        yield b'{"access_token": '
        yield b'"t"}'

    async with _answering(small()) as client:
        assert (await client.get("http://upstream.test/token")).json() == {"access_token": "t"}
