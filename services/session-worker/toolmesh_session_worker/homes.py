"""Removing the sandbox homes of removed servers from this worker's host.

A STDIO server's home stays between its sessions (``npx`` keeps its cache there) and goes with the
server: every worker sweeps the homes on its host at start (what a crash or a removal while it was
down left behind) and on each reconcile round (a server removed while it ran). A home is removed
only when the server's removal was projected, never one of a server this worker holds.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection
from pathlib import Path

from toolmesh import sandbox_homes
from toolmesh.store.connections import Db
from toolmesh_session_worker.removed_servers import removed_among

log = logging.getLogger("toolmesh.session_worker")


def _is_server_id(key: str) -> bool:
    try:
        return str(uuid.UUID(key)) == key
    except ValueError:
        return False


async def sweep_homes(db: Db, data_dir: Path, held: Collection[str]) -> list[str]:
    """Remove the homes of removed servers (except those in ``held``); returns the ids removed."""
    keys = await asyncio.to_thread(sandbox_homes.home_keys, data_dir)
    candidates = [key for key in keys if key not in held and _is_server_id(key)]
    removed = []
    for key in sorted(await removed_among(db, candidates)):
        if await asyncio.to_thread(sandbox_homes.remove_home, data_dir, key):
            log.info("sandbox home of a removed server deleted", extra={"server_id": key})
            removed.append(key)
    return removed
