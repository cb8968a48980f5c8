"""The endpoint every non-gateway role serves for its probes and scrapes (TOOLMESH_METRICS_PORT)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.harness import eventually
from toolmesh.platform import metrics
from toolmesh.platform.config import Settings
from toolmesh.platform.metrics_http import scrape_tokens, serve_metrics
from toolmesh_cli.embedded import free_port

pytestmark = pytest.mark.deploy
TOKEN = "scrape-token"


@contextlib.asynccontextmanager
async def endpoint(tokens: tuple[str, ...] = (TOKEN,)) -> AsyncIterator[str]:
    port, stop = free_port(), asyncio.Event()
    task = asyncio.create_task(serve_metrics("127.0.0.1", port, tokens, stop))
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=base, timeout=5) as client:

            async def listening() -> bool:
                if task.done():
                    task.result()  # the server task failed: its error, not a time-out
                try:
                    await client.get("/livez")
                except httpx.ConnectError:
                    return False
                return True

            await eventually(listening, timeout=10, what="the endpoint to listen")
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
        assert (await client.post("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 404


async def test_metrics_exposes_what_the_process_recorded() -> None:
    metrics.record_limit_rejection("role-endpoint-test")
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    async with endpoint() as base, httpx.AsyncClient(base_url=base, timeout=5, headers=bearer) as client:
        scraped = await client.get("/metrics")
        assert scraped.headers["content-type"].startswith("text/plain; version=")
        assert 'mcp_aggregator_limit_rejections_total{limit="role-endpoint-test"} 1.0' in scraped.text
        openmetrics = await client.get("/metrics", headers={"Accept": "application/openmetrics-text"})
        assert openmetrics.headers["content-type"].startswith("application/openmetrics-text")
        assert openmetrics.text.endswith("# EOF\n")


async def test_a_taken_port_is_an_error_of_the_caller_not_an_exit() -> None:
    async with endpoint() as base:
        port = int(base.rsplit(":", 1)[1])
        with pytest.raises(OSError):
            await serve_metrics("127.0.0.1", port, (TOKEN,), asyncio.Event())


async def test_metrics_without_a_configured_token_is_refused_to_everyone() -> None:
    """/metrics names every namespace's servers: no configured token means nobody reads it."""
    async with endpoint(()) as base, httpx.AsyncClient(base_url=base, timeout=5) as client:
        assert (await client.get("/livez")).status_code == 200
        for authorization in ("", "Bearer", "Bearer x", "Basic eDp4"):
            assert (await client.get("/metrics", headers={"Authorization": authorization})).status_code == 401


async def test_metrics_takes_the_owner_token_as_well_as_the_metrics_token() -> None:
    owner = Settings(metrics_token=TOKEN, admin_token="owner-token")
    async with endpoint(scrape_tokens(owner)) as base, httpx.AsyncClient(base_url=base, timeout=5) as client:
        for token in (TOKEN, "owner-token"):
            assert (await client.get("/metrics", headers={"Authorization": f"Bearer {token}"})).status_code == 200
        assert (await client.get("/metrics", headers={"Authorization": "Bearer other"})).status_code == 401
