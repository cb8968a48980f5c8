"""Pending upstream OAuth flows against a real JetStream KV bucket: one state, taken at once by
several callbacks (a browser that retries, two replicas), is one flow for one of them and None
for the others, never an error (a 500 of ``/oauth/callback``)."""

from __future__ import annotations

import asyncio

import pytest
from nats.aio.client import Client as NATS

from toolmesh.credentials import CredentialBox, new_key
from toolmesh.platform.bus.topology import oauth_flows_bucket
from toolmesh_gateway.upstream_oauth.flows import FlowStore, PendingFlow

pytestmark = pytest.mark.integration
FLOW = PendingFlow(
    server_id="server-1",
    namespace="default",
    actor="owner",
    redirect_uri="http://127.0.0.1/oauth/callback",
    code_verifier="v",
    issuer="http://127.0.0.1",
    iss_required=False,
    token_endpoint="http://127.0.0.1/token",
    client_id="c",
    resource="http://127.0.0.1/mcp",
)
"""A pending flow, the one the bucket tests store (test_nats_deploy_buckets too)."""


async def test_a_state_taken_by_two_callbacks_at_once_is_one_flow_and_one_none(nc: NATS) -> None:
    flows = FlowStore(await oauth_flows_bucket(nc.jetstream(), 60), CredentialBox(new_key()))
    for round_ in range(10):  # both read the same revision before either deletes it
        await flows.put(f"state-{round_}", FLOW)
        taken = await asyncio.gather(flows.take(f"state-{round_}"), flows.take(f"state-{round_}"))
        assert sorted(taken, key=lambda flow: flow is None) == [FLOW, None]
