"""The endpoint every non-gateway role serves for its probes and scrapes (TOOLMESH_METRICS_PORT)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from toolmesh.embedded import free_port
from toolmesh.metrics_http import serve_metrics

pytestmark = pytest.mark.deploy
TOKEN = "scrape-token"


@contextlib.asynccontextmanager
async def endpoint() -> AsyncIterator[str]:
    port, stop = free_port(), asyncio.Event()
    task = asyncio.create_task(serve_metrics("127.0.0.1", port, TOKEN, stop))
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:
            for _ in range(100):  # until it listens (or the server task failed)
                if task.done():
                    task.result()
                with contextlib.suppress(httpx.ConnectError):
                    await client.get("/livez")
                    break
                await asyncio.sleep(0.05)
        yield base
    finally:
        stop.set()
        await task


async def test_livez_answers_without_a_token_and_metrics_needs_it() -> None:
    async with endpoint() as base, httpx.AsyncClient(base_url=base, timeout=5) as client:
        live = await client.get("/livez")
        assert (live.status_code, live.text) == (200, "ok\n")
        assert (await client.get("/metrics")).status_code == 401
        scraped = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert scraped.status_code == 200
        assert (await client.get("/readyz")).status_code == 404
