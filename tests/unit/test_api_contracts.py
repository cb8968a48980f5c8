"""The public NATS API and events as a contract: the table of operations, the events' envelope,
and the checked-in AsyncAPI document."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from toolmesh.contracts.api import API_PREFIX, OPERATIONS, OPERATIONS_BY_SUBJECT, api_subject
from toolmesh.contracts.event_types import EVENT_TYPES
from toolmesh_gateway.nats_api.document import asyncapi_document
from toolmesh_gateway.nats_api.unknown import unserved

ROOT = Path(__file__).parents[2]
ENVELOPE = {"event_id", "occurred_at", "schema_version", "namespace", "actor", "server_id"}


def test_checked_in_asyncapi_document_matches_the_code() -> None:
    checked_in = json.loads((ROOT / "docs" / "asyncapi.json").read_text())
    stale = "docs/asyncapi.json is stale: run `toolmesh asyncapi -o docs/asyncapi.json`"
    assert checked_in == asyncapi_document(), stale


def test_document_names_every_operation_with_its_reply_and_every_event() -> None:
    document = asyncapi_document()
    channels = document["channels"]
    for operation in OPERATIONS:
        assert channels[operation.name]["address"] == operation.subject
        assert document["operations"][operation.name]["reply"]["channel"] == {
            "$ref": f"#/channels/{operation.name}.reply"
        }
        headers = document["components"]["messages"][f"{operation.name}:SubscribeMessage"]["headers"]
        assert ("Idempotency-Key" in headers["properties"]) is operation.write
    events = {c["address"] for c in channels.values() if (c.get("address") or "").startswith("toolmesh.evt.")}
    assert events == set(EVENT_TYPES)


@pytest.mark.parametrize("event", sorted(EVENT_TYPES.values(), key=lambda e: e.subject), ids=lambda e: e.subject)
def test_every_event_carries_id_version_and_namespace(event: type) -> None:
    assert event.subject.startswith("toolmesh.evt.")
    assert ENVELOPE <= set(event.model_fields)
    sample = event.model_json_schema()["properties"]
    assert sample["schema_version"]["default"] == 1 and sample["namespace"]["default"] == "default"


def test_subjects_are_versioned_and_unique() -> None:
    assert len(OPERATIONS_BY_SUBJECT) == len(OPERATIONS)
    assert all(op.subject == f"{API_PREFIX}.v1.{op.name}" for op in OPERATIONS)
    for op in OPERATIONS:  # every REST path parameter comes from the request model
        assert op.path.count("{") == len(op.path_fields), op.name


def test_unserved_subjects_say_why() -> None:
    assert unserved(api_subject("servers.register")) is None
    version = unserved(api_subject("servers.register", version="v2"))
    assert version is not None and version.error_code == "UNSUPPORTED_VERSION"
    verb = unserved(api_subject("servers.rename"))
    assert verb is not None and verb.error_code == "UNKNOWN_OPERATION"


def test_the_client_imports_nothing_of_the_server_side() -> None:
    probe = (
        "import sys, toolmesh.client; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & "
        "{'asyncpg', 'fastapi', 'faststream', 'mcp', 'numpy', 'onnxruntime', 'qdrant_client', 'toolmesh_gateway'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_toolmesh_asyncapi_prints_the_checked_in_document() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "toolmesh_cli.main", "asyncapi"], capture_output=True, text=True, check=True
    ).stdout
    assert printed == (ROOT / "docs" / "asyncapi.json").read_text()
