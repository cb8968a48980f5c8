"""``/mcp`` sessions shared by gateway replicas: one replica in this process (A), one as an OS process
of its own (B), both on one NATS. A client's requests go to whichever replica a load balancer
without stickiness picks; its session works on both and outlives the replica that opened it."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types.version import LATEST_HANDSHAKE_VERSION

from tests.harness import ADMIN_TOKEN, RoleProcess, System, eventually, running_system
from tests.mcp_client import Received, sample_by_echo, text_of
from tests.peers.launch import launch_peer
from toolmesh.platform.bus.topology import mcp_sessions_bucket
from toolmesh_cli.embedded import free_port
from toolmesh_gateway.front_door.session_table import McpSessionTable

pytestmark = pytest.mark.integration
ACCEPT = "application/json, text/event-stream"


@dataclass
class Replicas:
    """Replica A (in this process, with every other role) and replica B (a ``toolmesh gateway``)."""

    system: System
    b: RoleProcess
    port_a: int
    port_b: int


class Balancer(httpx2.AsyncBaseTransport):
    """Sends each request to the replica chosen at the time, as a load balancer without sticky
    sessions may; remembers which replica took which request."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.served: list[tuple[str, int]] = []
        self.session_ids: set[str] = set()
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.url = request.url.copy_with(port=self.port)
        self.served.append((request.method, self.port))
        if "mcp-session-id" in request.headers:
            self.session_ids.add(request.headers["mcp-session-id"])
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def replicas(nats_url: str, database_url: str) -> AsyncIterator[Replicas]:
    async with running_system(nats_url, database_url) as system, launch_peer("http") as peer:
        port_b = free_port()
        b = RoleProcess("gateway", system.settings, env={"TOOLMESH_PORT": str(port_b)})
        try:
            headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port_b}", headers=headers, timeout=10) as http:

                async def answering() -> bool:
                    try:
                        return (await http.get("/api/v1/aggregator/health")).status_code == 200
                    except httpx.TransportError:
                        return False

                await eventually(answering, timeout=60, what="replica B to answer")
            created = await system.register("remote", peer.transport_type, peer.config)
            await system.wait_connected(created["id"])
            yield Replicas(system, b, system.settings.port, port_b)
        finally:
            b.terminate()


