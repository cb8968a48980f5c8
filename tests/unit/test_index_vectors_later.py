"""A discovered tool is searchable by its words at once and by its vector once the bulk lane embedded it;
the lane runs one request at a time, the index's first; rows a crash left without a vector are
embedded after a restart."""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.harness import eventually
from toolmesh.contracts.events import (
    DiscoveredTool,
    ServerRegistered,
    ServerStatusChanged,
    SkillAssignment,
    ToolClassification,
    ToolsClassified,
    ToolsDiscovered,
)
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLane, EmbeddingLanes
from toolmesh.index.base import Where, tool_point_id
from toolmesh.lifecycle import ServerStatus
from toolmesh.search.service import SearchService
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.vector_index.edge import EdgeIndex

pytestmark = pytest.mark.unit
DIM = 16
SID = str(uuid.uuid5(uuid.NAMESPACE_URL, "weather"))


class _GatedEmbedder:
    """Unit vectors from a hash of the text; embedding waits while ``gate`` is clear; counts overlaps."""

    model_id = "gated"
    dimensions = DIM

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.gate.set()
        self.texts: list[str] = []
        self.running = 0
        self.most_at_once = 0
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.running += 1
            self.threads.add(threading.get_ident())
            self.most_at_once = max(self.most_at_once, self.running)
        self.gate.wait(timeout=30)
        with self._lock:
            self.running -= 1
            self.texts += texts
        rows = [np.random.default_rng(sum(t.encode())).normal(size=DIM) for t in texts]
        return np.array([r / np.linalg.norm(r) for r in rows], dtype=np.float32).reshape(len(texts), DIM)


def _snapshot(description: str) -> ToolsDiscovered:
    tool = DiscoveredTool(original_name="forecast", description=description)
    return ToolsDiscovered(server_id=SID, server_name="weather", tools=[tool])


async def _registered(path: Path, embedder: _GatedEmbedder) -> IndexProjection:
    projection = IndexProjection(EdgeIndex(path, DIM), embedder, [], lanes=EmbeddingLanes(), dimensions=DIM)
    await projection.start()
    registered = ServerRegistered(
        server_id=SID, name="weather", transport_type="STDIO", sealed_config="", masked_config={}
    )
    await projection.apply(registered, 1)
    await projection.apply(ServerStatusChanged(server_id=SID, status=ServerStatus.CONNECTED, history="CONNECTED"), 2)
    return projection


async def test_a_new_tool_is_found_by_its_words_before_its_vector_exists(tmp_path: Path) -> None:
    embedder = _GatedEmbedder()
    projection = await _registered(tmp_path, embedder)
    embedder.gate.clear()  # the lane is busy: no vector can be made yet
    await projection.apply(_snapshot("Weather forecast for a city."), 3)
    service = SearchService(projection.table.catalog, None)
    found = await service.search(SearchRequest(query="forecast", strategy="flat"))
    assert [t.name for t in found.tools] == ["weather.forecast"]
    with_model = SearchService(projection.table.catalog, embedder)
    assert (await with_model.health())["tools_without_vector"] == 1 and projection.vectors_behind == 1

    embedder.gate.set()
    assert await projection.embed_backlog() == 1
    assert (await with_model.health())["tools_without_vector"] == 0 and projection.vectors_behind == 0
    (hit,) = await projection.index.retrieve([tool_point_id(SID, "forecast")], with_vectors=True)
    assert hit.payload["embedded"] is True and hit.payload["embedded_flag"] == "true"
    assert hit.vector is not None and hit.vector != projection.placeholder
    await projection.index.close()


async def test_a_snapshot_arriving_while_the_old_text_is_embedded_gets_the_new_texts_vector(tmp_path: Path) -> None:
    embedder = _GatedEmbedder()
    projection = await _registered(tmp_path, embedder)
    await projection.apply(_snapshot("Old words."), 3)
    embedder.gate.clear()
    step = asyncio.create_task(projection.embed_backlog())

    async def embedding() -> bool:
        return embedder.running == 1

    await eventually(embedding, timeout=10, what="the lane to embed the old text")
    await projection.apply(_snapshot("New words."), 4)
    embedder.gate.set()
    assert await step == 0  # the old text's vector is not the tool's any more
    assert projection.vectors_behind == 1
    await projection.embed_all()
    row = projection.table.get(tool_point_id(SID, "forecast"))
    assert row is not None and row.vector is not None
    assert embedder.texts == ["forecast: Old words.", "forecast: New words."]
    await projection.index.close()


