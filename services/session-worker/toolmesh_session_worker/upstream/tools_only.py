"""What an upstream that is no MCP server shares behind the upstream surface (a REST tool server, an
OpenAPI-described API): it describes itself as an MCP server offering tools only, has no protocol
eras, no local process and no tasks of its own, and answers ``tools/list``, ``tools/call`` and
``ping``; any other method is JSON-RPC "method not found"."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, TypeVar

import mcp_types
from mcp_types.version import LATEST_HANDSHAKE_VERSION
from pydantic import BaseModel, ValidationError

from toolmesh_session_worker.upstream.errors import UpstreamError
from toolmesh_session_worker.upstream.wire import ProgressCallback

_ResultT = TypeVar("_ResultT", bound=BaseModel)


class ToolsOnlySession(ABC):
    """The MCP face of a tools-only upstream; a subclass lists, calls and pings it."""

    def __init__(self, server_name: str, kind: str, title: str, version: str) -> None:
        """``kind`` names the upstream in errors ("a REST tool server"); ``title`` and ``version`` are
        its ``serverInfo``."""
        self.server_name = server_name
        self.modern_only: dict[str, tuple[str, ...]] = {}  # no MCP eras
        self.initialize_result: mcp_types.InitializeResult | None = mcp_types.InitializeResult(
            protocol_version=LATEST_HANDSHAKE_VERSION,
            capabilities=mcp_types.ServerCapabilities(tools=mcp_types.ToolsCapability(list_changed=False)),
            server_info=mcp_types.Implementation(name=server_name, title=title, version=version),
        )
        self._kind = kind
        self._alive = False
        self._pending = 0
        self._lost_reason: str | None = None

    @property
    def alive(self) -> bool:
        """True between a successful connect and ``close()`` or the upstream being given up."""
        return self._alive

    @property
    def pending(self) -> int:
        """Tool calls in flight."""
        return self._pending

    @property
    def pid(self) -> None:
        """Remote upstreams have no local process."""
        return None

    @property
    def lost_reason(self) -> str | None:
        """Why the upstream was given up, if it was."""
        return self._lost_reason

    @property
    def modern_versions(self) -> tuple[str, ...]:
        """None: a tools-only upstream has no MCP eras."""
        return ()

    @property
    def modern_tasks(self) -> bool:
        """False: a tools-only upstream has no tasks of its own."""
        return False

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities:
        """Tools only."""
        assert self.initialize_result is not None
        return self.initialize_result.capabilities

    @abstractmethod
    async def list_tools(self, *, timeout: float = 60.0) -> list[mcp_types.Tool]:
        """The upstream's tools now."""

    @abstractmethod
    async def ping(self, *, timeout: float) -> None:
        """Raise an ``UpstreamError`` unless the upstream answers within ``timeout``."""

    @abstractmethod
    async def _answer_call(self, name: str, arguments: dict[str, Any], timeout: float) -> dict[str, Any]:
        """``tools/call``'s result (a ``CallToolResult`` as JSON)."""

    async def request(
        self,
        method: str,
        params: dict[str, Any] | None,
        *,
        timeout: float,
        call_id: str | None = None,
        progress: ProgressCallback | None = None,
        envelope: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """An MCP request as a tools-only upstream can answer it (``envelope`` does not matter: no eras)."""
        params = params or {}
        if method == "tools/list":
            tools = await self.list_tools(timeout=timeout)
            return {"tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]}
        if method == "tools/call":
            return await self._answer_call(str(params.get("name", "")), dict(params.get("arguments") or {}), timeout)
        if method == "ping":
            await self.ping(timeout=timeout)
            return {}
        raise UpstreamError(
            f"{self.server_name}: {self._kind} does not serve {method}",
            code=mcp_types.METHOD_NOT_FOUND,
            reason=f"Method not found: {method}",
            summary=f"{self._kind} does not serve {method}",
        )

    async def send(
        self, request: mcp_types.ClientRequest, result_type: type[_ResultT], *, what: str, limit: float
    ) -> _ResultT:
        """One typed request, answered by ``request``."""
        params = request.params.model_dump(by_alias=True, mode="json", exclude_none=True) if request.params else None
        answer = await self.request(request.method, params, timeout=limit)
        try:
            return result_type.model_validate(answer, by_name=False)
        except ValidationError as exc:
            raise UpstreamError(
                f"{self.server_name}: invalid answer while {what}: {exc}", summary=f"invalid answer while {what}"
            ) from exc
