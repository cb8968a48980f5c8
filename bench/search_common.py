"""Shared by the search benchmarks: feed tools through the real index projection into an embedded index,
and classify them with the product's classifier."""

from __future__ import annotations

import json
import os
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


def _data_dir() -> Path:
    """``TOOLMESH_BENCH_DATA``, else the first ``shared/data/livemcpbench`` above this file."""
    if os.environ.get("TOOLMESH_BENCH_DATA"):
        return Path(os.environ["TOOLMESH_BENCH_DATA"])
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "data" / "livemcpbench"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("LiveMCPBench data not found: set TOOLMESH_BENCH_DATA")


DATA = _data_dir()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def server_id(name: str) -> str:
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


def livemcp_servers() -> dict[str, list[DiscoveredTool]]:
    servers: dict[str, list[DiscoveredTool]] = defaultdict(list)
    for tool in read_jsonl(DATA / "tools.jsonl"):
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
