"""Atomic reservation of public names (a server's or an endpoint's) in the ``toolmesh_names`` KV
bucket (409 across replicas).

A reservation records the server id and when it was made. One whose server never reached the
read model (its gateway died between reserving and publishing) is taken over after a grace
period, atomically (compare-and-set on the revision), so a crash cannot block a name forever.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

import asyncpg
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from toolmesh.platform.store import queries
from toolmesh_gateway.endpoint_reads import get_endpoint

STALE_AFTER_SECONDS = 30.0


def name_key(namespace: str, name: str) -> str:
    """The key reserving a public name (``/mcp/{name}``) inside its namespace: a server's and an
    endpoint's alike, so the first to reserve a name keeps it."""
    return f"{namespace}.{name}"


async def name_holder_exists(db: asyncpg.Pool, holder_id: str) -> bool:
    """True while the server or endpoint that reserved a name is in the read model."""
    return await queries.get_server(db, holder_id) is not None or await get_endpoint(db, holder_id, None) is not None


def _value(server_id: str) -> bytes:
    return json.dumps({"server_id": server_id, "at": time.time()}).encode()


async def reserve_name(
    kv: KeyValue,
    name: str,
    server_id: str,
    server_exists: Callable[[str], Awaitable[bool]],
    *,
    stale_after: float = STALE_AFTER_SECONDS,
) -> bool:
    """Take ``name`` for ``server_id``; False when a live (or recent) reservation holds it."""
    try:
        await kv.create(name, _value(server_id))
        return True
    except KeyWrongLastSequenceError:
        pass  # taken: see below whether the holder is real
    try:
        entry = await kv.get(name)
    except (KeyNotFoundError, NotFoundError):
        return await reserve_name(kv, name, server_id, server_exists, stale_after=stale_after)
    held = json.loads(entry.value or b"{}")
    if await server_exists(str(held.get("server_id"))) or time.time() - float(held.get("at", 0)) < stale_after:
        return False
    try:
        await kv.update(name, _value(server_id), last=entry.revision)
    except KeyWrongLastSequenceError:
        return False  # someone else took it over first
    return True


async def release_name(kv: KeyValue, name: str) -> None:
    """Free a name (after removal, or when a registration could not complete)."""
    try:
        await kv.delete(name)
    except (KeyNotFoundError, NotFoundError):
        pass  # already free
