"""deploy/nats/nats.conf on a real nats-server: each role may create the streams it uses when it
starts first, so a compromised role could create one first with a configuration of its own (an
event log that also captures the tool calls' requests and replies, and forgets after a second).
A role finds such a stream at start and refuses it, naming the stream and what differs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.harness import running_system
from tests.integration.nats_deploy import connection_as, deploy_nats, role_settings
from toolmesh.contracts.commands import COMMANDS_STREAM
from toolmesh.contracts.events import EVENTS_SUBJECTS
from toolmesh.errors import StreamMisconfigured
from toolmesh.platform.bus.topology import ensure_streams, events_stream_config

pytestmark = pytest.mark.integration


async def test_a_role_refuses_an_event_log_another_role_made_with_its_own_config(
    tmp_path: Path, database_url: str
) -> None:
    async with deploy_nats(tmp_path) as deploy:
        async with connection_as(deploy.address, "session-worker", inbox_prefix="_INBOX_session-worker") as worker:
            js = worker.nc.jetstream(timeout=5)
            await ensure_streams(js, [COMMANDS_STREAM])  # as toolmesh makes it: the gateway takes it below
            subjects = [EVENTS_SUBJECTS, "toolmesh.rpc.>"]  # every tool call's request and reply kept too
            hijacked = replace(events_stream_config(), subjects=subjects, max_age=1.0, duplicate_window=1.0)
            await js.add_stream(hijacked)
        expected = r"stream TOOLMESH_EVENTS .*subjects is .*toolmesh\.rpc\.>.*max_age is 1\.0, toolmesh expects 0"
        for role in ("gateway", "projector"):
            with pytest.raises(StreamMisconfigured, match=expected):
                async with running_system(deploy.address, database_url, roles=[role], **role_settings(role)):
                    pytest.fail(f"the {role} started on a hijacked event log")
        async with connection_as(deploy.address, "gateway", inbox_prefix="_INBOX_gateway") as gateway:
            await ensure_streams(gateway.nc.jetstream(timeout=5), [COMMANDS_STREAM])  # a stream as made: used