async def test_tools_a_crash_left_without_vectors_are_embedded_after_a_restart(tmp_path: Path) -> None:
    embedder = _GatedEmbedder()
    projection = await _registered(tmp_path, embedder)
    await projection.apply(_snapshot("Weather forecast for a city."), 3)
    await projection.flush()  # checkpoint written; the process dies before the lane got to the tool
    await projection.index.close()

    restarted = IndexProjection(EdgeIndex(tmp_path, DIM), embedder, [], lanes=EmbeddingLanes(), dimensions=DIM)
    await restarted.start()
    assert restarted.vectors_behind == 1
    stop = asyncio.Event()
    worker = asyncio.create_task(restarted.run_embedder(stop))

    async def caught_up() -> bool:
        return restarted.vectors_behind == 0

    await eventually(caught_up, timeout=10, what="the restarted indexer to embed the waiting tool")
    stop.set()
    await worker
    (hit,) = await restarted.index.scroll(Where(kind="tool"), with_vectors=True)
    assert hit.payload["embedded"] is True and hit.vector != restarted.placeholder
    await restarted.index.close()


async def test_a_lane_of_one_thread_runs_one_bulk_request_at_a_time() -> None:
    embedder = _GatedEmbedder()
    lane = EmbeddingLane(embedder, threads=1)
    embedder.gate.clear()  # the first request holds the lane: the others queue behind it
    requests = asyncio.gather(*(lane.embed([f"text {n}", f"more {n}"]) for n in range(6)))

    async def first_running() -> bool:
        return embedder.running >= 1

    await eventually(first_running, timeout=10, what="the first request to start")
    embedder.gate.set()
    vectors = await requests
    assert [v.shape for v in vectors] == [(2, DIM)] * 6 and len(embedder.texts) == 12
    assert embedder.most_at_once == 1 and len(embedder.threads) == 1


async def test_the_indexs_requests_go_before_the_classifiers_waiting_ones() -> None:
    embedder = _GatedEmbedder()
    lane = EmbeddingLane(embedder, threads=1)
    embedder.gate.clear()
    running = asyncio.ensure_future(lane.embed(["classifier 1"]))

    async def first_running() -> bool:
        return embedder.running >= 1

    await eventually(first_running, timeout=10, what="the first request to start")
    later = asyncio.ensure_future(lane.embed(["classifier 2"]))
    sooner = asyncio.ensure_future(lane.embed(["index"], first=True))
    # One turn: the tasks start in the order created and each queues its request before its first
    # wait, so the classifier's request arrived first and both wait while the gate is closed.
    await asyncio.sleep(0)
    assert not (later.done() or sooner.done())
    embedder.gate.set()
    await asyncio.gather(running, later, sooner)
    assert embedder.texts == ["classifier 1", "index", "classifier 2"]


def test_a_process_has_one_lane_per_embedder_and_another_process_its_own() -> None:
    embedder, other = _GatedEmbedder(), _GatedEmbedder()
    lanes = EmbeddingLanes()
    assert lanes.for_embedder(embedder) is lanes.for_embedder(embedder)
    assert lanes.for_embedder(other) is not lanes.for_embedder(embedder)
    assert EmbeddingLanes().for_embedder(embedder) is not lanes.for_embedder(embedder)


async def test_a_lanes_threads_end_with_the_lane() -> None:
    def lane_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name == "toolmesh-embed-bulk"}

    before = lane_threads()
    lane = EmbeddingLane(_GatedEmbedder(), threads=2)
    mine = lane_threads() - before
    assert len(mine) == 2
    del lane
    gc.collect()

    async def ended() -> bool:
        return not any(t.is_alive() for t in mine)

    await eventually(ended, timeout=10, what="the lane's threads to end")


async def test_search_health_counts_live_tools_only(tmp_path: Path) -> None:
    embedder = _GatedEmbedder()
    projection = await _registered(tmp_path, embedder)
    await projection.apply(_snapshot("Old words."), 3)
    await projection.apply(_snapshot("New words."), 4)  # the old row's slot is dead now
    await projection.apply(ToolsDiscovered(server_id=SID, server_name="weather", tools=[]), 5)
    health = await SearchService(projection.table.catalog, embedder).health()
    assert health["tools"] == 0 and health["tools_without_vector"] == 0
    await projection.index.close()


class _PoisonedEmbedder(_GatedEmbedder):
    """Fails on any request holding a text with "Poison" in it."""

    def embed(self, texts: list[str]) -> np.ndarray:
        if any("Poison" in text for text in texts):
            raise ValueError("the model cannot embed this text")
        return super().embed(texts)


