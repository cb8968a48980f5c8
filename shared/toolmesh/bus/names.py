"""Atomic server-name reservation in the ``toolmesh_names`` KV bucket (409 across replicas)."""

from __future__ import annotations

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue


async def reserve_name(kv: KeyValue, name: str, server_id: str) -> bool:
    """Take ``name`` for ``server_id``; False when another server already holds it."""
    try:
        await kv.create(name, server_id.encode())
    except KeyWrongLastSequenceError:
        return False
    return True


async def release_name(kv: KeyValue, name: str) -> None:
    """Free a name (after removal, or when a registration could not complete)."""
    try:
        await kv.delete(name)
    except (KeyNotFoundError, NotFoundError):
        pass  # already free
