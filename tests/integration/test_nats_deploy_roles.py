"""deploy/nats/nats.conf on a real nats-server: each role runs with its own user and only its subjects,
replies travel on per-user inbox prefixes, and the shared `service` user reaches the public API
only: it may not subscribe to `_INBOX.>` (nor any other user's inbox), nor read the events of the
namespaces, nor publish commands — so it sees no tool result, no new key token, no event. In
JetStream each role reaches only the streams, consumers and buckets it uses."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import mcp_types
import nats
import pytest
from mcp.server.request_state import AESGCMRequestStateCodec
from mcp.shared.exceptions import MCPError
from nats.aio.client import Client as NATS
from nats.js.errors import BadRequestError
from nats.js.kv import KeyValue

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from tests.integration.nats_deploy import DeployNats, always_false, connection_as, deploy_nats, role_settings
from tests.peers.launch import launch_peer
from toolmesh.contracts.commands import COMMANDS_STREAM, ConnectServer
from toolmesh.contracts.events import EVENTS_STREAM, EVENTS_SUBJECTS
from toolmesh.platform.bus.leases import LeaseTable
from toolmesh.platform.bus.topology import (
    ensure_streams,
    events_stream_config,
    idempotency_bucket,
    leases_bucket,
    mcp_sessions_bucket,
    names_bucket,
    spent_states_bucket,
)
from toolmesh_cli.roles import ROLES, STREAMS
from toolmesh_gateway.front_door.relayed_states import RelayedStates
from toolmesh_gateway.name_reservations import reserve_name
from toolmesh_projector.projector import DURABLE, consumer_config

pytestmark = pytest.mark.integration
KEPT_EVENT_SUBJECT = "toolmesh.evt.test.kept"


@contextlib.asynccontextmanager
async def every_role_apart(deploy: DeployNats, database_url: str) -> AsyncIterator[System]:
    """Each role in a system of its own, with its own NATS user; yields the gateway's. The one that
    uses least starts first (the projector: only the events stream), so each creates what it uses."""
    async with contextlib.AsyncExitStack() as stack:
        for role in reversed([r for r in ROLES if r != "gateway"]):
            await stack.enter_async_context(
                running_system(deploy.address, database_url, roles=[role], **role_settings(role))
            )
        yield await stack.enter_async_context(
            running_system(deploy.address, database_url, roles=["gateway"], **role_settings("gateway"))
        )


async def api_request(nc: NATS, operation: str, body: dict[str, Any], timeout: float = 10) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    subject, data = f"toolmesh.api.v1.{operation}", json.dumps(body).encode()
    reply = await nc.request(subject, data, timeout=timeout, headers=headers)
    result: dict[str, Any] = json.loads(reply.data)
    return result


async def test_every_role_works_with_its_own_user_and_the_service_sees_none_of_their_replies(
    tmp_path: Path, database_url: str
) -> None:
    canary = "canary-result-4f1d"
    async with (
        deploy_nats(tmp_path) as deploy,
        every_role_apart(deploy, database_url) as system,
        launch_peer("http") as peer,
        connection_as(deploy.address, "service", inbox_prefix="_INBOX_service") as spy,
    ):
        for subject in ("_INBOX.>", "_INBOX_gateway.>", "_INBOX_session-worker.>", ">", "toolmesh.rpc.>"):
            await spy.listen(subject)
            await eventually(lambda s=subject: spy.refused(f'Subscription to "{s}"'), timeout=10, what=subject)

        created = await system.register("demo", peer.transport_type, peer.config)
        await system.wait_connected(created["id"])  # session-worker, projector
        call = await system.api.post("/api/v1/tools/call", json={"name": "demo.echo", "arguments": {"text": canary}})
        assert call.status_code == 200 and canary in call.text, call.text  # gateway -> session-worker -> reply

        async def searched() -> bool:  # gateway -> indexer over toolmesh.rpc.search
            response = await system.api.post("/api/v1/search", json={"query": "echo the text", "strategy": "flat"})
            return response.status_code == 200 and "demo.echo" in {t["name"] for t in response.json()["tools"]}

        await eventually(searched, timeout=60, what="the indexer to answer a search")
        health = (await system.api.get("/api/v1/search/health")).json()
        assert health["answered_by"] == "indexer (over NATS)", health

        async def health_checked() -> bool:  # health-worker -> session-worker ping, event -> projector
            return (await system.server(created["id"]))["last_health_check"] is not None

        await eventually(health_checked, timeout=30, what="the health-worker to check the server")
        await system.create_key("victim", "agent")

        listing = await api_request(spy.nc, "servers.list", {})  # the service's own requests work
        assert [s["name"] for s in listing["result"]["servers"]] == ["demo"]
        assert spy.received == []  # no tool result, no key token, no event
        assert deploy.violations() == [line for line in deploy.violations() if '"service"' in line]


async def test_the_service_user_reaches_the_public_api_only(tmp_path: Path, database_url: str) -> None:
    async with (
        deploy_nats(tmp_path) as deploy,
        running_system(deploy.address, database_url, roles=["gateway"], **role_settings("gateway")),
    ):
        async with connection_as(deploy.address, "service", inbox_prefix="_INBOX_service") as service:
            state = await api_request(service.nc, "aggregator.state", {})
            assert state["ok"] is True
            for subject in ("toolmesh.evt.>", "_INBOX_projector.>"):
                await service.listen(subject)
                await eventually(lambda s=subject: service.refused(f'Subscription to "{s}"'), timeout=10, what=subject)
            forbidden = [
                "$JS.API.STREAM.INFO.TOOLMESH_EVENTS",
                "toolmesh.cmd.server.connect",
                "toolmesh.evt.key.created",
            ]
            for subject in forbidden:  # no event replay, no commands, no forged events
                await service.nc.publish(subject, b"{}")
                await service.nc.flush()
                await eventually(lambda s=subject: service.refused(f'Publish to "{s}"'), timeout=10, what=subject)
            assert service.received == []

        async with connection_as(deploy.address, "service") as default_inbox:  # `_INBOX.>` is nobody's
            with pytest.raises(nats.errors.TimeoutError):
                await api_request(default_inbox.nc, "aggregator.state", {}, timeout=3)
            assert await default_inbox.refused('Subscription to "_INBOX.')


async def test_no_role_may_delete_purge_or_reconfigure_the_event_log(tmp_path: Path) -> None:
    async with deploy_nats(tmp_path) as deploy:
        async with connection_as(deploy.address, "gateway", inbox_prefix="_INBOX_gateway") as gateway:
            js = gateway.nc.jetstream(timeout=5)
            await ensure_streams(js, STREAMS["gateway"])
            await js.publish(KEPT_EVENT_SUBJECT, b"{}")
        async with connection_as(deploy.address, "projector", inbox_prefix="_INBOX_projector") as projector:
            js = projector.nc.jetstream(timeout=5)
            await js.pull_subscribe(EVENTS_SUBJECTS, durable=DURABLE, stream=EVENTS_STREAM, config=consumer_config())
        for role in ROLES:
            async with connection_as(deploy.address, role, inbox_prefix=f"_INBOX_{role}") as conn:
                js = conn.nc.jetstream(timeout=5)
                await ensure_streams(js, STREAMS[role])  # what every role does at start
                refused = conn.nc.jetstream(timeout=0.5)  # no answer comes: the server drops the request
                attempts = {
                    "STREAM.DELETE": refused.delete_stream(EVENTS_STREAM),
                    "STREAM.PURGE": refused.purge_stream(EVENTS_STREAM),
                    "STREAM.MSG.DELETE": refused.delete_msg(EVENTS_STREAM, 1),
                    "STREAM.UPDATE": refused.update_stream(events_stream_config()),
                }
                with pytest.raises(BadRequestError):  # a create may not change the stream either
                    await js.add_stream(replace(events_stream_config(), max_msgs=1))
                if role == "projector":  # `--rebuild` drops its own durable consumer, and no other role may
                    assert await js.delete_consumer(EVENTS_STREAM, DURABLE)
                else:
                    attempts["CONSUMER.DELETE"] = refused.delete_consumer(EVENTS_STREAM, DURABLE)
                for verb, attempt in attempts.items():
                    with pytest.raises(nats.errors.TimeoutError):
                        await attempt
                    what = f'Publish to "$JS.API.{verb}.{EVENTS_STREAM}'
                    await eventually(lambda w=what: conn.refused(w), timeout=10, what=f"{role}: {what}")
                assert (await js.stream_info(EVENTS_STREAM)).state.messages == 1


@dataclass(frozen=True)
class Read:
    """A JetStream request that reads a stream or a bucket, and the roles that use it."""

    subject: str
    users: frozenset[str]
    body: dict[str, Any] = field(default_factory=dict)


def durable(stream: str, name: str, filter_subject: str) -> dict[str, Any]:
    """The body of a request creating the durable pull consumer ``name`` of ``stream``."""
    config = {"durable_name": name, "name": name, "filter_subject": filter_subject, "ack_policy": "explicit"}
    return {"stream_name": stream, "config": config}


def ephemeral(stream: str) -> dict[str, Any]:
    """The body of a request creating an ephemeral push consumer of ``stream`` (on the inbox)."""
    config = {"deliver_subject": "INBOX.spy", "ack_policy": "none", "deliver_policy": "all"}
    return {"stream_name": stream, "config": config}


def last(bucket: str, key: str) -> dict[str, Any]:
    """The body of a request for the last value of ``key`` in ``bucket``."""
    return {"last_by_subj": f"$KV.{bucket}.{key}"}


NOBODY: frozenset[str] = frozenset()
GATEWAY = frozenset({"gateway"})
COMMAND_USERS = frozenset({"gateway", "session-worker", "health-worker", "classifier-worker"})
LEASE_USERS = frozenset({"session-worker", "health-worker", "indexer"})
LEASE_READERS = LEASE_USERS | GATEWAY  # the gateway confirms the fencing tokens of owners' replies
EVENTS_API = f"$JS.API.CONSUMER.CREATE.{EVENTS_STREAM}"
READS = {
    "every event, by an ephemeral consumer": Read(EVENTS_API, GATEWAY, ephemeral(EVENTS_STREAM)),
    "every event, by a durable of its own": Read(
        f"{EVENTS_API}.spy.toolmesh.evt.>", NOBODY, durable(EVENTS_STREAM, "spy", "toolmesh.evt.>")
    ),
    "every event, by the classifier's durable": Read(
        f"{EVENTS_API}.classifier.toolmesh.evt.>", NOBODY, durable(EVENTS_STREAM, "classifier", "toolmesh.evt.>")
    ),
    "the events, from the projector's durable": Read(
        f"$JS.API.CONSUMER.MSG.NEXT.{EVENTS_STREAM}.projector", frozenset({"projector"}), {"batch": 1, "no_wait": True}
    ),
    "an event, by message get": Read(f"$JS.API.STREAM.MSG.GET.{EVENTS_STREAM}", NOBODY, {"seq": 1}),
    "an event, by direct get": Read(f"$JS.API.DIRECT.GET.{EVENTS_STREAM}", NOBODY, {"seq": 1}),
    "the names of the streams": Read("$JS.API.STREAM.NAMES", NOBODY),
    "the commands stream": Read(f"$JS.API.STREAM.INFO.{COMMANDS_STREAM}", COMMAND_USERS),
    "the connect commands": Read(
        f"$JS.API.CONSUMER.CREATE.{COMMANDS_STREAM}.session-workers.{ConnectServer.subject}",
        frozenset({"session-worker"}),
        durable(COMMANDS_STREAM, "session-workers", ConnectServer.subject),
    ),
    "a lease": Read("$JS.API.STREAM.MSG.GET.KV_toolmesh_leases", LEASE_READERS, last("toolmesh_leases", "s")),
    "a server name": Read("$JS.API.STREAM.MSG.GET.KV_toolmesh_names", GATEWAY, last("toolmesh_names", "n")),
    "the idempotency records": Read(
        "$JS.API.CONSUMER.CREATE.KV_toolmesh_idempotency", GATEWAY, ephemeral("KV_toolmesh_idempotency")
    ),
    "an MCP session": Read("$JS.API.DIRECT.GET.KV_toolmesh_mcp_sessions.$KV.toolmesh_mcp_sessions.s", GATEWAY),
    "an MCP session, by message get": Read(
        "$JS.API.STREAM.MSG.GET.KV_toolmesh_mcp_sessions", GATEWAY, last("toolmesh_mcp_sessions", "s")
    ),
}
"""Requests that read a stream or a bucket; every role but their users is refused each."""


async def start_as_every_role(address: str) -> None:
    """What each role does at start (its streams, its buckets, its durables), each as its own user,
    and the bucket reads each role then does (the gateway's direct gets and watches, the leases)."""
    async with connection_as(address, "gateway", inbox_prefix="_INBOX_gateway") as gateway:
        js = gateway.nc.jetstream(timeout=5)
        await ensure_streams(js, STREAMS["gateway"])
        await js.publish(KEPT_EVENT_SUBJECT, b'{"secret": "every namespace"}')
        assert await reserve_name(await names_bucket(js), "n", "server-1", lambda _: always_false())
        sessions = await mcp_sessions_bucket(js, 60)
        await sessions.put("s", b"record")
        assert (await sessions.get("s")).value == b"record"  # a direct get
        kept = await idempotency_bucket(js, 60)
        watcher = await kept.watch("k")  # an ordered consumer on the bucket
        await kept.put("k", b"result")
        assert [entry.value async for entry in watched(watcher)] == [b"result"]
    for role, key in (("session-worker", "s"), ("health-worker", "health-scheduler"), ("indexer", "indexer")):
        async with connection_as(address, role, inbox_prefix=f"_INBOX_{role}") as conn:
            js = conn.nc.jetstream(timeout=5)
            await ensure_streams(js, STREAMS[role])
            leases = LeaseTable(await leases_bucket(js, 30), role)
            assert await leases.claim(key) and await leases.holder_of(key) == role
    async with connection_as(address, "projector", inbox_prefix="_INBOX_projector") as projector:
        js = projector.nc.jetstream(timeout=5)
        await ensure_streams(js, STREAMS["projector"])
        await js.pull_subscribe(EVENTS_SUBJECTS, durable=DURABLE, stream=EVENTS_STREAM, config=consumer_config())


async def watched(watcher: KeyValue.KeyWatcher) -> AsyncIterator[KeyValue.Entry]:
    """The entries of ``watcher`` up to its first value (past the end-of-history marker)."""
    while True:
        entry = await watcher.updates(timeout=5)
        if entry is not None:
            yield entry
            return


async def answered(nc: NATS, subject: str, body: bytes) -> bool:
    """Whether JetStream answers the request (with anything, even an error or a message of the
    stream: it got through)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=1)
    await nc.publish(subject, body, reply=inbox)
    try:
        await sub.next_msg(timeout=5)
    except nats.errors.TimeoutError:
        return False
    return True


async def test_each_role_reads_only_the_streams_and_buckets_it_uses(tmp_path: Path) -> None:
    async with deploy_nats(tmp_path) as deploy:
        await start_as_every_role(deploy.address)
        for role in ROLES:
            inbox = f"_INBOX_{role}"
            async with connection_as(deploy.address, role, inbox_prefix=inbox) as conn:
                for what, read in READS.items():
                    body = json.dumps(read.body).replace("INBOX.", f"{inbox}.").encode()
                    if role in read.users:  # the control: the same request gets through for its users
                        assert await answered(conn.nc, read.subject, body), f"{role}: {what}"
                        continue
                    await conn.nc.publish(read.subject, body, reply=f"{inbox}.refused")
                    refusal = f'Publish to "{read.subject}"'
                    await eventually(lambda r=refusal: conn.refused(r), timeout=10, what=f"{role} refused {what}")


async def test_the_gateway_refuses_a_spent_relayed_request_state_with_its_own_user(tmp_path: Path) -> None:
    """A relayed ``requestState`` presented twice: the second is the one ``-32602``, promptly, with the
    gateway's deploy user (nats-py's ``create`` reads the key back when it exists already)."""
    async with deploy_nats(tmp_path) as deploy:
        async with connection_as(deploy.address, "gateway", inbox_prefix="_INBOX_gateway") as gateway:
            js = gateway.nc.jetstream(timeout=5)
            states = RelayedStates(AESGCMRequestStateCodec([bytes(32)]), 60, await spent_states_bucket(js, 60))
            sealed = states.seal("upstream-state", "server-1", "starter", "request")
            assert await states.redeem(sealed, "server-1", "starter", "request") == "upstream-state"
            with anyio.fail_after(3), pytest.raises(MCPError) as refused:
                await states.redeem(sealed, "server-1", "starter", "request")
            assert refused.value.error.code == mcp_types.INVALID_PARAMS
            assert deploy.violations() == []
