"""The projector role: the Postgres read model."""

from __future__ import annotations

import asyncio

from toolmesh.credentials import CredentialBox
from toolmesh.platform.runtime import Backends
from toolmesh.platform.supervision import supervise
from toolmesh_projector.projector import reset_projection, run_projector


async def run(b: Backends, box: CredentialBox, stop: asyncio.Event) -> None:
    """Postgres read model."""
    await supervise("projector", lambda: run_projector(b.js, b.db, stop), stop)


async def rebuild(b: Backends) -> None:
    """Drop the read model, so the projector replays every event."""
    await reset_projection(b.js, b.db)
