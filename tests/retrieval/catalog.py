"""A tool catalog through the product's indexing path: tools fed to the index projection as events,
classified by the product's classifier (used by the search benchmarks and the quality gate)."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolmesh.contracts.events import (
    DiscoveredTool,
    ServerRegistered,
    ServerStatusChanged,
    ToolsClassified,
    ToolsDiscovered,
)
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import Embedder
from toolmesh.index.base import ToolIndex
from toolmesh.lifecycle import ServerStatus
from toolmesh.skills.taxonomy import load_taxonomy
from toolmesh_classifier.classifiers import EmbeddingClassifier
from toolmesh_classifier.worker import batches
from toolmesh_projector.index_projection import IndexProjection


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """One JSON object per non-empty line."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def server_id(name: str) -> str:
    """A stable server id for a server name."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def one_server(name: str, tools: list[DiscoveredTool]) -> list[Any]:
    """Registration, CONNECTED and a tool snapshot of one server."""
    sid = server_id(name)
    return [
        ServerRegistered(server_id=sid, name=name, transport_type="STDIO", sealed_config="", masked_config={}),
        ServerStatusChanged(server_id=sid, status=ServerStatus.CONNECTED, history="CONNECTED"),
        ToolsDiscovered(server_id=sid, server_name=name, tools=tools),
    ]


def server_events(servers: dict[str, list[DiscoveredTool]], seq: int = 0) -> Iterable[tuple[int, Any]]:
    """Registration, CONNECTED and a tool snapshot per server, numbered like stream sequences."""
    for name, tools in servers.items():
        for event in one_server(name, tools):
            seq += 1
            yield seq, event


async def classifications(
    classifier: EmbeddingClassifier, name: str, tools: list[DiscoveredTool]
) -> list[ToolsClassified]:
    """What the classifier-worker publishes for one server's snapshot (batches of 10)."""
    return [
        ToolsClassified(
            server_id=server_id(name),
            server_name=name,
            classifier=classifier.name,
            tools=await classifier.classify(name, batch),
        )
        for batch in batches(tools)
    ]


def servers_of(tools_jsonl: Path) -> dict[str, list[DiscoveredTool]]:
    """The tools of a ``tools.jsonl`` (LiveMCPBench's form: server, name, description, input_schema) by server."""
    servers: dict[str, list[DiscoveredTool]] = defaultdict(list)
    for tool in read_jsonl(tools_jsonl):
        servers[tool["server"]].append(
            DiscoveredTool(
                original_name=tool["name"],
                description=tool.get("description"),
                input_schema=tool.get("input_schema") or {},
            )
        )
    return dict(servers)


async def load_index(
    index: ToolIndex, embedder: Embedder | None, servers: dict[str, list[DiscoveredTool]], lanes: EmbeddingLanes
) -> IndexProjection:
    """An index projection over ``index`` that applied every server's events, with every vector embedded."""
    projection = IndexProjection(index, embedder, load_taxonomy(), lanes=lanes)
    await projection.start()
    for seq, event in server_events(servers):
        await projection.apply(event, seq)
    await projection.embed_all()
    await projection.flush()
    return projection


async def classify_index(
    projection: IndexProjection, embedder: Embedder, servers: dict[str, list[DiscoveredTool]], lanes: EmbeddingLanes
) -> None:
    """Classify every server's tools with the product's classifier and apply the events."""
    seq = projection.state.last_seq
    classifier = EmbeddingClassifier(embedder, load_taxonomy(), lanes)
    for name, tools in servers.items():
        for event in await classifications(classifier, name, tools):
            seq += 1
            await projection.apply(event, seq)
    await projection.flush()
