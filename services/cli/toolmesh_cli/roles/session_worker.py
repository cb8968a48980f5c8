"""The session-worker role: the upstream sessions it holds leases for."""

from __future__ import annotations

import asyncio

from toolmesh.credentials import CredentialBox
from toolmesh.platform.runtime import Backends
from toolmesh_session_worker.worker import SessionWorker


async def run(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Upstream sessions."""
    await SessionWorker(b, box).run(stop)
