"""Fencing tokens on the replies of a server's owner, and the requester's check of them.

The owner of a server stamps every reply it sends with its lease's fencing token (``leases``: the
KV revision of its claim, constant while it renews, higher for every later claim of the server) as
the ``fence`` field of the ``RpcReply`` envelope. (Not a NATS header: the ``Bus`` contract gives a
requester a reply's data only, and a request handed over in-process carries the same envelope.)
A requester remembers the highest token it has seen per server and refuses a reply stamped with a
lower one: it comes from an owner that was deposed since (a late reply of a paused or partitioned
worker), and is answered ``SERVER_UNAVAILABLE`` instead. A reply without a token is taken as it is.
"""

from __future__ import annotations

import logging
import threading

from toolmesh.errors import ServerUnavailable

log = logging.getLogger("toolmesh.bus.fencing")
FENCE_FIELD = "fence"
"""The ``RpcReply`` field carrying the owner's fencing token."""


def stamped(reply: bytes, token: int) -> bytes:
    """``reply``, the JSON object of an ``RpcReply``, with ``token`` in its ``fence`` field."""
    return b'%s,"%s":%d}' % (reply[:-1], FENCE_FIELD.encode(), token)


class Fences:
    """The highest fencing token a requester (a gateway's tool calls and forwarded requests) has seen
    on a reply, per server."""

    def __init__(self) -> None:
        self._highest: dict[str, int] = {}
        self._lock = threading.Lock()

    def check(self, server_id: str, token: object, server_name: str | None = None) -> None:
        """Record ``token`` (a reply's ``fence``); ``ServerUnavailable`` when a higher one was seen."""
        if not isinstance(token, int):
            return
        with self._lock:
            highest = self._highest.get(server_id, 0)
            if token >= highest:
                self._highest[server_id] = token
                return
        name = server_name or server_id
        log.warning(
            "reply of a deposed owner discarded (fencing token %d, %d seen)",
            token,
            highest,
            extra={"server_id": server_id, "server": name},
        )
        raise ServerUnavailable(
            f"Server unavailable: {name}: the reply came from an owner that lost the server meanwhile",
            {"server_id": server_id, "fence": token, "highest_fence": highest},
        )
