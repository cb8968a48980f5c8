"""Idempotency replays never store a token.

Attack (issue 23, "Medium"): a new API key's token was kept in plain text in the idempotency
store for the whole window (24 h), readable by whoever reads the JetStream KV bucket. Now the
store keeps the answer without it: a replay answers with the key's id, ``token`` null and a note.
Both edges (REST and the NATS API) are checked, with the store read directly.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import nats
import pytest
from nats.js.errors import KeyNotFoundError, NoKeysError
from nats.js.kv import KeyValue

from tests.harness import ADMIN_TOKEN, System, eventually, running_system
from toolmesh.contracts.api import REPLAYED_HEADER
from toolmesh.contracts.keys import KEY_TOKEN_PREFIX
from toolmesh.platform.bus.topology import IDEMPOTENCY_BUCKET

pytestmark = pytest.mark.integration
KEYS = "/api/v1/auth/keys"


@pytest.fixture
async def system(nats_url: str, database_url: str) -> AsyncIterator[System]:
    async with running_system(nats_url, database_url, roles=["gateway", "projector"]) as system:
        yield system


async def _stored_values(system: System, holding: bytes = b"") -> bytes:
    """The records of the idempotency bucket that hold ``holding`` (every record by default), as the
    bytes NATS holds; the bucket is shared with the session's other tests."""
    kv: KeyValue = await system.backends.js.key_value(IDEMPOTENCY_BUCKET)

    async def listed() -> list[str] | None:
        try:  # the bucket holds the test's own record, so "no keys" is the client's listing race
            return list(await kv.keys())
        except NoKeysError:
            return None

    values = []
    for key in await eventually(listed, timeout=10, what="the idempotency bucket's keys"):
        try:
            entry = await kv.get(key)
        except KeyNotFoundError:  # another test's record, expired since the listing
            continue
        if holding in (entry.value or b""):
            values.append(entry.value or b"")
    return b"\n".join(values)


async def test_a_replayed_rest_key_creation_neither_stores_nor_returns_the_token(system: System) -> None:
    headers = {"Idempotency-Key": str(uuid.uuid4())}
    body = {"name": f"ci-{uuid.uuid4().hex[:8]}", "role": "agent", "namespace": "team-a"}
    first = await system.api.post(KEYS, json=body, headers=headers)
    assert first.status_code == 201, first.text
    token = first.json()["token"]
    assert token.startswith(KEY_TOKEN_PREFIX)

    assert token.encode() not in await _stored_values(system)
    own = await _stored_values(system, first.json()["id"].encode())
    assert own and b"tm_" not in own  # the record is there, without the token or any part of one

    replay = await system.api.post(KEYS, json=body, headers=headers)
    assert replay.status_code == 201 and replay.headers.get(REPLAYED_HEADER) == "true"
    replayed = replay.json()
    assert replayed["id"] == first.json()["id"] and replayed["token"] is None
    assert "shown once" in replayed["note"]
    assert token not in replay.text

    me = await system.api.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token}"})
    assert me.status_code == 200 and me.json()["namespace"] == "team-a"  # the first answer's token works


async def test_a_replayed_nats_key_creation_neither_stores_nor_returns_the_token(system: System) -> None:
    nc = await nats.connect(system.settings.nats_url or "", connect_timeout=10)
    try:
        subject = "toolmesh.api.v1.keys.create"
        headers = {"Authorization": f"Bearer {ADMIN_TOKEN}", "Idempotency-Key": str(uuid.uuid4())}
        payload = json.dumps({"name": f"svc-{uuid.uuid4().hex[:8]}", "role": "user", "namespace": "team-b"}).encode()
        first = json.loads((await nc.request(subject, payload, timeout=30, headers=headers)).data)
        assert first["ok"] is True, first
        token = first["result"]["token"]
        assert token.startswith(KEY_TOKEN_PREFIX)
        assert token.encode() not in await _stored_values(system)

        replay = await nc.request(subject, payload, timeout=30, headers=headers)
        replayed = json.loads(replay.data)
        assert (replay.headers or {}).get(REPLAYED_HEADER) == "true"
        assert replayed["result"]["id"] == first["result"]["id"] and replayed["result"]["token"] is None
        assert token.encode() not in replay.data
    finally:
        await nc.drain()
