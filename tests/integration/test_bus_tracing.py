"""W3C trace context travels server → client as it does client → server: a request to a server's
owner is served in a span that is a child of the gateway's send, and an upstream's sampling request
and log notification, sent by the session-worker's ``UpstreamClients`` over real NATS, are handled
by the gateway's ``ClientLinks`` in spans that are children of the session-worker's send.

Run in a subprocess: installing a tracer provider is process-wide and must not leak into other tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).parents[2]

SCRIPT = textwrap.dedent(
    """
    import asyncio, os
    import nats
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind
    from toolmesh.platform import telemetry
    from toolmesh.platform.bus import verbs
    from toolmesh.platform.bus.dispatch import Dispatcher
    from toolmesh.platform.bus.nats_bus import NatsBus
    from toolmesh.platform.bus.requests import ask_owner
    from toolmesh.contracts.clients import client_id
    from toolmesh.contracts.rpc import ClientRef, PingRpc, PingRpcResult
    from toolmesh_gateway.front_door.client_links import ClientLinks
    from toolmesh_gateway.front_door.session_channels import SessionChannels
    from toolmesh_session_worker.clients import UpstreamClients

    exporter = InMemorySpanExporter()
    assert telemetry.configure_tracing({}, exporter=exporter)


    async def main() -> None:
        gateway_nc = await nats.connect(os.environ["TEST_NATS_URL"])
        worker_nc = await nats.connect(os.environ["TEST_NATS_URL"])
        gateway = NatsBus(gateway_nc)
        links = ClientLinks(gateway, "replica1", SessionChannels())
        await links.start()
        await gateway_nc.flush()  # the subscription is in place before the worker sends
        clients = UpstreamClients(NatsBus(worker_nc), "srv1", "demo", 10.0)

        async def ping(key, body):
            return PingRpcResult(response_time_ms=1.0)

        owner = Dispatcher(verbs.RPC, {verbs.PING: ping}, span_name="session")
        await worker_nc.subscribe(verbs.RPC.wildcard("srv1"), cb=owner.dispatch)
        await worker_nc.flush()
        with telemetry.span("HTTP POST") as http:  # client -> server: a request to the owner
            assert await ask_owner(gateway, "srv1", "ping", PingRpc(), timeout=10) == {"response_time_ms": 1.0}
        spans = {s.name: s for s in exporter.get_finished_spans()}
        asked, served = spans["nats request ping"], spans["session ping"]
        assert asked.parent.span_id == http.get_span_context().span_id
        assert served.parent.span_id == asked.context.span_id
        exporter.clear()

        clients.begin("call1", ClientRef(id=client_id("replica1", "ended"), sampling=True))
        with telemetry.span("session call") as call:
            trace_id = telemetry.current_trace_id()
            await clients.notification("notifications/message", {"level": "info", "data": "x"}, "call1")
            # Answered after the notification was handled: one subscription takes its messages in order.
            answer = await clients.request("sampling/createMessage", {"messages": [], "maxTokens": 5}, "call1")
        assert answer["error"]["message"] == "the client session is gone", answer
        await links.close()
        await gateway_nc.close()
        await worker_nc.close()

        spans = {s.name: s for s in exporter.get_finished_spans()}
        assert {"client request", "client notify"} <= set(spans), sorted(spans)
        sent, handled = spans["nats request request"], spans["client request"]
        assert sent.kind == SpanKind.CLIENT and handled.kind == SpanKind.SERVER
        assert sent.parent.span_id == call.get_span_context().span_id
        assert handled.parent.span_id == sent.context.span_id  # the gateway continues the worker's trace
        published, notified = spans["nats publish notify"], spans["client notify"]
        assert published.parent.span_id == call.get_span_context().span_id
        assert notified.parent.span_id == published.context.span_id
        assert {format(s.context.trace_id, "032x") for s in spans.values()} == {trace_id}


    asyncio.run(main())
    """
)


def test_a_trace_id_travels_server_to_client_as_it_does_client_to_server(nats_url: str) -> None:
    env = os.environ | {"TEST_NATS_URL": nats_url}
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT, env=env
    )
    assert result.returncode == 0, result.stderr
