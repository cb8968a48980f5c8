"""What the session-worker uses of an upstream: the surface MCP sessions and REST tool servers share."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import mcp_types
from pydantic import BaseModel

from toolmesh_session_worker.upstream.wire import ProgressCallback

_ResultT = TypeVar("_ResultT", bound=BaseModel)


class Upstream(Protocol):
    """A connected upstream: MCP (``UpstreamSession``) or a REST tool server (``RestSession``)."""

    server_name: str
    initialize_result: mcp_types.InitializeResult | None
    modern_only: dict[str, tuple[str, ...]]
    """What the upstream lists in the 2026-07-28 era only, by list (``tools``, ``prompts``, ``resources``,
    ``resource_templates``: names, URIs, URI templates), as its last listing found."""

    @property
    def alive(self) -> bool:
        """True while the upstream is usable."""
        ...

    @property
    def pending(self) -> int:
        """Tool calls in flight."""
        ...

    @property
    def pid(self) -> int | None:
        """The local process serving the upstream (STDIO), else None."""
        ...

    @property
    def lost_reason(self) -> str | None:
        """Why the connection was lost, if it was."""
        ...

    @property
    def modern_versions(self) -> tuple[str, ...]:
        """The 2026-07-28-era versions the upstream speaks besides the handshake (none: handshake only)."""
        ...

    @property
    def modern_tasks(self) -> bool:
        """Whether the upstream runs tasks of its own in the 2026-07-28 era (the Tasks extension)."""
        ...

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities:
        """What the upstream offers (MCP: what it declared at initialize)."""
        ...

    async def list_tools(self, *, timeout: float = 60.0) -> list[mcp_types.Tool]:
        """Every tool of the upstream."""
        ...

    async def send(
        self, request: mcp_types.ClientRequest, result_type: type[_ResultT], *, what: str, limit: float
    ) -> _ResultT:
        """One typed request."""
        ...

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
        """One MCP request as is; the raw result (in the 2026-07-28 era, given a client ``envelope`` of
        that era, when the upstream speaks it)."""
        ...

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float,
        progress: ProgressCallback | None = None,
        call_id: str | None = None,
    ) -> mcp_types.CallToolResult:
        """Call one tool; a tool's own failure is a result with ``is_error`` set."""
        ...

    async def ping(self, *, timeout: float) -> None:
        """Check the upstream answers."""
        ...

    async def close(self) -> None:
        """Stop using the upstream (idempotent)."""
        ...
