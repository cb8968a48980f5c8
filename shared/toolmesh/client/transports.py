"""How the client reaches toolmesh: NATS request/reply on the API subjects, or the REST routes."""

from __future__ import annotations

import json
from typing import Any, Protocol

import httpx
import nats
from nats.aio.client import Client as NATS
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from pydantic import BaseModel

from toolmesh.contracts.api import AUTHORIZATION_HEADER, IDEMPOTENCY_HEADER, Operation
from toolmesh.errors import BackendUnavailable, ToolmeshError, ValidationFailed, error_from_body


class Transport(Protocol):
    """Sends one operation and returns its result as JSON data, or raises its ``ToolmeshError``."""

    async def send(self, operation: Operation, request: BaseModel, idempotency_key: str | None, timeout: float) -> Any:
        """The operation's ``result``."""
        ...

    async def close(self) -> None:
        """Release the connection (when the transport opened it)."""
        ...


def _headers(token: str, idempotency_key: str | None) -> dict[str, str]:
    headers = {AUTHORIZATION_HEADER: f"Bearer {token}"}
    if idempotency_key is not None:
        headers[IDEMPOTENCY_HEADER] = idempotency_key
    return headers


class NatsTransport:
    """Requests on ``toolmesh.api.v1.*``; any gateway replica answers."""

    def __init__(self, nc: NATS, token: str, *, owns_connection: bool = False) -> None:
        self._nc = nc
        self._token = token
        self._owns = owns_connection

    @classmethod
    async def connect(cls, url: str, token: str, **options: Any) -> NatsTransport:
        """Open a connection of its own (``options`` go to ``nats.connect``: credentials, TLS)."""
        return cls(await nats.connect(url, **options), token, owns_connection=True)

    async def send(self, operation: Operation, request: BaseModel, idempotency_key: str | None, timeout: float) -> Any:
        payload = request.model_dump_json(exclude_unset=True).encode()
        try:
            msg = await self._nc.request(
                operation.subject, payload, timeout=timeout, headers=_headers(self._token, idempotency_key)
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


class HttpTransport:
    """The REST route of each operation."""

    def __init__(self, base_url: str, token: str, *, http: httpx.AsyncClient | None = None) -> None:
        self._owns = http is None
        self._http = http or httpx.AsyncClient(base_url=base_url, timeout=None)
        self._token = token

    async def send(self, operation: Operation, request: BaseModel, idempotency_key: str | None, timeout: float) -> Any:
        fields = operation.path_fields
        path = operation.path.format(**{name: getattr(request, name) for name in fields})
        rest = request.model_dump(mode="json", exclude_unset=True, by_alias=True, exclude=set(fields))
        options: dict[str, Any] = {"headers": _headers(self._token, idempotency_key), "timeout": timeout}
        if operation.method == "GET":
            options["params"] = rest
        elif rest or operation.method == "POST":
            options["json"] = rest
        try:
            response = await self._http.request(operation.method, path, **options)
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"toolmesh unreachable at {self._http.base_url}: {exc}") from exc
        body = response.json() if response.content else None
        if response.is_error:
            raise _http_error(response.status_code, body)
        return body

    async def close(self) -> None:
        if self._owns:
            await self._http.aclose()


def _http_error(status: int, body: Any) -> ToolmeshError:
    if isinstance(body, dict) and "error_code" in body:
        return error_from_body(body)
    if status == 422 and isinstance(body, dict) and isinstance(body.get("detail"), list):
        return ValidationFailed("Request validation failed", {"errors": body["detail"]})
    return BackendUnavailable(f"HTTP {status}: {body!r}")
