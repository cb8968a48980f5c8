"""Opening a NATS connection with the settings every role shares."""

from __future__ import annotations

import logging

import nats
from nats.aio.client import Client as NATS

from toolmesh.errors import BackendUnavailable

log = logging.getLogger("toolmesh.bus")


async def connect_nats(url: str, name: str, *, timeout: float = 10.0) -> NATS:
    """Connect to NATS (reconnecting forever once connected); ``BackendUnavailable`` if unreachable."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats error: %s", exc, extra={"role": name})

    try:
        return await nats.connect(
            url,
            name=name,
            connect_timeout=timeout,
            allow_reconnect=True,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.5,
            error_cb=on_error,
        )
    except Exception as exc:  # nats raises several unrelated types for "cannot connect"
        raise BackendUnavailable(f"NATS unreachable at {url}: {exc}") from exc
