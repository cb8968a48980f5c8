"""The NATS transport of the client: request/reply on the API subjects, any gateway replica answers."""

from __future__ import annotations

import json
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import BaseModel

from toolmesh.client.transports import request_headers
from toolmesh.contracts.api import Operation
from toolmesh.errors import BackendUnavailable, error_from_body


class NatsTransport:
    """Requests on ``toolmesh.api.v1.*``; any gateway replica answers."""

    def __init__(self, nc: NATS, token: str, *, owns_connection: bool = False) -> None:
        self._nc = nc
        self._token = token
        self._owns = owns_connection

    @classmethod
    async def connect(cls, url: str, token: str, **options: Any) -> NatsTransport:
        """Open a connection of its own (``options`` go to ``nats.connect``: credentials, TLS). ``url``
        may name several servers of one NATS cluster, comma-separated; give credentials in
        ``options`` then (nats-py sends those of a URL to that server only)."""
        servers = [part.strip() for part in url.split(",") if part.strip()]
        return cls(await nats.connect(servers, **options), token, owns_connection=True)

    async def send(self, operation: Operation, request: BaseModel, idempotency_key: str | None, timeout: float) -> Any:
        payload = request.model_dump_json(exclude_unset=True).encode()
        try:
            msg = await self._nc.request(
                operation.subject, payload, timeout=timeout, headers=request_headers(self._token, idempotency_key)
            )
        except NoRespondersError as exc:
            raise BackendUnavailable(f"No toolmesh gateway serves {operation.subject}") from exc
        except NatsTimeout as exc:
            raise BackendUnavailable(f"No reply on {operation.subject} within {timeout:g}s") from exc
        reply = json.loads(msg.data)
        if reply.get("ok"):
            return reply.get("result")
        raise error_from_body(reply.get("error") or {})

    async def close(self) -> None:
        if self._owns:
            await self._nc.drain()
