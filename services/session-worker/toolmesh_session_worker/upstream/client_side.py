"""The client side of an upstream session: what toolmesh answers when the upstream asks its client.

An upstream session is shared by many MCP clients, so a server → client request (sampling,
elicitation, roots) or notification must be attributed to one of them. ``CURRENT_CALL`` carries
the id of the request toolmesh is sending upstream in the sending task's context; the SDK's
Streamable HTTP and SSE clients hand each incoming message the context of the task whose
request stream it arrived on, so a message sent on a request's own stream (Streamable HTTP)
finds that request's id here. Anything else (STDIO, SSE, an HTTP standalone stream) arrives
without it and ``ClientSide`` falls back to its documented rule.
"""

from __future__ import annotations

import contextvars
from typing import Any, Protocol

import mcp_types
from mcp.client.session import ClientRequestContext
from pydantic import BaseModel, ValidationError

CURRENT_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("toolmesh_upstream_call", default=None)

ServerRequestResult = (
    mcp_types.CreateMessageResult
    | mcp_types.CreateMessageResultWithTools
    | mcp_types.ElicitResult
    | mcp_types.ListRootsResult
    | mcp_types.ErrorData
)


class ClientSide(Protocol):
    """Answers an upstream's requests to its client and takes its notifications."""

    async def request(self, method: str, params: dict[str, Any] | None, call_id: str | None) -> dict[str, Any]:
        """The client's result, or ``{"error": {"code", "message", "data"}}`` when it failed or was refused."""
        ...

    async def notification(self, method: str, params: dict[str, Any] | None, call_id: str | None) -> None:
        """Deliver a notification to the client(s) it concerns."""
        ...


def client_result(method: str, answer: dict[str, Any]) -> ServerRequestResult:
    """The typed result the SDK's client session sends back for ``method``, from a wire answer."""
    error = answer.get("error")
    if isinstance(error, dict):
        return mcp_types.ErrorData(
            code=int(error.get("code", mcp_types.INTERNAL_ERROR)),
            message=str(error.get("message", "client error")),
            data=error.get("data"),
        )
    try:
        if method == "sampling/createMessage":
            if isinstance(answer.get("content"), list):
                return mcp_types.CreateMessageResultWithTools.model_validate(answer, by_name=False)
            return mcp_types.CreateMessageResult.model_validate(answer, by_name=False)
        if method == "elicitation/create":
            return mcp_types.ElicitResult.model_validate(answer, by_name=False)
        return mcp_types.ListRootsResult.model_validate(answer, by_name=False)
    except ValidationError as exc:
        return mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=f"invalid client result for {method}: {exc}")


class ClientAnswers:
    """The SDK client session's callbacks for server → client requests, answered by a ``ClientSide``
    (or refused with ``METHOD_NOT_FOUND`` when there is none)."""

    def __init__(self, client_side: ClientSide | None) -> None:
        self._client_side = client_side

    async def _ask(self, method: str, params: BaseModel | None) -> ServerRequestResult:
        """A server → client request of the upstream, answered by ``ClientSide`` (or refused)."""
        wire = params.model_dump(by_alias=True, mode="json", exclude_none=True) if params is not None else None
        if self._client_side is None:
            return mcp_types.ErrorData(code=mcp_types.METHOD_NOT_FOUND, message=f"{method} is not supported")
        answer = await self._client_side.request(method, wire, CURRENT_CALL.get())
        return client_result(method, answer)

    async def sampling(
        self, context: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
    ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | mcp_types.ErrorData:
        result = await self._ask("sampling/createMessage", params)
        assert not isinstance(result, mcp_types.ElicitResult | mcp_types.ListRootsResult)
        return result

    async def elicitation(self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams) -> Any:
        return await self._ask("elicitation/create", params)

    async def roots(self, context: ClientRequestContext) -> Any:
        return await self._ask("roots/list", None)
