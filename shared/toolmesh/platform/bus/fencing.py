"""Fencing tokens on the replies of a server's owner, and the requester's check of them.

The owner of a server stamps every reply it sends with its lease's fencing token (``leases``: the
KV revision of its claim, constant while it renews, higher for every later claim of the server) as
the ``fence`` field of the ``RpcReply`` envelope. (Not a NATS header: the ``Bus`` contract gives a
requester a reply's data only, and a request handed over in-process carries the same envelope.)
A requester remembers the highest token it has seen per server and refuses a reply stamped with a
lower one: it comes from an owner that was deposed since (a late reply of a paused or partitioned
worker), and is answered ``SERVER_UNAVAILABLE`` instead.

A token is a claim in the leases bucket, not the replier's word: one higher than the token known is
taken (and becomes the known one) only when it is the token of the lease in force in the bucket, so
a reply stamped with a made-up token (anything able to answer on the bus, a confused worker) cannot
raise the fence above the real owner's and have every later reply of it refused. A reply stamped
with the known token, the common case, costs no read of the bucket. A reply with no token, or with
something other than a positive integer, is taken as it is and moves nothing; so is a reply while the
lease in force was written by an earlier version, which did not record its token (until its holder
claims again: a rolling upgrade does not fence off the servers of workers not yet upgraded).
"""

from __future__ import annotations

import logging
import threading

from nats.errors import Error as NatsError
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from toolmesh.errors import ServerUnavailable
from toolmesh.platform.bus.leases import Lease, lease_in_force
from toolmesh.platform.bus.topology import LEASES_BUCKET

log = logging.getLogger("toolmesh.bus.fencing")
FENCE_FIELD = "fence"
"""The ``RpcReply`` field carrying the owner's fencing token."""


def stamped(reply: bytes, token: int) -> bytes:
    """``reply``, the JSON object of an ``RpcReply``, with ``token`` in its ``fence`` field."""
    return b'%s,"%s":%d}' % (reply[:-1], FENCE_FIELD.encode(), token)


class Fences:
    """The highest fencing token a requester (a gateway's tool calls and forwarded requests) has seen
    on a reply and confirmed in the leases bucket, per server."""

    def __init__(self, js: JetStreamContext) -> None:
        self._js = js
        self._leases: KeyValue | None = None
        self._highest: dict[str, int] = {}
        self._lock = threading.Lock()

    async def check(self, server_id: str, token: object, server_name: str | None = None) -> None:
        """Record ``token`` (a reply's ``fence``); ``ServerUnavailable`` when a higher one is known or
        the token is above the known one but not the lease in force."""
        if not isinstance(token, int) or isinstance(token, bool) or token <= 0:
            return
        highest = self._highest.get(server_id, 0)
        if token == highest:
            return
        name = server_name or server_id
        if token > highest:
            lease = await self._in_force(server_id, name)
            if lease is not None:
                if lease.token is None:  # an earlier version's lease: nothing to confirm against
                    return
                highest = self._raise(server_id, lease.token)
                if token == lease.token:
                    return
        reason = "an owner that lost the server meanwhile" if token < highest else "no lease of the server"
        log.warning(
            "reply discarded: its fencing token %d is not the lease in force (%d known)",
            token,
            highest,
            extra={"server_id": server_id, "server": name},
        )
        raise ServerUnavailable(
            f"Server unavailable: {name}: the reply came from {reason}",
            {"server_id": server_id, "fence": token, "highest_fence": highest},
        )

    def _raise(self, server_id: str, token: int) -> int:
        with self._lock:
            highest = self._highest[server_id] = max(token, self._highest.get(server_id, 0))
        return highest

    async def _in_force(self, server_id: str, name: str) -> Lease | None:
        """The server's lease in the bucket; None when there is none or the bucket cannot be read."""
        try:
            if self._leases is None:
                self._leases = await self._js.key_value(LEASES_BUCKET)
            return await lease_in_force(self._leases, server_id)
        except NatsError as exc:  # the bucket missing or out of reach: nothing confirms the token
            log.warning("leases bucket unreadable: %s", exc, extra={"server_id": server_id, "server": name})
            return None
