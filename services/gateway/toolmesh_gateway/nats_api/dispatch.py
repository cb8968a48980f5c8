"""One NATS API request: authenticate the key in its headers, apply the idempotency key, run the
operation, and answer with the reply envelope."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from faststream.nats import NatsMessage, NatsResponse
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from toolmesh.contracts.api import AUTHORIZATION_HEADER, IDEMPOTENCY_HEADER, REPLAYED_HEADER, Operation
from toolmesh.errors import RoutingFailed, ToolmeshError, ValidationFailed
from toolmesh_gateway.admission import shed_reply
from toolmesh_gateway.auth import Authenticator, Caller
from toolmesh_gateway.idempotency import IdempotencyStore, Stored, fingerprint
from toolmesh_gateway.nats_api.handlers import HANDLERS, GatewayServices
from toolmesh_gateway.nats_api.replies import JSON, failure, success

log = logging.getLogger("toolmesh.gateway.api")


def response(stored: Stored, replayed: bool = False) -> NatsResponse:
    """A stored reply as faststream sends it back."""
    headers = {"content-type": stored.media_type or JSON}
    if replayed:
        headers[REPLAYED_HEADER] = "true"
    return NatsResponse(stored.body.encode(), headers=headers)


def _require_utf8(body: BaseModel) -> None:
    """Refuse a payload whose text has no UTF-8 form (a lone surrogate, which JSON's ``\\ud800`` escape
    can write): nothing past this point could send it on."""
    try:
        body.model_dump_json()
    except PydanticSerializationError as exc:
        error = {"loc": [], "msg": "text with a lone surrogate is not valid UTF-8", "type": "string_unicode"}
        raise ValidationFailed("Request validation failed", {"errors": [error]}) from exc


class ApiDispatch:
    """Runs operations for callers identified by the bearer key in their request headers."""

    def __init__(self, services: GatewayServices, authenticator: Authenticator, idempotency: IdempotencyStore) -> None:
        self._services = services
        self._auth = authenticator
        self._idempotency = idempotency

    async def __call__(self, operation: Operation, body: BaseModel, msg: NatsMessage) -> NatsResponse:
        headers = {name.lower(): value for name, value in (msg.headers or {}).items()}
        try:
            _require_utf8(body)
            stored, replayed = await self._answer(operation, body, headers)
        except ToolmeshError as exc:
            stored, replayed = failure(exc), False
        except Exception:
            log.exception("NATS API operation %s failed", operation.name, extra={"operation": operation.name})
            stored, replayed = failure(RoutingFailed(f"Internal error in {operation.name}")), False
        return response(stored, replayed)

    async def _answer(self, operation: Operation, body: BaseModel, headers: Mapping[str, str]) -> tuple[Stored, bool]:
        principal = await self._auth.principal(headers.get(AUTHORIZATION_HEADER.lower()))
        principal.require_api_access()
        caller = Caller(principal)

        async def work() -> Stored:
            try:
                return success(await HANDLERS[operation.name](self._services, caller, body))
            except ToolmeshError as exc:
                return failure(exc)

        key = headers.get(IDEMPOTENCY_HEADER.lower())
        if key is None or not operation.write:
            return await work(), False
        request = fingerprint("nats", operation.name, body.model_dump_json())
        return await self._idempotency.run(principal.key_id, key, request, work, keep=lambda s: not shed_reply(s))
