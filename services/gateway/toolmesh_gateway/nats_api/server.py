"""The NATS API of one gateway: a faststream broker on its own connection, and the catch-all."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI
from faststream.nats import NatsBroker
from nats.aio.client import Client as NATS
from nats.aio.subscription import Subscription

from toolmesh.contracts.api import API_WILDCARD, UNSERVED_QUEUE
from toolmesh.platform.bus.connection import connect_nats, nats_options
from toolmesh.platform.bus.nats_bus import PENDING_BYTES_LIMIT, PENDING_MSGS_LIMIT
from toolmesh.platform.config import Settings
from toolmesh_gateway.nats_api.dispatch import ApiDispatch
from toolmesh_gateway.nats_api.handlers import GatewayServices
from toolmesh_gateway.nats_api.router import api_router
from toolmesh_gateway.nats_api.unknown import UnknownSubjects

log = logging.getLogger("toolmesh.gateway.api")
# faststream's own messages (subscribers starting and stopping, each message at DEBUG): a library's voice,
# so not under "toolmesh" (quiet on a terminal), nor under "faststream" (whose logger prints by itself).
broker_log = logging.getLogger("faststream_api")
DOCUMENTED_SERVER = "nats://localhost:4222"
DESCRIPTION = (
    "Commands and reads of toolmesh as NATS request/reply, and the events it publishes. "
    "Send the JSON payload to the operation's subject with an `Authorization: Bearer <key>` header "
    "(the key is an API key or JWT of the REST API; its role and namespace apply) and, for writes, "
    'an optional `Idempotency-Key` header. A reply is `{"ok": true, "result": ...}` or '
    '`{"ok": false, "error": {"detail", "error_code", "context"}}` with the REST API\'s codes; '
    "a payload its model refuses gets `VALIDATION_ERROR`, an unknown version `UNSUPPORTED_VERSION`, "
    "an unknown operation `UNKNOWN_OPERATION`. Events are kept in the JetStream stream "
    "TOOLMESH_EVENTS and can be replayed from any sequence or time."
)
SPECIFICATION: dict[str, Any] = {"specification_url": DOCUMENTED_SERVER, "description": DESCRIPTION}


class ApiBroker(NatsBroker):
    """faststream's NATS broker, connected like every toolmesh role (credentials and TLS of Settings)."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(DOCUMENTED_SERVER, logger=broker_log, log_level=logging.DEBUG, **SPECIFICATION)
        self._settings = settings

    async def _connect(self) -> NATS:
        assert self._settings.nats_url is not None
        connection = await connect_nats(self._settings.nats_url, "toolmesh-gateway-api", **nats_options(self._settings))
        self.config.connect(connection)
        return connection


class NatsApi:
    """Serves ``toolmesh.api.v1.*`` in the queue group of every gateway replica until closed."""

    def __init__(self, broker: ApiBroker, unknown: Subscription) -> None:
        self._broker = broker
        self._unknown = unknown

    @classmethod
    async def start(cls, app: FastAPI) -> NatsApi:
        """Serve the operations with the services (and idempotency store) of the REST app."""
        services = GatewayServices.of(app)
        settings = services.backends.settings
        dispatch = ApiDispatch(services, app.state.authenticator, app.state.idempotency)
        broker = ApiBroker(settings)
        broker.include_router(api_router(dispatch, settings.api_max_concurrency))
        await broker.start()
        nc = services.backends.nc
        unknown = await nc.subscribe(
            API_WILDCARD,
            queue=UNSERVED_QUEUE,
            cb=UnknownSubjects(nc).answer,
            pending_msgs_limit=PENDING_MSGS_LIMIT,
            pending_bytes_limit=PENDING_BYTES_LIMIT,
        )
        log.info("NATS API serving %s", API_WILDCARD, extra={"role": "gateway"})
        return cls(broker, unknown)

    async def close(self) -> None:
        """Stop taking requests (those in flight finish) and close the API's connection."""
        try:
            await self._unknown.unsubscribe()
        except Exception as exc:  # the shared connection may already be closing
            log.debug("unknown-subject subscription not closed: %s", exc)
        await self._broker.stop()
