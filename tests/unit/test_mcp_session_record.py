"""The record of a shared ``/mcp`` session: who may use it, and that it survives the bus as JSON."""

from __future__ import annotations

import pytest

from toolmesh.contracts.mcp_sessions import McpSessionRecord

RECORD = McpSessionRecord(
    path="/mcp",
    key_id="key-a",
    namespace="team-a",
    protocol_version="2025-11-25",
    client_params={"protocolVersion": "2025-11-25", "capabilities": {"sampling": {}}, "clientInfo": {"name": "c"}},
    touched_at=1.0,
)


def test_a_session_belongs_to_the_key_namespace_and_path_that_opened_it() -> None:
    assert RECORD.belongs_to("/mcp", "key-a", "team-a")


@pytest.mark.parametrize(
    ("path", "key_id", "namespace"),
    [
        ("/mcp", "key-b", "team-a"),  # another key, even of the same namespace
        ("/mcp", "key-a", "team-b"),  # the owner naming another namespace
        ("/mcp/alpha", "key-a", "team-a"),  # another endpoint
        ("/mcp", "key-a", None),
    ],
)
def test_a_session_is_refused_to_any_other_request(path: str, key_id: str, namespace: str | None) -> None:
    assert not RECORD.belongs_to(path, key_id, namespace)


def test_the_record_round_trips_through_json() -> None:
    assert McpSessionRecord.model_validate_json(RECORD.model_dump_json()) == RECORD
