"""Upstream MCP sessions of the session-worker: STDIO, SSE and Streamable HTTP behind one API."""

from toolmesh_session_worker.upstream.session import (
    LostCallback,
    ProgressCallback,
    ToolsChangedCallback,
    UpstreamError,
    UpstreamSession,
    UpstreamTimeout,
    open_session,
)

__all__ = [
    "LostCallback",
    "ProgressCallback",
    "ToolsChangedCallback",
    "UpstreamError",
    "UpstreamSession",
    "UpstreamTimeout",
    "open_session",
]
