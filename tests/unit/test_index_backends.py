"""One contract test for both index backends: qdrant-edge (embedded) and qdrant-client (local mode).

Then the index projection on the embedded backend: snapshot, status, classification, removal,
skill vectors (BR-003/004/007/008), and idempotent replay.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import AsyncQdrantClient

from tests.harness import eventually
from toolmesh.contracts.events import (
    DiscoveredTool,
    ServerRegistered,
    ServerRemoved,
    ServerStatusChanged,
    SkillAssignment,
    ToolClassification,
    ToolsClassified,
    ToolsDiscovered,
)
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.index.base import Hit, IndexState, Point, ToolIndex, Where, skill_point_id, tool_point_id
from toolmesh.lifecycle import ServerStatus
from toolmesh.search.service import SearchService
from toolmesh.skills.taxonomy import Skill
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.vector_index.edge import EdgeIndex
from toolmesh_projector.vector_index.filters import flags
from toolmesh_projector.vector_index.qdrant import QdrantIndex

pytestmark = pytest.mark.unit
DIM = 8


@pytest.fixture(params=["edge", "qdrant-local"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ToolIndex]:
    if request.param == "edge":
        backend: ToolIndex = EdgeIndex(tmp_path / "index", DIM)
    else:
        local = QdrantIndex(AsyncQdrantClient(location=":memory:"), DIM)
        await local.ensure_collections()
        backend = local
    yield backend
    await backend.close()


def _vec(i: int) -> list[float]:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    v[(i + 1) % DIM] = 0.5
    return [float(x) for x in v]


def _point(i: int, server: str, status: str = "CONNECTED", classified: bool = False) -> Point:
    payload = {
        "kind": "tool",
        "name": f"{server}.t{i}",
        "source_server_id": server,
        "source_server_name": server,
        "server_status": status,
        "namespace": "default",
        "is_external": True,
        "is_classified": classified,
        "skill_ids": ["web_search"] if classified else [],
        **flags(is_external=True, is_classified=classified, embedded=True),
    }
    return Point(str(uuid.uuid5(uuid.NAMESPACE_URL, f"{server}/{i}")), _vec(i), payload)


async def test_index_contract_query_filter_payload_delete_state(index: ToolIndex) -> None:
    points = [_point(0, "a"), _point(1, "a", classified=True), _point(2, "b", status="DISCONNECTED")]
    await index.upsert(points)
    hits = await index.query(_vec(0), Where(kind="tool"), 10)
    assert hits[0].id == points[0].id and len(hits) == 3
    bare = await index.query(_vec(0), Where(kind="tool"), 10, with_payload=False)
    assert [(h.id, h.payload) for h in bare] == [(h.id, {}) for h in hits]
    assert [h.score for h in bare] == pytest.approx([h.score for h in hits])
    serving = Where(kind="tool", statuses=["CONNECTED", "DEGRADED"], embedded_only=True)
    assert {h.id for h in await index.query(_vec(2), serving, 10)} == {points[0].id, points[1].id}
    assert {h.id for h in await index.scroll(Where(server_names=["b"]))} == {points[2].id}
    assert {h.id for h in await index.scroll(Where(skill_ids=["web_search"]))} == {points[1].id}
    unclassified_too = Where(skill_ids=["web_search"], or_unclassified=True)
    assert len(await index.scroll(unclassified_too)) == 3
    assert await index.scroll(Where(external_only_false=True)) == []

    await index.set_payload_where(Where(server_id="b"), {"server_status": "CONNECTED"})
    assert len(await index.query(_vec(2), serving, 10)) == 3
    await index.set_payload([points[0].id], {"server_status": "DEGRADED"})
    (got,) = await index.retrieve([points[0].id], with_vectors=True)
    assert got.payload["server_status"] == "DEGRADED" and got.payload["name"] == "a.t0"
    assert got.vector is not None and np.allclose(got.vector, np.array(_vec(0)) / np.linalg.norm(_vec(0)), atol=1e-5)

    await index.delete_where(Where(server_id="a"))
    assert [h.id for h in await index.scroll(Where())] == [points[2].id]
    await index.delete([points[2].id])
    assert await index.scroll(Where()) == []

    assert await index.load_state() == IndexState()
    await index.save_state(IndexState(last_seq=7, servers={"a": {"name": "a", "status": "CONNECTED"}}))
    state = await index.load_state()
    assert (state.last_seq, state.servers["a"]["status"]) == (7, "CONNECTED")
    await index.reset()
    assert await index.load_state() == IndexState() and await index.scroll(Where()) == []


async def test_edge_index_survives_reopen(tmp_path: Path) -> None:
    first = EdgeIndex(tmp_path, DIM)
    await first.upsert([_point(0, "a")])
    await first.save_state(IndexState(last_seq=5))
    await first.close()
    second = EdgeIndex(tmp_path, DIM)
    assert len(await second.scroll(Where())) == 1 and (await second.load_state()).last_seq == 5
    await second.close()


class _FakeEmbedder:
    """Deterministic unit vectors from a hash of the text (pure logic; the real model has its own test)."""

    model_id = "fake"
    dimensions = DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = []
        for text in texts:
            rng = np.random.default_rng(abs(hash(text)) % (2**32))
            v = rng.normal(size=DIM).astype(np.float32)
            rows.append(v / np.linalg.norm(v))
        return np.array(rows, dtype=np.float32)


SKILLS = [
    Skill(id="web_search", name="Web", description="search the web"),
    Skill(id="files", name="F", description="f"),
]


async def _events(projection: IndexProjection, events: list[object], start: int = 1) -> None:
    for seq, event in enumerate(events, start=start):
        await projection.apply(event, seq)
    await projection.embed_all()
    await projection.flush()


async def test_index_projection_follows_the_server_lifecycle(tmp_path: Path) -> None:
    index = EdgeIndex(tmp_path, DIM)
    projection = IndexProjection(index, _FakeEmbedder(), SKILLS, lanes=EmbeddingLanes(), dimensions=DIM)
    await projection.start()
    sid = str(uuid.uuid4())
    tools = [DiscoveredTool(original_name="search", description="web"), DiscoveredTool(original_name="echo")]
    events: list[object] = [
        ServerRegistered(server_id=sid, name="demo", transport_type="STDIO", sealed_config="", masked_config={}),
        ServerStatusChanged(server_id=sid, status=ServerStatus.CONNECTED, history="CONNECTED"),
        ToolsDiscovered(server_id=sid, server_name="demo", tools=tools),
    ]
    await _events(projection, events)
    search_id = tool_point_id(sid, "search")
    (hit,) = await index.retrieve([search_id])
    assert hit.payload["name"] == "demo.search" and hit.payload["server_status"] == "CONNECTED"
    assert hit.payload["is_classified"] is False and hit.payload["source_server_name"] == "demo"

    classified = ToolsClassified(
        server_id=sid,
        server_name="demo",
        classifier="test",
        tools=[
            ToolClassification(
                original_name="search",
                skills=[SkillAssignment(skill_id="web_search", confidence=0.9)],
                primary_skill_id="web_search",
            )
        ],
    )
    (skill_before,) = await index.retrieve([skill_point_id("web_search")], with_vectors=True)
    await _events(projection, [classified], start=4)
    (hit,) = await index.retrieve([search_id])
    assert hit.payload["is_classified"] is True and hit.payload["primary_skill_id"] == "web_search"
    (skill_after,) = await index.retrieve([skill_point_id("web_search")], with_vectors=True)
    assert skill_after.payload["tool_count"] == 1 and skill_after.vector != skill_before.vector

    # Re-applying an old event is a no-op; a re-discovery with the same text keeps the classification.
    assert not await projection.apply(classified, 4)
    await _events(projection, [ToolsDiscovered(server_id=sid, server_name="demo", tools=tools[:1])], start=5)
    (hit,) = await index.retrieve([search_id])
    assert hit.payload["is_classified"] is True
    assert await index.retrieve([tool_point_id(sid, "echo")]) == []

    await _events(projection, [ServerStatusChanged(server_id=sid, status=ServerStatus.DISCONNECTED, history="D")], 6)
    assert (await index.retrieve([search_id]))[0].payload["server_status"] == "DISCONNECTED"
    await _events(projection, [ServerRemoved(server_id=sid, name="demo")], start=7)
    assert await index.scroll(Where(kind="tool")) == []
    (skill_empty,) = await index.retrieve([skill_point_id("web_search")], with_vectors=True)
    assert skill_empty.payload["tool_count"] == 0 and np.allclose(skill_empty.vector, skill_before.vector, atol=1e-5)
    state = await index.load_state()
    assert state.last_seq == 7 and sid not in state.servers
    await index.close()


class _CountingEdge(EdgeIndex):
    """The real embedded index, counting full scans and checkpoint writes; ``gate`` can hold upserts."""

    def __init__(self, path: Path, dimensions: int) -> None:
        super().__init__(path, dimensions)
        self.scrolls = 0
        self.saves = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.blocked = False

    async def scroll(self, where: Where, *, with_vectors: bool = False) -> list[Hit]:
        self.scrolls += 1
        return await super().scroll(where, with_vectors=with_vectors)

    async def save_state(self, state: IndexState) -> None:
        self.saves += 1
        await super().save_state(state)

    async def upsert(self, points: list[Point]) -> None:
        self.blocked = not self.gate.is_set()
        await self.gate.wait()
        self.blocked = False
        await super().upsert(points)


def _server_events(sid: str, name: str, tools: list[DiscoveredTool]) -> list[object]:
    return [
        ServerRegistered(server_id=sid, name=name, transport_type="STDIO", sealed_config="", masked_config={}),
        ServerStatusChanged(server_id=sid, status=ServerStatus.CONNECTED, history="CONNECTED"),
        ToolsDiscovered(server_id=sid, server_name=name, tools=tools),
    ]


async def test_events_never_scan_the_index_and_checkpoints_are_coalesced(tmp_path: Path) -> None:
    # Profiled before: a full scan per classified batch (skill vectors) and a checkpoint per event.
    index = _CountingEdge(tmp_path, DIM)
    projection = IndexProjection(index, _FakeEmbedder(), SKILLS, lanes=EmbeddingLanes(), dimensions=DIM)
    await projection.start()
    scans, saves = index.scrolls, index.saves
    events: list[object] = []
    for n in range(5):
        sid = str(uuid.uuid4())
        tools = [DiscoveredTool(original_name=f"search{i}", description="web") for i in range(12)]
        events += _server_events(sid, f"s{n}", tools)
        classified = [
            ToolClassification(
                original_name=f"search{i}",
                skills=[SkillAssignment(skill_id="web_search", confidence=0.9)],
                primary_skill_id="web_search",
            )
            for i in range(12)
        ]
        events.append(ToolsClassified(server_id=sid, server_name=f"s{n}", classifier="t", tools=classified))
        events.append(
            ServerRemoved(server_id=sid, name=f"s{n}")
            if n == 0
            else ServerRegistered(
                server_id=sid, name=f"s{n}", transport_type="STDIO", sealed_config="", masked_config={}
            )
        )
    for seq, event in enumerate(events, start=1):
        await projection.apply(event, seq)
    assert index.scrolls == scans and index.saves == saves
    await projection.embed_all()
    await projection.flush()
    assert index.saves == saves + 1 and (await index.load_state()).last_seq == len(events)
    (skill,) = await index.retrieve([skill_point_id("web_search")])
    assert skill.payload["tool_count"] == 48  # four servers of twelve; the removed one left
    await index.close()


async def test_search_reads_the_published_catalog_while_the_writer_is_blocked(tmp_path: Path) -> None:
    index = _CountingEdge(tmp_path, DIM)
    projection = IndexProjection(index, _FakeEmbedder(), SKILLS, lanes=EmbeddingLanes(), dimensions=DIM)
    await projection.start()
    sid = str(uuid.uuid4())
    for seq, event in enumerate(_server_events(sid, "one", [DiscoveredTool(original_name="search")]), start=1):
        await projection.apply(event, seq)
    service = SearchService(projection.table.catalog, _FakeEmbedder())
    index.gate.clear()  # the next index write hangs, holding the projection
    writer = asyncio.create_task(
        projection.apply(
            ToolsDiscovered(server_id=sid, server_name="one", tools=[DiscoveredTool(original_name="x")]), 4
        )
    )

    async def writer_blocked() -> bool:
        return index.blocked

    await eventually(writer_blocked, timeout=10, what="the writer to block on the index")
    result = await asyncio.wait_for(service.search(SearchRequest(query="search", strategy="flat")), timeout=10)
    assert [t.name for t in result.tools] == ["one.search"] and not writer.done()
    index.gate.set()
    assert await writer
    await projection.embed_all()  # "x" has no word BM25 keeps: only its vector finds it
    result = await service.search(SearchRequest(query="x", strategy="flat"))
    assert [t.name for t in result.tools] == ["one.x"]
    await index.close()
