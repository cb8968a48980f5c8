"""Removing the sandbox homes of removed servers from this worker's host.

A STDIO server's home stays between its sessions (``npx`` keeps its cache there) and goes with the
server: every worker sweeps the homes on its host at start (what a crash or a removal while it was
down left behind) and on each reconcile round (a server removed while it ran). A home is removed
only when the server's removal was projected, never one of a server this worker holds. A sweep that
fails (the homes cannot be listed, Postgres fails) never ends the round: ``HomeSweeper`` logs the
failure when it starts or changes, and the next round tries again.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Collection
from pathlib import Path

from toolmesh.errors import BackendUnavailable
from toolmesh.platform.store.connections import Db
from toolmesh.sandbox import homes as sandbox_homes
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


class HomeSweeper:
    """The sweep of one worker's reconcile rounds, whose failures are logged and never raised."""

    def __init__(self, db: Db, data_dir: Path) -> None:
        self._db = db
        self._data_dir = data_dir
        self._failing: str | None = None
        """The failure of the last sweep, if it failed: logged once, not again every round."""

    async def sweep(self, held: Collection[str]) -> list[str]:
        """``sweep_homes``; nothing removed when it failed (the next round tries again)."""
        try:
            removed = await sweep_homes(self._db, self._data_dir, held)
        except (OSError, BackendUnavailable) as exc:
            failure = f"{type(exc).__name__}: {exc}"
            if failure != self._failing:
                log.warning("sandbox homes not swept, tried again each reconcile round: %s", failure)
            self._failing = failure
            return []
        if self._failing is not None:
            log.info("sandbox homes swept again")
            self._failing = None
        return removed
