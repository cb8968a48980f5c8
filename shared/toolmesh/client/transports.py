"""How the client reaches toolmesh: the transport protocol, and the REST routes (NATS request/reply on
the API subjects is in ``nats_transport``, so an HTTP-only client never loads ``nats``)."""

from __future__ import annotations

from typing import Any, Protocol

import httpx
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


def request_headers(token: str, idempotency_key: str | None) -> dict[str, str]:
    """The bearer token (none when empty) and the idempotency key, as headers of either transport."""
    headers = {AUTHORIZATION_HEADER: f"Bearer {token}"} if token else {}
    if idempotency_key is not None:
        headers[IDEMPOTENCY_HEADER] = idempotency_key
    return headers


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
        options: dict[str, Any] = {"headers": request_headers(self._token, idempotency_key), "timeout": timeout}
        if operation.method == "GET":
            options["params"] = {name: value for name, value in rest.items() if value is not None}  # no null in a query
        elif rest or operation.method == "POST":
            options["json"] = rest
        try:
            response = await self._http.request(operation.method, path, **options)
        except httpx.HTTPError as exc:
            raise BackendUnavailable(f"toolmesh unreachable at {self._http.base_url}: {exc}") from exc
        body = _decoded(response)
        if response.is_error:
            raise _http_error(response.status_code, body)
        return body

    async def close(self) -> None:
        if self._owns:
            await self._http.aclose()


def _decoded(response: httpx.Response) -> Any:
    """The JSON body; the text of a body that is not JSON (e.g. a proxy's error page); None when empty."""
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return response.text


def _http_error(status: int, body: Any) -> ToolmeshError:
    if isinstance(body, dict) and "error_code" in body:
        return error_from_body(body)
    if status == 422 and isinstance(body, dict) and isinstance(body.get("detail"), list):
        return ValidationFailed("Request validation failed", {"errors": body["detail"]})
    shown = body.strip().splitlines()[0] if isinstance(body, str) and body.strip() else repr(body)
    return BackendUnavailable(f"HTTP {status}: {shown}", {"status": status})
