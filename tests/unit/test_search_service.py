"""The search service over the embedded index with a stand-in model: what gets embedded, the
query-vector cache, and hits built from the catalog (the real model has its own test)."""

from __future__ import annotations

import uuid
import zlib
from pathlib import Path

import numpy as np
import pytest

from toolmesh.contracts.events import DiscoveredTool, ServerRegistered, ServerStatusChanged, ToolsDiscovered
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.index.base import Where
from toolmesh.lifecycle import ServerStatus
from toolmesh.search.service import SearchService
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.vector_index.edge import EdgeIndex

pytestmark = pytest.mark.unit
DIM = 64


class _RecordingEmbedder:
    """Bag-of-words unit vectors (one hashed bucket per word); remembers every text it was given."""

    model_id = "fake"
    dimensions = DIM

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += texts
        rows = []
        for text in texts:
            v = np.zeros(DIM, dtype=np.float32)
            for word in text.lower().replace(":", " ").replace(".", " ").split():
                v[zlib.crc32(word.encode()) % DIM] += 1.0
            rows.append(v / max(float(np.linalg.norm(v)), 1e-9))
        return np.array(rows, dtype=np.float32).reshape(len(texts), DIM)


TOOLS = [
    DiscoveredTool(
        original_name="web_search",
        description="Search the web for pages.",
        input_schema={"type": "object", "properties": {"query": {"type": "string"}}},
    ),
    DiscoveredTool(
        original_name="readFile",
        description="Read a file from disk",
        input_schema={"properties": {"path": {"description": "Path of the file. "}, "lines": {"type": "integer"}}},
    ),
]


async def _indexed(path: Path, embedder: _RecordingEmbedder, server: str = "demo") -> IndexProjection:
    index = EdgeIndex(path, DIM)
    projection = IndexProjection(index, embedder, [], lanes=EmbeddingLanes(), dimensions=DIM)
    await projection.start()
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, server))
    events = [
        ServerRegistered(server_id=sid, name=server, transport_type="STDIO", sealed_config="", masked_config={}),
        ServerStatusChanged(server_id=sid, status=ServerStatus.CONNECTED, history="CONNECTED"),
        ToolsDiscovered(server_id=sid, server_name=server, tools=TOOLS),
    ]
    for seq, event in enumerate(events, start=1):
        await projection.apply(event, seq)
    await projection.embed_all()
    await projection.flush()
    return projection


async def test_dense_text_has_name_description_and_parameter_descriptions_bm25_the_full_text(
    tmp_path: Path,
) -> None:
    embedder = _RecordingEmbedder()
    index = (await _indexed(tmp_path, embedder)).index
    assert sorted(embedder.texts) == [
        "read file: Read a file from disk. Parameters: Path of the file",
        "web search: Search the web for pages.",
    ]
    payloads = {h.payload["original_name"]: h.payload for h in await index.scroll(Where(kind="tool"))}
    assert payloads["web_search"]["text"] == "demo web search. Search the web for pages. parameters: query"
    assert payloads["web_search"]["dense_text"] == "web search: Search the web for pages."
    await index.close()


async def test_a_tool_indexed_before_dense_text_existed_is_embedded_again(tmp_path: Path) -> None:
    embedder = _RecordingEmbedder()
    index = (await _indexed(tmp_path, embedder)).index
    old = await index.scroll(Where(kind="tool"))
    await index.set_payload([h.id for h in old], {"dense_text": None})  # as an older indexer wrote it
    embedder.texts.clear()
    projection = IndexProjection(index, embedder, [], lanes=EmbeddingLanes(), dimensions=DIM)
    await projection.start()
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "demo"))
    await projection.apply(ToolsDiscovered(server_id=sid, server_name="demo", tools=TOOLS), 4)
    await projection.embed_all()
    assert len(embedder.texts) == 2
    embedder.texts.clear()
    await projection.apply(ToolsDiscovered(server_id=sid, server_name="demo", tools=TOOLS), 5)
    await projection.embed_all()
    assert embedder.texts == [] and projection.vectors_behind == 0  # unchanged tools keep their vectors
    await index.close()


async def test_repeated_queries_are_embedded_once_and_hits_come_from_the_catalog(tmp_path: Path) -> None:
    embedder = _RecordingEmbedder()
    projection = await _indexed(tmp_path, embedder)
    index, source = projection.index, projection.table.catalog
    service = SearchService(source, embedder)
    embedder.texts.clear()
    request = SearchRequest(query="search the web", strategy="flat", include_schemas=True)
    first = await service.search(request)
    second = await service.search(request)
    assert embedder.texts == ["search the web"]
    assert [t.model_dump() for t in first.tools] == [t.model_dump() for t in second.tools]
    top = first.tools[0]
    assert top.name == "demo.web_search" and top.description == "Search the web for pages."
    assert top.source_server.status == "CONNECTED" and top.input_schema is not None
    assert first.metadata.retrieval == "hybrid" and first.metadata.servers_searched == 1

    uncached = SearchService(source, embedder, query_cache_size=0)
    embedder.texts.clear()
    await uncached.search(request)
    await uncached.search(request)
    assert embedder.texts == ["search the web", "search the web"]
    await index.close()
