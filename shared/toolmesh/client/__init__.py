"""An async Python client of toolmesh over NATS or HTTP, typed with the API's own contracts.

    async with await ToolmeshClient.over_nats("nats://127.0.0.1:4222", token) as mesh:
        server = await mesh.register(RegisterServerRequest(...), idempotency_key="register-docs")
        result = await mesh.call_tool(ToolCallRequest(name="docs.search", arguments={"q": "x"}))

Errors arrive as the exceptions of ``toolmesh.errors`` (``ServerNotFound``, ``ValidationFailed``,
...). It imports contracts, ``httpx`` and (over NATS only) ``nats``: nothing of the server side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolmesh.client.client import ToolmeshClient
    from toolmesh.client.events import follow_events
    from toolmesh.client.nats_transport import NatsTransport
    from toolmesh.client.transports import HttpTransport, Transport

_HOMES = {
    "ToolmeshClient": "toolmesh.client.client",
    "follow_events": "toolmesh.client.events",
    "NatsTransport": "toolmesh.client.nats_transport",
    "HttpTransport": "toolmesh.client.transports",
    "Transport": "toolmesh.client.transports",
}
__all__ = ["HttpTransport", "NatsTransport", "ToolmeshClient", "Transport", "follow_events"]


def __getattr__(name: str) -> Any:
    """Each public name from its module on first use, so a client over HTTP never loads ``nats``."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
