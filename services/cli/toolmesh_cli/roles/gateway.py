"""The gateway role: HTTP API, ``/mcp`` and the public NATS API."""

from __future__ import annotations

import asyncio

from toolmesh.credentials import CredentialBox
from toolmesh.platform.runtime import Backends
from toolmesh_gateway.serve import run_gateway


async def run(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """HTTP API."""
    await run_gateway(b, box, stop)
