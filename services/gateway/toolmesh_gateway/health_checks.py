"""Bounded probes of the gateway's backends, shared by ``/health`` and the Kubernetes probes."""

from __future__ import annotations

import asyncio

from fastapi import Request

from toolmesh.platform.runtime import Backends
from toolmesh.platform.store import queries
from toolmesh.search.service import SearchService

CHECK_TIMEOUT_SECONDS = 1.0
"""Bound of each backend probe of ``/health``: the whole answer stays under ~1 s for Kubernetes probes."""


async def check_database(b: Backends, namespace: str | None = None) -> tuple[str, dict[str, int]]:
    """The database answers; with the namespace's servers by status."""
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            counts = await queries.status_counts(b.db, namespace)
    except Exception as exc:  # any failure of the probe is the finding we report
        return f"error: {type(exc).__name__ or 'timeout'}", {}
    return "ok", counts


async def check_index(request: Request) -> tuple[str, str | None]:
    """The vector index (Qdrant server or the embedded engine) and, when not ok, the embedder's state."""
    search: SearchService = request.app.state.search
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            report = await search.health()
    except Exception as exc:  # any failure of the probe is the finding we report
        return f"error: {type(exc).__name__ or 'timeout'}", None
    embedder = str(report.get("embedder", ""))
    return str(report["index"]), None if embedder.startswith("ok") else embedder


async def check_nats(b: Backends) -> str:
    if not b.nc.is_connected:
        return "error: disconnected"
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            await b.js.account_info()
    except Exception as exc:  # any failure of the probe is the finding we report
        return f"error: {type(exc).__name__}"
    return "ok"
