"""The faststream router of the NATS API: one subscriber per operation, typed by its request model.

faststream validates each payload against the operation's model before the operation runs; a
payload it refuses gets a ``VALIDATION_ERROR`` reply and nothing is applied.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from faststream.middlewares import ExceptionMiddleware
from faststream.nats import NatsMessage, NatsResponse, NatsRouter
from pydantic import BaseModel, ValidationError

from toolmesh.contracts.api import API_QUEUE, OPERATIONS, Operation
from toolmesh.payloads import invalid_payload
from toolmesh.platform.bus.nats_bus import PENDING_BYTES_LIMIT, PENDING_MSGS_LIMIT
from toolmesh_gateway.nats_api.dispatch import response
from toolmesh_gateway.nats_api.replies import failure

Dispatch = Callable[[Operation, BaseModel, NatsMessage], Awaitable[NatsResponse]]


def _refused(exc: ValidationError) -> NatsResponse:
    return response(failure(invalid_payload(exc)))


def _subscriber(operation: Operation, dispatch: Dispatch) -> Callable[..., Awaitable[NatsResponse]]:
    async def handle(body: BaseModel, msg: NatsMessage) -> NatsResponse:
        return await dispatch(operation, body, msg)

    # faststream reads the payload model from the annotation: the operation's request model.
    handle.__annotations__ = {"body": operation.request, "msg": NatsMessage, "return": NatsResponse}
    handle.__name__ = handle.__qualname__ = operation.name.replace(".", "_")
    return handle


def api_router(dispatch: Dispatch, max_workers: int) -> NatsRouter:
    """Subscribers of every operation in the queue group shared by all gateway replicas; each runs at
    most ``max_workers`` requests at once and holds a bounded number waiting (``PENDING_MSGS_LIMIT``)."""
    router = NatsRouter(middlewares=[ExceptionMiddleware(publish_handlers={ValidationError: _refused})])
    for operation in OPERATIONS:
        router.subscriber(
            operation.subject,
            queue=API_QUEUE,
            max_workers=max_workers,
            pending_msgs_limit=PENDING_MSGS_LIMIT,
            pending_bytes_limit=PENDING_BYTES_LIMIT,
            title=operation.name,
            description=operation.summary,
        )(_subscriber(operation, dispatch))
    return router
