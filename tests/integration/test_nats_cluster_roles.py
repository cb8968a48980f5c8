"""deploy/nats/cluster.conf on three real nats-servers with deploy/nats/nats.conf's users: each role, as its
own user, knowing the three seed URLs and with ``TOOLMESH_NATS_REPLICAS=3``, starts on the cluster and
makes the streams and buckets it uses with three replicas, each with a leader; the users' permissions
need nothing more in a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import running_system
from tests.integration.nats_deploy import connection_as, role_settings
from tests.nats_cluster import nats_cluster
from toolmesh.contracts.commands import COMMANDS_STREAM
from toolmesh.contracts.events import EVENTS_STREAM
from toolmesh.platform.bus.topology import (
    IDEMPOTENCY_BUCKET,
    LEASES_BUCKET,
    MCP_SESSIONS_BUCKET,
    NAMES_BUCKET,
    OAUTH_FLOWS_BUCKET,
    SPENT_STATES_BUCKET,
    TASKS_BUCKET,
    bucket_subjects,
)
from toolmesh_cli.roles import ROLES

pytestmark = pytest.mark.integration
GATEWAY_BUCKETS = (NAMES_BUCKET, IDEMPOTENCY_BUCKET, MCP_SESSIONS_BUCKET, OAUTH_FLOWS_BUCKET)
GATEWAY_BUCKETS += (SPENT_STATES_BUCKET, TASKS_BUCKET)


async def test_every_role_makes_its_streams_and_buckets_with_3_replicas_on_the_cluster(
    tmp_path: Path, database_url: str
) -> None:
    async with nats_cluster(tmp_path, deploy_users=True) as cluster:
        for role in ROLES:
            async with running_system(
                cluster.seed_urls, database_url, roles=[role], nats_replicas=3, **role_settings(role)
            ) as system:
                assert system.backends.nc.is_connected, role
        first = next(iter(cluster.nodes.values()))
        async with connection_as(cluster.url(first), "gateway", inbox_prefix="_INBOX_gateway") as gateway:
            js = gateway.nc.jetstream(timeout=5)
            streams = [EVENTS_STREAM, COMMANDS_STREAM, *(bucket_subjects(b)[0] for b in GATEWAY_BUCKETS)]
            for stream in streams:
                info = await js.stream_info(stream)
                assert info.config.num_replicas == 3, stream
                assert info.cluster is not None and info.cluster.leader in cluster.nodes, (stream, info.cluster)
            sessions = await js.stream_info(bucket_subjects(MCP_SESSIONS_BUCKET)[0])
            assert not sessions.config.allow_direct  # a follower's copy may lag: read through the leader
        async with connection_as(cluster.url(first), "session-worker", inbox_prefix="_INBOX_session-worker") as worker:
            leases = await worker.nc.jetstream(timeout=5).stream_info(bucket_subjects(LEASES_BUCKET)[0])
            assert leases.config.num_replicas == 3
        assert gateway.errors == [] and worker.errors == []
