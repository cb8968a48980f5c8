"""JetStream replicas on a real nats-server of its own (not clustered): a replica count JetStream cannot keep
is refused naming the stream, a stream made with another count is used and reported, and an append that no
stream answers (as while a stream elects a leader in a cluster) is repeated until one does."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from tests.harness import eventually
from toolmesh.contracts.commands import COMMANDS_STREAM
from toolmesh.contracts.events import EVENTS_STREAM, ServerRemoved
from toolmesh.errors import BackendUnavailable, StreamMisconfigured
from toolmesh.platform.bus.connection import connect_nats
from toolmesh.platform.bus.publishing import publish_event
from toolmesh.platform.bus.topology import ensure_streams, leases_bucket
from toolmesh_cli.embedded import EmbeddedNats

pytestmark = pytest.mark.integration


@contextlib.asynccontextmanager
async def own_nats(directory: Path) -> AsyncIterator[NATS]:
    """A connection to a nats-server started for this test alone (no stream exists yet)."""
    async with EmbeddedNats(directory) as server:
        nc = await connect_nats(server.url, "test")
        try:
            yield nc
        finally:
            await nc.close()


async def test_a_replica_count_jetstream_cannot_keep_is_refused_naming_the_stream(tmp_path: Path) -> None:
    async with own_nats(tmp_path) as nc:
        js = nc.jetstream(timeout=5)
        with pytest.raises(StreamMisconfigured, match=r"stream TOOLMESH_EVENTS with 3 replica\(s\)") as refused:
            await ensure_streams(js, [EVENTS_STREAM], replicas=3)
        assert refused.value.context["replicas"] == 3
        with pytest.raises(StreamMisconfigured, match=r"stream KV_toolmesh_leases with 3 replica\(s\)"):
            await leases_bucket(js, 10.0, replicas=3)


async def test_a_stream_made_with_another_replica_count_is_used_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with own_nats(tmp_path) as nc:
        js = nc.jetstream(timeout=5)
        await ensure_streams(js, [COMMANDS_STREAM], replicas=1)
        await leases_bucket(js, 10.0, replicas=1)
        with caplog.at_level(logging.WARNING, logger="toolmesh.bus"):
            await ensure_streams(js, [COMMANDS_STREAM], replicas=3)
            kv = await leases_bucket(js, 10.0, replicas=3)
        reported = {(r.stream, r.replicas, r.wanted) for r in caplog.records if hasattr(r, "wanted")}  # type: ignore[attr-defined]
        assert reported == {(COMMANDS_STREAM, 1, 3), ("KV_toolmesh_leases", 1, 3)}
        assert await kv.create("server-1", b"worker") == 1  # the bucket as it is, in use


async def test_an_append_no_stream_answers_is_repeated_until_one_does(tmp_path: Path) -> None:
    async with own_nats(tmp_path) as nc:
        js = nc.jetstream(timeout=5)
        event = ServerRemoved(server_id="00000000-0000-0000-0000-000000000001", name="gone")
        with pytest.raises(BackendUnavailable, match="no JetStream stream took"):
            await publish_event(js, event, timeout=0.5)  # no stream at all: refused once the time is up
        sent = nc.stats["out_msgs"]
        publishing = asyncio.create_task(publish_event(js, event, timeout=10))
        await eventually(lambda: nc.stats["out_msgs"] >= sent + 2, what="a second append: the first found no stream")
        assert not publishing.done()
        await ensure_streams(js, [EVENTS_STREAM])
        assert await publishing == 1
        assert await publish_event(js, event) == 1  # the same event again: deduplicated, not a second copy
        assert (await js.stream_info(EVENTS_STREAM)).state.messages == 1
