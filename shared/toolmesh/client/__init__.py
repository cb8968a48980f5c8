"""An async Python client of toolmesh over NATS or HTTP, typed with the API's own contracts.

    async with await ToolmeshClient.over_nats("nats://127.0.0.1:4222", token) as mesh:
        server = await mesh.register(RegisterServerRequest(...), idempotency_key="register-docs")
        result = await mesh.call_tool(ToolCallRequest(name="docs.search", arguments={"q": "x"}))

Errors arrive as the exceptions of ``toolmesh.errors`` (``ServerNotFound``, ``ValidationFailed``,
...). It imports contracts, ``nats`` and ``httpx`` only: nothing of the server side.
"""

from toolmesh.client.client import ToolmeshClient
from toolmesh.client.events import follow_events
from toolmesh.client.transports import HttpTransport, NatsTransport, Transport

__all__ = ["HttpTransport", "NatsTransport", "ToolmeshClient", "Transport", "follow_events"]