async def test_a_text_the_model_fails_on_holds_back_no_other_tools_vector(tmp_path: Path) -> None:
    projection = await _registered(tmp_path, _PoisonedEmbedder())
    tools = [DiscoveredTool(original_name="bad", description="Poison."), DiscoveredTool(original_name="good")]
    await projection.apply(ToolsDiscovered(server_id=SID, server_name="weather", tools=tools), 3)
    stop = asyncio.Event()
    worker = asyncio.create_task(projection.run_embedder(stop))

    async def good_embedded() -> bool:
        row = projection.table.get(tool_point_id(SID, "good"))
        return row is not None and row.vector is not None

    await eventually(good_embedded, timeout=10, what="the good tool's vector")
    stop.set()
    await worker
    assert projection.vectors_behind == 1  # the bad one waits, still searchable by its words
    await projection.index.close()


async def test_a_row_stored_with_an_older_versions_text_is_embedded_anew_at_start_keeping_its_skills(
    tmp_path: Path,
) -> None:
    embedder = _GatedEmbedder()
    projection = await _registered(tmp_path, embedder)
    schema = {"properties": {"city": {"description": "City name."}}}
    tool = DiscoveredTool(original_name="forecast", description="Weather forecast.", input_schema=schema)
    await projection.apply(ToolsDiscovered(server_id=SID, server_name="weather", tools=[tool]), 3)
    skill = SkillAssignment(skill_id="weather", confidence=0.9)
    classified = ToolClassification(original_name="forecast", skills=[skill], primary_skill_id="weather")
    await projection.apply(ToolsClassified(server_id=SID, server_name="weather", classifier="t", tools=[classified]), 4)
    await projection.embed_all()
    await projection.flush()
    point = tool_point_id(SID, "forecast")
    await projection.index.set_payload([point], {"dense_text": "forecast: Weather forecast."})  # the old form
    await projection.index.close()

    restarted = IndexProjection(EdgeIndex(tmp_path, DIM), embedder, [], lanes=EmbeddingLanes(), dimensions=DIM)
    await restarted.start()
    assert restarted.vectors_behind == 1
    embedder.texts.clear()
    await restarted.embed_all()
    assert embedder.texts == ["forecast: Weather forecast. Parameters: City name"]
    (hit,) = await restarted.index.retrieve([point])
    assert hit.payload["dense_text"] == embedder.texts[0] and hit.payload["primary_skill_id"] == "weather"
    await restarted.index.close()


class _DirectionEmbedder:
    """Fixed unit vectors: the query along x; tool texts at chosen cosines to it."""

    model_id = "directions"
    dimensions = DIM

    def embed(self, texts: list[str]) -> np.ndarray:
        cosines = {"near": -0.1, "far": -0.5}
        rows = []
        for text in texts:
            cosine = next((c for word, c in cosines.items() if text.startswith(word)), 1.0)
            rows.append([cosine, (1 - cosine**2) ** 0.5] + [0.0] * (DIM - 2))
        return np.array(rows, dtype=np.float32).reshape(len(texts), DIM)


async def test_a_tool_without_a_vector_yet_ranks_below_tools_the_query_is_closer_to(tmp_path: Path) -> None:
    projection = IndexProjection(
        EdgeIndex(tmp_path, DIM), _DirectionEmbedder(), [], lanes=EmbeddingLanes(), dimensions=DIM
    )
    await projection.start()
    seq = 0
    for name in ("near", "far", "waiting"):
        sid = str(uuid.uuid5(uuid.NAMESPACE_URL, name))
        events = [
            ServerRegistered(server_id=sid, name=name, transport_type="STDIO", sealed_config="", masked_config={}),
            ServerStatusChanged(server_id=sid, status=ServerStatus.CONNECTED, history="CONNECTED"),
            ToolsDiscovered(server_id=sid, server_name=name, tools=[DiscoveredTool(original_name=name)]),
        ]
        for event in events:
            seq += 1
            await projection.apply(event, seq)
        if name != "waiting":
            await projection.embed_all()
    service = SearchService(projection.table.catalog, _DirectionEmbedder())
    found = await service.search(SearchRequest(query="qqq zzz", strategy="flat"))
    # Both embedded tools point away from the query (negative cosines); the waiting one has no vector.
    assert found.tools and found.tools[0].name == "near.near"
    await projection.index.close()
