"""Upstreams of the session-worker: MCP sessions (STDIO, SSE, Streamable HTTP) and REST tool servers
behind one surface (``Upstream``)."""

from toolmesh_session_worker.upstream.callbacks import LostCallback, ToolsChangedCallback
from toolmesh_session_worker.upstream.errors import (
    UpstreamError,
    UpstreamMisconfigured,
    UpstreamRefused,
    UpstreamScopeRequired,
    UpstreamTimeout,
)
from toolmesh_session_worker.upstream.opening import OpeningOptions, open_session
from toolmesh_session_worker.upstream.rest import RestPolicy, RestSession
from toolmesh_session_worker.upstream.session import UpstreamSession
from toolmesh_session_worker.upstream.surface import Upstream
from toolmesh_session_worker.upstream.wire import ProgressCallback

__all__ = [
    "LostCallback",
    "OpeningOptions",
    "ProgressCallback",
    "RestPolicy",
    "RestSession",
    "ToolsChangedCallback",
    "Upstream",
    "UpstreamError",
    "UpstreamMisconfigured",
    "UpstreamRefused",
    "UpstreamScopeRequired",
    "UpstreamSession",
    "UpstreamTimeout",
    "open_session",
]
