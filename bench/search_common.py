"""Shared by the search benchmarks: feed tools through the real index projection into an embedded index."""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from toolmesh.contracts.events import DiscoveredTool, ServerRegistered, ServerStatusChanged, ToolsDiscovered
from toolmesh.embed.model import Embedder
from toolmesh.index.base import ToolIndex
from toolmesh.index.projection import IndexProjection
from toolmesh.lifecycle import ServerStatus
from toolmesh.skills.taxonomy import load_taxonomy

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "livemcpbench"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def server_events(servers: dict[str, list[DiscoveredTool]], seq: int = 0) -> Iterable[tuple[int, Any]]:
    """Registration, CONNECTED and a tool snapshot per server, numbered like stream sequences."""
    for name, tools in servers.items():
        server_id = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        for event in (
            ServerRegistered(
                server_id=server_id, name=name, transport_type="STDIO", sealed_config="", masked_config={}
            ),
            ServerStatusChanged(server_id=server_id, status=ServerStatus.CONNECTED, history="CONNECTED"),
            ToolsDiscovered(server_id=server_id, server_name=name, tools=tools),
        ):
            seq += 1
            yield seq, event


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
    index: ToolIndex, embedder: Embedder | None, servers: dict[str, list[DiscoveredTool]]
) -> IndexProjection:
    projection = IndexProjection(index, embedder, load_taxonomy())
    await projection.start()
    for seq, event in server_events(servers):
        await projection.apply(event, seq)
    return projection
