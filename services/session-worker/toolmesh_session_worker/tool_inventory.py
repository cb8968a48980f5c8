"""The total-tools limit, and each namespace's own, across session-workers.

A server's tool snapshot is checked and published under a transaction lock, and reserved until the
projector has applied it: the count of every other server's tools is its projected tools, or its
reservation while its latest snapshot is still on the way. No worker waits for the projector, and
concurrent discoveries can never pass the limit together.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncpg

from toolmesh.platform.store.locks import transaction_lock
from toolmesh.platform.store.queries import applied_sequence

_OTHERS = """
SELECT (SELECT count(*) FROM mcp.tools t
         WHERE t.source_server_id <> $1::uuid
           AND NOT EXISTS (SELECT 1 FROM mcp.tool_reservations r WHERE r.server_id = t.source_server_id))
     + (SELECT coalesce(sum(tools), 0) FROM mcp.tool_reservations WHERE server_id <> $1::uuid)
"""


_OTHERS_IN = """
SELECT (SELECT count(*) FROM mcp.tools t
         WHERE t.source_server_id <> $1::uuid AND t.namespace = $2
           AND NOT EXISTS (SELECT 1 FROM mcp.tool_reservations r WHERE r.server_id = t.source_server_id))
     + (SELECT coalesce(sum(r.tools), 0) FROM mcp.tool_reservations r
         JOIN mcp.external_servers s ON s.id = r.server_id
         WHERE r.server_id <> $1::uuid AND s.namespace = $2)
"""


class OverLimit(Exception):
    """The snapshot would take the total (``namespace`` None) or its namespace's tools past their limit;
    ``others`` tools are held by the other servers counted."""

    def __init__(self, others: int, namespace: str | None = None) -> None:
        super().__init__(f"{others} tools held by other servers")
        self.others = others
        self.namespace = namespace


async def publish_within_limit(
    db: asyncpg.Pool,
    server_id: str,
    tools: int,
    limit: int,
    publish: Callable[[], Awaitable[int]],
    namespace: tuple[str, int] | None = None,
) -> int:
    """Run ``publish`` (it publishes a snapshot of ``tools`` tools of ``server_id``; returns the last
    stream sequence it used) unless every other server's tools plus these pass ``limit``, or those of
    the other servers of ``namespace`` (its name and limit) pass its limit (``OverLimit``); returns
    ``publish``'s sequence."""
    async with db.acquire() as conn, conn.transaction():
        await transaction_lock(conn, "tool-inventory")
        await conn.execute("DELETE FROM mcp.tool_reservations WHERE seq <= $1", await applied_sequence(conn))
        others = int(await conn.fetchval(_OTHERS, server_id))
        if others + tools > limit:
            raise OverLimit(others)
        if namespace is not None:
            name, own = namespace
            neighbours = int(await conn.fetchval(_OTHERS_IN, server_id, name))
            if neighbours + tools > own:
                raise OverLimit(neighbours, name)
        seq = await publish()
        await conn.execute(
            "INSERT INTO mcp.tool_reservations(server_id, tools, seq) VALUES ($1::uuid, $2, $3) "
            "ON CONFLICT (server_id) DO UPDATE SET tools = excluded.tools, seq = excluded.seq",
            server_id,
            tools,
            seq,
        )
        return seq
