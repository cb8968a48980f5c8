"""The health-worker role."""

from __future__ import annotations

import asyncio

from toolmesh.credentials import CredentialBox
from toolmesh.platform.runtime import Backends
from toolmesh_health.worker import HealthWorker


async def run(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Health checks (BR-006) and the reconnects they call for."""
    await HealthWorker(b).run(stop)
