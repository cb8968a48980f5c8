"""The users' own sessions of a per-user OAuth server keep their server → client traffic apart:
what one principal's upstream session asks or tells a client (sampling, elicitation, log messages)
goes only to that principal's clients, never to another principal's client that happens to be the
only one with a request in flight; a client's resource subscriptions and log level are set on its
own principal's session, never on the server's own (whose grant is another principal's)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from toolmesh.contracts.clients import NO_CLIENT
from toolmesh.contracts.rpc import ClientGoneRpc, ClientRef, SetLevelRpc, SubscribeRpc
from toolmesh.errors import LimitExceeded
from toolmesh.lifecycle import ServerStatus
from toolmesh.platform.supervision import TaskSet
from toolmesh_session_worker.clients import UpstreamClients
from toolmesh_session_worker.forwarding import caller_session, client_gone, set_level, subscribe, unsubscribe
from toolmesh_session_worker.principal_sessions import PrincipalSessions


class _Bus:
    """Records what would reach a client."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    async def request(self, subject: str, data: bytes, timeout: float, headers: Any = None) -> bytes:
        self.sent.append(subject)
        return b'{"ok": true, "result": {"action": "accept"}}'

    async def publish(self, subject: str, data: bytes, headers: Any = None) -> None:
        self.sent.append(subject)


class _Session:
    alive = True
    pending = 0

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def request(self, method: str, params: Any, *, timeout: float) -> dict[str, Any]:
        self.asked.append(method)
        return {}

    async def close(self) -> None:
        self.alive = False


def _server(bus: Any, limit: int = 100) -> tuple[Any, dict[str, UpstreamClients]]:
    sides: dict[str, UpstreamClients] = {}
    opened: list[str] = []
    losses: dict[str, list[Any]] = {}

    async def grants(principal: str) -> Any:
        opened.append(principal)
        return principal

    async def open_session(keeper: Any, lost: Any, clients: UpstreamClients) -> Any:
        sides[keeper] = clients
        losses.setdefault(keeper, []).append(lost)
        return _Session()

    principals = PrincipalSessions(
        "s1",
        "saas",
        open_session,
        grants,
        300.0,
        TaskSet("test"),
        lambda: UpstreamClients(bus, "s1", "saas", 5.0),
        limit=limit,
    )
    server = SimpleNamespace(
        session=_Session(),
        draining=False,
        status=ServerStatus.CONNECTED,
        server_id="s1",
        name="saas",
        principals=principals,
        clients=UpstreamClients(bus, "s1", "saas", 5.0),
        losses=losses,
        lease_valid=lambda: True,
    )
    return server, sides


async def test_another_principals_upstream_never_reaches_the_only_client_in_flight() -> None:
    bus = _Bus()
    server, sides = _server(bus)
    _, ann_clients = await caller_session(server, "ann")
    await caller_session(server, "bob")
    ann = ClientRef(id="ann-client", sampling=True, elicitation=True)
    ann_clients.begin("call-1", ann)  # only ann has a request in flight

    asked = await sides["bob"].request("elicitation/create", {"message": "bob's account"}, None)
    await sides["bob"].notification("notifications/message", {"level": "info", "data": "bob's data"}, None)
    assert asked["error"]["code"] == NO_CLIENT
    assert bus.sent == []

    await sides["ann"].request("elicitation/create", {"message": "ann's account"}, None)
    assert bus.sent == ["toolmesh.client.ann-client.request"]


async def test_the_servers_own_session_reaches_no_users_client() -> None:
    bus = _Bus()
    server, _ = _server(bus)
    _, ann_clients = await caller_session(server, "ann")
    ann_clients.begin("call-1", ClientRef(id="ann-client", elicitation=True))
    asked = await server.clients.request("elicitation/create", {"message": "the discovery user's"}, None)
    assert asked["error"]["code"] == NO_CLIENT and bus.sent == []


async def test_subscriptions_and_log_levels_go_to_the_callers_own_session() -> None:
    bus = _Bus()
    server, _ = _server(bus)
    ann = ClientRef(id="ann-client")
    await subscribe(server, SubscribeRpc(uri="file:///ann", client=ann, principal="ann"))
    await set_level(server, SetLevelRpc(level="debug", client=ann, principal="ann"))
    assert server.session.asked == []  # the discovery session acts as another principal upstream
    ann_session = server.principals.held("ann").session
    assert ann_session.asked == ["resources/subscribe", "logging/setLevel"]
    server.principals.idle_seconds = 0
    assert await server.principals.close_idle() == 0  # a session with a subscription is kept

    await unsubscribe(server, SubscribeRpc(uri="file:///ann", client=ann, principal="bob"))
    assert ann_session.asked == ["resources/subscribe", "logging/setLevel"]  # not bob's to release
    await client_gone(server, ClientGoneRpc(client=ann))
    assert ann_session.asked[-1] == "resources/unsubscribe"


async def test_a_workers_user_sessions_of_one_server_are_bounded() -> None:
    server, _ = _server(_Bus(), limit=2)
    await caller_session(server, "ann")
    await caller_session(server, "bob")
    await caller_session(server, "cat")  # ann's, used least recently, made room
    assert server.principals.held("ann") is None and len(server.principals) == 2
    for busy in ("bob", "cat"):
        server.principals.held(busy).session.pending = 1
    with pytest.raises(LimitExceeded):
        await caller_session(server, "dan")
    assert len(server.principals) == 2


async def test_a_lost_session_reported_late_never_closes_the_one_opened_in_its_place() -> None:
    server, _ = _server(_Bus())
    first: Any = (await caller_session(server, "ann"))[0]
    first.alive = False  # the upstream dropped it; a request opens another before the loss is handled
    second, _ = await caller_session(server, "ann")
    await server.losses["ann"][0]("connection closed")
    await asyncio.sleep(0)
    assert server.principals.held("ann").session is second and second.alive