@contextlib.asynccontextmanager
async def session_through(
    balancer: Balancer, *, sampling: bool = False, received: Received | None = None, path: str = "/mcp"
) -> AsyncIterator[ClientSession]:
    """An SDK client session whose every HTTP request goes where ``balancer`` says at the time."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    async with (
        httpx2.AsyncClient(transport=balancer, headers=headers, timeout=httpx2.Timeout(30, read=120)) as http,
        streamable_http_client(f"http://127.0.0.1:{balancer.port}{path}", http_client=http) as (read, write),
        ClientSession(
            read,
            write,
            sampling_callback=sample_by_echo if sampling else None,
            message_handler=received.handle if received else None,
        ) as session,
    ):
        await session.initialize()
        yield session


async def test_a_session_opened_on_one_replica_lists_and_calls_tools_on_the_other(
    nats_url: str, database_url: str
) -> None:
    async with replicas(nats_url, database_url) as r:
        balancer = Balancer(r.port_a)
        async with session_through(balancer, sampling=True) as session:
            balancer.port = r.port_b
            before = len(balancer.served)
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"remote__echo", "remote__add"} <= names
            added = await session.call_tool("remote__add", {"a": 2, "b": 3})
            assert added.structured_content == {"result": 5.0}
            # The upstream's sampling request reaches the client on the stream of B's request.
            asked = await session.call_tool("remote__ask", {"question": "who answers?"})
            assert asked.is_error is False, asked
            assert text_of(asked) == "model said: echo of who answers?"
            assert {port for method, port in balancer.served[before:] if method == "POST"} == {r.port_b}

        balancer = Balancer(r.port_a)  # /mcp/{server}: the upstream served unchanged, through B
        async with session_through(balancer, sampling=True, path="/mcp/remote") as session:
            balancer.port = r.port_b
            assert {"echo", "add"} <= {tool.name for tool in (await session.list_tools()).tools}
            asked = await session.call_tool("ask", {"question": "and here?"})
            assert text_of(asked) == "model said: echo of and here?"


class RoundRobin(Balancer):
    """A load balancer without stickiness sending each request to the next replica in turn."""

    def __init__(self, ports: list[int]) -> None:
        super().__init__(ports[0])
        self._turns = itertools.cycle(ports)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.port = next(self._turns)
        return await super().handle_async_request(request)


@pytest.mark.parametrize("path", ["/mcp", "/mcp/remote"])
async def test_the_answer_to_a_sampling_request_reaches_the_replica_whose_call_waits(
    nats_url: str, database_url: str, path: str
) -> None:
    """Each request to the next replica: the client's answer to the upstream's sampling request is
    posted to the replica that did not ask, which hands it over (before: the call never ended)."""
    tool = "remote__ask" if path == "/mcp" else "ask"
    async with replicas(nats_url, database_url) as r:
        balancer = RoundRobin([r.port_a, r.port_b])
        async with session_through(balancer, sampling=True, path=path) as session:
            for question in ("first", "second", "third"):
                with anyio.fail_after(60):
                    asked = await session.call_tool(tool, {"question": question})
                assert text_of(asked) == f"model said: echo of {question}", asked
        posts = [port for method, port in balancer.served if method == "POST"]
        assert {r.port_a, r.port_b} <= set(posts)


class ByMethod(Balancer):
    """A load balancer that sends a session's GET (its standalone stream) to one replica and every POST
    to the other."""

    def __init__(self, post: int, get: int) -> None:
        super().__init__(post)
        self._post, self._get = post, get

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.port = self._get if request.method == "GET" else self._post
        return await super().handle_async_request(request)


async def test_a_resource_update_reaches_the_stream_held_by_the_other_replica(nats_url: str, database_url: str) -> None:
    """Subscribed through replica A, listening on replica B's standalone stream: the update the
    upstream sends reaches the client (before: A had no stream to send it on and dropped it)."""
    async with replicas(nats_url, database_url) as r:
        balancer, received = ByMethod(post=r.port_a, get=r.port_b), Received()
        async with session_through(balancer, received=received) as session:
            await eventually(lambda: _true(("GET", r.port_b) in balancer.served), timeout=20, what="GET stream on B")
            await session.subscribe_resource("demo://logo")
            await session.call_tool("remote__touch", {"uri": "demo://logo"})
            await eventually(lambda: _true(received.updated("demo://logo") > 0), timeout=20, what="the update")
        assert {port for method, port in balancer.served if method == "POST"} == {r.port_a}


async def test_a_session_survives_the_sigkill_of_the_replica_that_opened_it(nats_url: str, database_url: str) -> None:
    async with replicas(nats_url, database_url) as r:
        balancer = Balancer(r.port_b)
        received = Received()
        async with session_through(balancer, received=received) as session:
            assert "remote__echo" in {tool.name for tool in (await session.list_tools()).tools}
            assert {port for _, port in balancer.served} == {r.port_b}

            r.b.kill()
            assert r.b.process.poll() is not None
            balancer.port = r.port_a

            names = {tool.name for tool in (await session.list_tools()).tools}
            assert {"remote__echo", "remote__add"} <= names
            echoed = await session.call_tool("remote__echo", {"text": "still here"})
            assert echoed.is_error is False and text_of(echoed) == "still here"

            # The client reopens its standalone stream on A, which now announces list changes to it.
            await eventually(lambda: _true(("GET", r.port_a) in balancer.served), timeout=20, what="GET stream on A")
            async with launch_peer("stdio") as peer:
                created = await r.system.register("late", peer.transport_type, peer.config)
            await r.system.wait_connected(created["id"])
            await eventually(lambda: _true(received.tools_changed() > 0), timeout=20, what="tools/list_changed from A")
            assert "late__echo" in {tool.name for tool in (await session.list_tools()).tools}


async def _true(value: bool) -> bool:
    return value


async def _rpc(
    http: httpx.AsyncClient, port: int, token: str, method: str, session: str | None = None
) -> tuple[httpx.Response, dict[str, Any] | None]:
    """One JSON-RPC request to ``/mcp`` of the replica at ``port``; the response and its JSON-RPC message."""
    params: dict[str, Any] = {}
    if method == "initialize":
        params = {
            "protocolVersion": LATEST_HANDSHAKE_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "MCP-Protocol-Version": LATEST_HANDSHAKE_VERSION}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = await http.post(f"http://127.0.0.1:{port}/mcp", json=body, headers=headers)
    return response, _message_of(response)


def _message_of(response: httpx.Response) -> dict[str, Any] | None:
    if response.headers.get("content-type", "").startswith("application/json"):
        found: dict[str, Any] = response.json()
        return found
    for line in response.text.splitlines():
        if line.startswith("data: ") and line[6:].strip():
            message: dict[str, Any] = json.loads(line[6:])
            return message
    return None


async def _open(http: httpx.AsyncClient, port: int, token: str) -> str:
    """Initialize a session at the replica at ``port``; its id."""
    response, message = await _rpc(http, port, token, "initialize")
    assert response.status_code == 200 and message is not None and "result" in message, response.text
    session = response.headers["mcp-session-id"]
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Mcp-Session-Id": session}
    done = await http.post(
        f"http://127.0.0.1:{port}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers
    )
    assert done.status_code == 202, done.text
    return session


async def _tools(http: httpx.AsyncClient, port: int, token: str, session: str) -> int:
    """tools/list in the session at the replica at ``port``: the HTTP status (200 only with tools)."""
    response, message = await _rpc(http, port, token, "tools/list", session)
    if response.status_code == 200:
        assert message is not None and message["result"]["tools"], response.text
    return response.status_code


async def _delete(http: httpx.AsyncClient, port: int, token: str, session: str) -> int:
    headers = {"Authorization": f"Bearer {token}", "Mcp-Session-Id": session}
    return (await http.delete(f"http://127.0.0.1:{port}/mcp", headers=headers)).status_code


async def test_a_session_is_refused_to_another_key_on_every_replica(nats_url: str, database_url: str) -> None:
    async with replicas(nats_url, database_url) as r, httpx.AsyncClient(timeout=30) as http:
        created = await r.system.api.post(
            "/api/v1/auth/keys", json={"name": "other", "role": "admin", "namespace": "default"}
        )
        assert created.status_code == 201, created.text
        other = created.json()["token"]
        session = await _open(http, r.port_a, ADMIN_TOKEN)
        for port in (r.port_b, r.port_a):  # B before it ever served the session, and A that opened it
            response, message = await _rpc(http, port, other, "tools/list", session)
            assert response.status_code == 404 and message is not None and "result" not in message, response.text
            assert await _delete(http, port, other, session) == 404
        assert await _tools(http, r.port_b, ADMIN_TOKEN, session) == 200
        assert await _tools(http, r.port_a, ADMIN_TOKEN, session) == 200
        assert await _tools(http, r.port_b, other, session) == 404  # also once B holds a copy of it


async def test_delete_ends_a_session_on_both_replicas(nats_url: str, database_url: str) -> None:
    async with replicas(nats_url, database_url) as r, httpx.AsyncClient(timeout=30) as http:
        first = await _open(http, r.port_a, ADMIN_TOKEN)
        assert await _tools(http, r.port_b, ADMIN_TOKEN, first) == 200  # B holds a copy too
        assert await _delete(http, r.port_a, ADMIN_TOKEN, first) == 200
        assert await _tools(http, r.port_b, ADMIN_TOKEN, first) == 404
        assert await _tools(http, r.port_a, ADMIN_TOKEN, first) == 404

        second = await _open(http, r.port_a, ADMIN_TOKEN)
        assert await _delete(http, r.port_b, ADMIN_TOKEN, second) == 200  # ended where it was not opened
        assert await _tools(http, r.port_a, ADMIN_TOKEN, second) == 404
        assert await _tools(http, r.port_b, ADMIN_TOKEN, second) == 404
        assert await _tools(http, r.port_a, ADMIN_TOKEN, await _open(http, r.port_a, ADMIN_TOKEN)) == 200


async def test_a_session_idle_for_the_ttl_expires(nats_url: str, database_url: str) -> None:
    async with (
        running_system(nats_url, database_url, mcp_session_ttl_seconds=1.0) as system,
        httpx.AsyncClient(timeout=30) as http,
    ):
        port = system.settings.port
        table = McpSessionTable(system.backends.bus, await mcp_sessions_bucket(system.backends.js, 1.0))
        session = await _open(http, port, ADMIN_TOKEN)
        assert await table.get(session) is not None

        async def gone() -> bool:
            return await table.get(session) is None

        await eventually(gone, timeout=30, what="the idle session's record to expire")
        response, _ = await _rpc(http, port, ADMIN_TOKEN, "ping", session)
        assert response.status_code == 404, response.text


async def test_a_session_with_an_open_standalone_stream_outlives_the_ttl(nats_url: str, database_url: str) -> None:
    async with running_system(nats_url, database_url, mcp_session_ttl_seconds=1.0) as system:
        table = McpSessionTable(system.backends.bus, await mcp_sessions_bucket(system.backends.js, 1.0))
        balancer = Balancer(system.settings.port)
        async with session_through(balancer) as session:
            await eventually(lambda: _true(("GET", balancer.port) in balancer.served), timeout=20, what="GET stream")
            (session_id,) = balancer.session_ids
            opened = await table.get(session_id)
            assert opened is not None
            requests = len(balancer.served)

            async def kept_past_the_ttl() -> bool:
                record = await table.get(session_id)
                assert record is not None, "the record expired while the GET stream was open"
                return record.touched_at > opened.touched_at + 3.0

            await eventually(kept_past_the_ttl, timeout=30, what="the record to be kept alive for 3 TTLs")
            assert len(balancer.served) == requests  # kept alive by the open stream, not by requests
            assert (await session.list_tools()).tools == []  # the session still answers (no server registered)
