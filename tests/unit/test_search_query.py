"""What of a query is searched: URLs as words, clauses; and a URL query ranked by the real model."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from toolmesh.contracts.events import DiscoveredTool, ServerRegistered, ServerStatusChanged, ToolsDiscovered
from toolmesh.contracts.search import SearchRequest
from toolmesh.embed.lane import EmbeddingLanes
from toolmesh.embed.model import DIMENSIONS, load_embedder
from toolmesh.lifecycle import ServerStatus
from toolmesh.search.query import clauses, searchable
from toolmesh.search.service import SearchService
from toolmesh_projector.index_projection import IndexProjection
from toolmesh_projector.vector_index.edge import EdgeIndex

pytestmark = pytest.mark.unit


def test_a_url_is_searched_as_a_web_page_and_its_host_words() -> None:
    assert searchable("summarise https://www.youtube.com/watch?v=arj7oStGLkU for me") == (
        "summarise web page url youtube for me"
    )
    assert searchable("read HTTP://news.ycombinator.com:8080/item?id=1") == "read web page url news ycombinator"
    assert searchable("open http://127.0.0.1:8000/x") == "open web page url"
    assert searchable("save it to /root/notes.md") == "save it to /root/notes.md"


@pytest.mark.parametrize("url", ["http://[::1]:8080/status", "http://127.0.0.1:8000/docs"])
def test_an_ip_address_url_is_a_web_page_without_host_words(url: str) -> None:
    assert searchable(f"check {url} now") == "check web page url now"


def test_the_punctuation_after_a_url_stays_a_clause_boundary() -> None:
    query = "Extract the key points of https://www.youtube.com/watch?v=arj7oStGLkU, organize them into a mind map."
    assert searchable(query) == "Extract the key points of web page url youtube, organize them into a mind map."
    assert clauses(searchable(query)) == [
        "Extract the key points of web page url youtube",
        "organize them into a mind map.",
    ]


def test_task_queries_split_into_clauses_and_a_single_clause_does_not() -> None:
    assert clauses("read the pdf at /tmp/a.pdf, summarise it and save the summary as markdown") == [
        "read the pdf at /tmp/a.pdf",
        "summarise it",
        "save the summary as markdown",
    ]
    assert clauses("map out a route with all the charging stations") == ["map out a route", "all the charging stations"]
    assert clauses("search the web") == []


def test_the_full_stop_of_a_title_or_an_example_ends_no_clause() -> None:
    assert clauses("Find Mr. Lu Yaojie's resume. Save it to /root/cv.md") == [
        "Find Mr Lu Yaojie's resume.",
        "Save it to /root/cv.md",
    ]
    assert clauses("compare stocks, e.g. Apple vs. Microsoft") == ["compare stocks", "e.g Apple vs Microsoft"]


TOOLS = [
    DiscoveredTool(original_name="watch_directory", description="Watch a directory and report file changes."),
    DiscoveredTool(original_name="fetch", description="Fetch a web page by its URL and return its content."),
    DiscoveredTool(original_name="send_email", description="Send an email to a recipient."),
]


async def test_a_url_query_finds_the_page_fetcher_not_a_tool_named_like_the_path_real_model(tmp_path: Path) -> None:
    embedder = load_embedder()
    assert embedder is not None, "the packaged model must load"
    index = EdgeIndex(tmp_path, DIMENSIONS)
    projection = IndexProjection(index, embedder, [], lanes=EmbeddingLanes())
    await projection.start()
    sid = str(uuid.uuid5(uuid.NAMESPACE_URL, "media"))
    events = [
        ServerRegistered(server_id=sid, name="media", transport_type="STDIO", sealed_config="", masked_config={}),
        ServerStatusChanged(server_id=sid, status=ServerStatus.CONNECTED, history="CONNECTED"),
        ToolsDiscovered(server_id=sid, server_name="media", tools=TOOLS),
    ]
    for seq, event in enumerate(events, start=1):
        await projection.apply(event, seq)
    await projection.flush()
    service = SearchService(projection.table.catalog, embedder)
    request = SearchRequest(query="what does https://example.org/docs/watch say", strategy="flat")
    response = await service.search(request)
    assert response.tools[0].original_name == "fetch"
    assert response.query == request.query
    await index.close()
