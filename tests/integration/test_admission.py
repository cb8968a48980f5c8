"""Admission control against real NATS, Postgres and the MCP demo peer: a gateway past its bound on
tool calls in flight refuses the rest at once (503 ``OVERLOADED`` + ``Retry-After`` on REST, a
JSON-RPC error on ``/mcp``, the error reply on the NATS API) while the admitted ones succeed; a key
holding its fair share while another waits gets 429; a session-worker refuses past its bound per
upstream; a request whose caller's deadline passed is never executed upstream.

The peer's ``block(until)`` holds a call until the test releases ``until`` on the peer itself
(past toolmesh, whose slots are full)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import httpx2
import mcp_types
import nats
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.mcp_client import mcp_session
from tests.peers.launch import PeerInfo, launch_peer
from toolmesh.contracts.rpc import CallToolRpc
from toolmesh.platform import metrics
from toolmesh.platform.admission import DEADLINE_HEADER
from toolmesh.platform.bus import verbs

pytestmark = pytest.mark.integration
CALL = "/api/v1/tools/call"


@contextlib.asynccontextmanager
async def upstream(peer: PeerInfo) -> AsyncIterator[ClientSession]:
    """A session with the peer itself, not through toolmesh."""
    assert peer.url is not None
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        streamable_http_client(peer.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def structured(session: ClientSession, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments or {})
    content: dict[str, Any] = result.structured_content or {}
    return content


async def blocked_upstream(session: ClientSession, count: int) -> None:
    """Wait until ``count`` calls of ``block`` have started on the peer."""

    async def started() -> bool:
        return (await structured(session, "stats"))["blocked"] >= count

    await eventually(started, timeout=30, what=f"{count} blocked calls upstream")


def call(server_id: str, tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "server_id": server_id, "arguments": arguments}


async def connected(system: System, peer: PeerInfo, name: str) -> str:
    created = await system.register(name, peer.transport_type, peer.config)
    return str((await system.wait_connected(created["id"]))["id"])


async def nats_call(system: System, body: dict[str, Any]) -> dict[str, Any]:
    nc = await nats.connect(system.settings.nats_url)
    try:
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        msg = await nc.request("toolmesh.api.v1.tools.call", json.dumps(body).encode(), timeout=30, headers=headers)
    finally:
        await nc.close()
    reply: dict[str, Any] = json.loads(msg.data)
    return reply


async def test_calls_past_the_gateway_bound_are_refused_on_every_surface_and_the_admitted_succeed(
    nats_url: str, database_url: str
) -> None:
    async with (
        launch_peer("http") as peer,
        running_system(nats_url, database_url, gateway_max_inflight_calls=2, gateway_admission_queue=0) as system,
        upstream(peer) as direct,
    ):
        server_id = await connected(system, peer, "slowpoke")
        held = [asyncio.create_task(system.api.post(CALL, json=call(server_id, "block", until="go"))) for _ in "ab"]
        await blocked_upstream(direct, 2)
        assert 'mcp_aggregator_inflight_calls{role="gateway"} 2.0' in metrics.render().decode()

        refused = await system.api.post(CALL, json=call(server_id, "tally", key="rest"))
        assert refused.status_code == 503, refused.text
        assert refused.json()["error_code"] == "OVERLOADED"
        assert refused.json()["context"]["retry_after_seconds"] == int(refused.headers["retry-after"]) >= 1

        async with mcp_session(system) as session:
            with pytest.raises(MCPError) as raised:
                await session.call_tool("slowpoke__tally", {"key": "mcp"})
        assert raised.value.error.code == mcp_types.INTERNAL_ERROR
        data = raised.value.error.data
        assert data["error_code"] == "OVERLOADED" and data["context"]["retry_after_seconds"] >= 1

        over_nats = await nats_call(system, call(server_id, "tally", key="nats"))
        assert over_nats["ok"] is False and over_nats["error"]["error_code"] == "OVERLOADED"

        await direct.call_tool("release", {"key": "go"})
        answers = await asyncio.gather(*held)
        assert [(a.status_code, a.json()["structuredContent"]["result"]) for a in answers] == [(200, "go")] * 2
        tallies = await structured(direct, "tallies")
        assert not {"rest", "mcp", "nats"} & set(tallies)  # nothing refused reached the upstream
        assert (await system.api.post(CALL, json=call(server_id, "tally", key="after"))).status_code == 200
    assert 'mcp_aggregator_calls_shed_total{reason="overloaded",role="gateway"}' in metrics.render().decode()


async def test_a_key_over_its_fair_share_gets_429_while_another_keys_call_is_admitted(
    nats_url: str, database_url: str
) -> None:
    async with (
        launch_peer("http") as peer,
        running_system(
            nats_url,
            database_url,
            gateway_max_inflight_calls=2,
            gateway_admission_queue=4,
            gateway_admission_wait_seconds=60,
        ) as system,
        upstream(peer) as direct,
    ):
        server_id = await connected(system, peer, "shared")
        tokens = [str((await system.create_key(name, "admin"))["token"]) for name in ("flooder", "other")]
        async with system.client_as(tokens[0]) as flooder, system.client_as(tokens[1]) as other:
            first = asyncio.create_task(flooder.post(CALL, json=call(server_id, "block", until="a1")))
            second = asyncio.create_task(flooder.post(CALL, json=call(server_id, "block", until="a2")))
            await blocked_upstream(direct, 2)
            waiting = asyncio.create_task(other.post(CALL, json=call(server_id, "tally", key="b")))

            async def over_share() -> httpx.Response | None:  # once "other" waits, at once
                body = {**call(server_id, "tally", key="a-more"), "timeout_seconds": 1}
                response = await flooder.post(CALL, json=body)
                return response if response.status_code == 429 else None

            refused = await eventually(over_share, timeout=30, what="the flooding key to be refused")
            assert refused.json()["error_code"] == "RATE_LIMITED"
            assert refused.json()["context"]["reason"] == "fair_share"
            assert int(refused.headers["retry-after"]) >= 1

            await direct.call_tool("release", {"key": "a1"})  # one of the flooder's slots frees
            admitted = await waiting
            assert admitted.status_code == 200, admitted.text
            assert not second.done()  # admitted while the flooding key still holds a slot
            await direct.call_tool("release", {"key": "a2"})
            assert [(await t).status_code for t in (first, second)] == [200, 200]
        assert (await structured(direct, "tallies")).get("a-more") is None


async def test_the_session_worker_refuses_past_its_bound_per_upstream(nats_url: str, database_url: str) -> None:
    async with (
        launch_peer("http") as peer,
        running_system(nats_url, database_url, worker_max_inflight_per_server=1) as system,
        upstream(peer) as direct,
    ):
        full_id, other_id = [await connected(system, peer, name) for name in ("full", "other")]
        held = asyncio.create_task(system.api.post(CALL, json=call(full_id, "block", until="w")))
        await blocked_upstream(direct, 1)

        refused = await system.api.post(CALL, json=call(full_id, "tally", key="refused"))
        assert refused.status_code == 503, refused.text
        assert refused.json()["error_code"] == "OVERLOADED"
        assert refused.json()["context"]["reason"] == "server_full"
        assert int(refused.headers["retry-after"]) >= 1
        assert (await system.api.post(CALL, json=call(other_id, "tally", key="other"))).status_code == 200

        await direct.call_tool("release", {"key": "w"})
        assert (await held).status_code == 200
        assert (await system.api.post(CALL, json=call(full_id, "tally", key="again"))).status_code == 200
        assert (await structured(direct, "tallies")).get("refused") is None


async def test_a_request_whose_deadline_passed_is_not_executed(nats_url: str, database_url: str) -> None:
    async with (
        launch_peer("http") as peer,
        running_system(nats_url, database_url) as system,
        upstream(peer) as direct,
    ):
        server_id = await connected(system, peer, "late")
        subject = verbs.CALL.subject(server_id)

        async def send(key: str, deadline: float) -> dict[str, Any]:
            body = CallToolRpc(tool="tally", arguments={"key": key}, timeout_seconds=10, call_id=f"test-{key}")
            headers = {DEADLINE_HEADER: f"{deadline:.3f}"}
            data = body.model_dump_json().encode()
            msg = await system.backends.nc.request(subject, data, timeout=30, headers=headers)
            reply: dict[str, Any] = json.loads(msg.data)
            return reply

        late = await send("late", time.time() - 60)  # a caller that gave up a minute ago
        assert late["ok"] is False and late["error"]["error_code"] == "EXECUTION_TIMEOUT", late
        assert late["error"]["context"]["reason"] == "deadline_passed"
        assert (await send("in-time", time.time() + 60))["ok"] is True
        tallies = await structured(direct, "tallies")
        assert tallies.get("in-time") == 1 and "late" not in tallies
    assert 'mcp_aggregator_deadline_expired_total{role="session_worker"}' in metrics.render().decode()


@contextlib.asynccontextmanager
async def hogged_loop(block_seconds: float) -> AsyncIterator[None]:
    """The event loop of this process kept busy: a callback holds it ``block_seconds`` at a time, over and
    over (what a role starved of CPU sees), until the block exits."""
    stop = asyncio.Event()

    async def hog() -> None:
        while not stop.is_set():
            time.sleep(block_seconds)  # noqa: ASYNC251 - holding the loop is the point
            await asyncio.sleep(0)

    task = asyncio.create_task(hog())
    try:
        yield
    finally:
        stop.set()
        await task


async def test_a_role_whose_event_loop_runs_late_refuses_calls_at_once_and_admits_again_after(
    nats_url: str, database_url: str
) -> None:
    """With its loop held 0.3 s at a time (far past ``shed_loop_lag_ms``), the process lowers the calls it
    admits at once: of bursts of 20 calls, those past the lowered limit get 503 ``OVERLOADED`` (reason
    ``busy``) and ``Retry-After``, without reaching the upstream; once the loop runs on time again, calls are
    admitted."""
    async with (
        launch_peer("http") as peer,
        running_system(nats_url, database_url, shed_loop_lag_ms=20.0) as system,
        upstream(peer) as direct,
    ):
        server_id = await connected(system, peer, "busy")
        statuses: list[int] = []
        async with hogged_loop(0.3):

            async def refused() -> httpx.Response | None:
                burst = [system.api.post(CALL, json=call(server_id, "tally", key="hogged")) for _ in range(20)]
                answers = await asyncio.gather(*burst)
                statuses.extend(answer.status_code for answer in answers)
                return next((answer for answer in answers if answer.status_code == 503), None)

            busy = await eventually(refused, timeout=30, what="a call refused while the loop runs late")
        assert busy.json()["error_code"] == "OVERLOADED" and busy.json()["context"]["reason"] == "busy", busy.text
        assert int(busy.headers["retry-after"]) >= 1

        # On connections of their own: the server's keep-alive timers, held up with the loop, close the
        # bursts' idle connections late, as the next request may go out on one of them.
        async with httpx.AsyncClient(base_url=system.api.base_url, headers=system.api.headers, timeout=30) as fresh:

            async def admitted() -> bool:
                answer = await fresh.post(CALL, json=call(server_id, "tally", key="on time"))
                return answer.status_code == 200

            await eventually(admitted, timeout=30, what="a call admitted once the loop runs on time")
        tallies = await structured(direct, "tallies")
        assert tallies.get("hogged", 0) == statuses.count(200), (tallies, statuses)  # no refused call ran
    assert 'mcp_aggregator_calls_shed_total{reason="busy"' in metrics.render().decode()
    assert "mcp_aggregator_event_loop_lag_seconds" in metrics.render().decode()
